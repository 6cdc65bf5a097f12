"""Self-contained HTML report of one or more elastic simulations (inline SVG, matplotlib Agg):
the comparison table, JCT CDFs, GPU allocation and workers per job over time."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..elastic.compare import table_rows
from ..elastic.results import SimResult
from .charts import RC, Plotter, pyplot


def _jct_cdf(results: Sequence[SimResult], plotter: Plotter) -> str:
    plt = plotter.plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        j = np.sort([x.jct / 3600 for x in r.jobs if x.jct is not None])
        if len(j):
            ax.step(j, np.arange(1, len(j) + 1) / len(j), where="post", label=r.policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return plotter.render(fig)


def _alloc(results: Sequence[SimResult], plotter: Plotter) -> str:
    plt = plotter.plt
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r in results:
        ts = [t / 3600 for t, _ in r.timeline]
        ys = [sum(a.values()) for _, a in r.timeline]
        ax.step(ts, ys, where="post", label=r.policy, lw=1)
    if results:
        ax.axhline(sum(results[0].capacity.values()), color="k", lw=0.8, ls="--")
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPUs allocated")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return plotter.render(fig)


def _workers(r: SimResult, plotter: Plotter, max_jobs: int = 40) -> str:
    plt = plotter.plt
    jobs = [j for j in r.jobs if j.history][:max_jobs]
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.16 * len(jobs) + 1)))
    cmap = plt.get_cmap("viridis")
    maxw = max((n for j in jobs for _, n, _ in j.history), default=1) or 1
    for i, j in enumerate(jobs):
        hist = j.history
        for (t0, n, _), (t1, _, _) in zip(hist, hist[1:]):
            if n > 0 and t1 > t0:
                ax.barh(i, (t1 - t0) / 3600, left=t0 / 3600, height=0.8, color=cmap(n / maxw), lw=0)
    ax.set_yticks(range(len(jobs)))
    ax.set_yticklabels([j.name for j in jobs], fontsize=5)
    ax.invert_yaxis()
    ax.set_xlabel("time (hours)")
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, maxw))
    fig.colorbar(sm, ax=ax, label="workers")
    ax.set_title(f"{r.policy}: workers per job (first {len(jobs)} jobs)", fontsize=9)
    return plotter.render(fig)


def render_report(results: Sequence[SimResult], title: str = "lavaflow elastic simulation") -> str:
    import matplotlib

    plotter = Plotter(pyplot())
    header, rows = table_rows(results)
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<table><tr>{th}</tr>{trs}</table>",
        "<p>reads work: the policy read jobs' remaining work (clairvoyant). oracle: the policy was handed "
        "the simulator's true speed models, which no real scheduler has; otherwise it read speed models "
        "learned from what the jobs reported. shares: jobs of one model (lavaflow.io/profile-group) learned "
        "from each other's reports.</p>",
    ]
    if any(r.oracle for r in results):
        parts.append(
            "<p><b>Some rows used the oracle speed models: compare them with another system's figures only "
            "saying so.</b></p>"
        )
    with matplotlib.rc_context(RC):
        parts += [
            "<h2>JCT CDF per policy</h2>",
            _jct_cdf(results, plotter),
            "<h2>GPU allocation over time</h2>",
            _alloc(results, plotter),
            "<h2>Workers per job over time</h2>",
        ]
        parts += [_workers(r, plotter) for r in results]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(results: Sequence[SimResult], path: Path | str, title: str = "lavaflow elastic simulation") -> None:
    Path(path).write_text(render_report(results, title))
