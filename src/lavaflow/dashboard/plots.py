"""The dashboard's charts: matplotlib figures as inline SVG, drawn as the HTML reports draw theirs
(:mod:`lavaflow.report.charts`). Only the pages of one object draw one; the lists stay plain."""

from __future__ import annotations

from collections.abc import Sequence

from ..report.charts import RC, Plotter, pyplot
from .model import Resize


def _plotter() -> Plotter:
    plt = pyplot()
    plt.rcParams.update(RC)
    return Plotter(plt, wrap=True)


def shares_chart(rows: Sequence[tuple[str, float, float, float | None]]) -> str:
    """Per resource: what a queue deserves and holds, as fractions of the cluster's allocatable
    (``rows``: resource, deserved, allocated, capability — fractions; capability None: none)."""
    p = _plotter()
    fig, ax = p.plt.subplots(figsize=(6.4, 0.55 * len(rows) + 0.9))
    ys = list(range(len(rows)))
    ax.barh([y + 0.2 for y in ys], [r[1] for r in rows], height=0.38, color="#9ecae1", label="deserved")
    ax.barh([y - 0.2 for y in ys], [r[2] for r in rows], height=0.38, color="#3182bd", label="allocated")
    for y, r in zip(ys, rows):
        if r[3] is not None:
            ax.plot([r[3], r[3]], [y - 0.45, y + 0.45], color="#d62728", linewidth=1.5)
    ax.set_yticks(ys, [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("share of the cluster's allocatable (red: capability)")
    ax.set_xlim(0, max([1.0] + [max(r[1], r[2]) for r in rows]))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return p.render(fig)


def workers_chart(history: Sequence[Resize], until: float, simulated: bool) -> str:
    """An elastic job's worker count over time, a marker at each change (its reason is listed
    below the chart)."""
    p = _plotter()
    fig, ax = p.plt.subplots(figsize=(6.4, 2.6))
    if history:
        t0 = 0.0 if simulated else history[0].time
        xs = [r.time - t0 for r in history] + [max(until - t0, history[-1].time - t0)]
        ys = [r.workers for r in history] + [history[-1].workers]
        ax.step(xs, ys, where="post", color="#3182bd")
        ax.plot(xs[:-1], ys[:-1], "o", color="#3182bd", markersize=4)
        ax.set_ylim(0, max(ys) + 1)
    ax.set_xlabel("simulated seconds" if simulated else "seconds since the first change seen")
    ax.set_ylabel("workers")
    ax.grid(alpha=0.3)
    return p.render(fig)


def gpus_chart(rows: Sequence[tuple[str, float, float]]) -> str:
    """GPUs by type: allocated and free (``rows``: type, allocated, allocatable)."""
    p = _plotter()
    fig, ax = p.plt.subplots(figsize=(6.4, 0.35 * len(rows) + 0.8))
    ys = list(range(len(rows)))
    used = [r[1] for r in rows]
    ax.barh(ys, used, height=0.5, color="#3182bd", label="allocated")
    ax.barh(ys, [max(r[2] - r[1], 0.0) for r in rows], height=0.5, left=used, color="#deebf7", label="free")
    ax.set_ylim(-0.75, len(rows) - 0.25)
    ax.set_yticks(ys, [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("GPUs")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return p.render(fig)
