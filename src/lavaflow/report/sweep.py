"""Self-contained HTML report of a sweep (`lavaflow sweep`): the best configuration per trace,
means with 95 % confidence intervals over seeds, one plot per axis, failed runs, every run.

A *trace* is what a run replays (its input, load and cluster); a *configuration* is everything
else it varies but the seed (configuration file, policy, parameters, settings). Means and
intervals are over the seeds of one trace and configuration (Student's t, n − 1 degrees of
freedom); with one seed there is no interval.
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from .charts import RC, Plotter, pyplot
from .simulation import _num

TRACE_AXES = ("input", "load", "cluster")
# (label, candidate figures in order, higher is better)
METRICS = (
    ("mean JCT (s)", ("elastic_avg_jct", "jct_mean"), False),
    ("makespan (s)", ("elastic_makespan", "makespan"), False),
    ("utilisation", ("elastic_gpu_utilization", "gpu_allocation_mean", "cpu_allocation_mean"), True),
)

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0;font-size:.85em}"
    "td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}th{background:#f2f2f2}"
    "td.l,th.l{text-align:left}.bad{color:#b00020}.note{color:#555}"
    ".plot svg{max-width:100%;height:auto}details summary{cursor:pointer}"
)


def _avg(values: Sequence[float] | None) -> float | None:
    return sum(values) / len(values) if values else None


def mean_ci(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and the half-width of its 95 % confidence interval (Student's t; None for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    from scipy.stats import t

    sd = math.sqrt(sum((x - m) ** 2 for x in values) / (n - 1))
    return m, float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def _label(row: dict[str, Any], axes: Sequence[str]) -> str:
    parts = []
    for a in axes:
        v = row.get(a)
        if v is None:
            continue
        parts.append(str(v) if a in ("input", "policy", "config", "cluster") else f"{a}={v}")
    return ", ".join(parts) or "(default)"


def _fmt(v: float | None, ci: float | None = None, frac: bool = False) -> str:
    if v is None:
        return "—"
    if frac:
        s = f"{100 * v:.1f}%"
        return s + (f" ± {100 * ci:.1f}" if ci is not None else "")
    s = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return s + (f" ± {ci:,.0f}" if ci is not None and abs(v) >= 100 else f" ± {ci:.2g}" if ci is not None else "")


def _is_fraction(fig: str) -> bool:
    return "utilization" in fig or "allocation" in fig


def _e(v: Any) -> str:
    return "" if v is None else html.escape(str(v))


def render_report(rows: list[dict[str, Any]], axes: Sequence[str], title: str = "lavaflow sweep") -> str:
    import matplotlib

    ok = [r for r in rows if r.get("status") == "ok"]
    failed = [r for r in rows if r.get("status") != "ok"]
    metrics = []
    for label, figs, higher in METRICS:
        fig = next((c for c in figs if any(_num(r.get(c)) is not None for r in ok)), None)
        if fig is not None:
            metrics.append((label, fig, higher))
    varying = [a for a in axes if len({str(r.get(a)) for r in rows}) > 1 or a == "seed"]
    # a trace is named by all its axes, varying or not (the report names what was replayed)
    trace_axes = [a for a in axes if a in TRACE_AXES and any(r.get(a) is not None for r in rows)]
    conf_axes = [a for a in axes if a not in TRACE_AXES and a != "seed" and a in varying]
    # (trace, configuration) -> metric figure -> values over seeds
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in ok:
        g = groups.setdefault((_label(r, trace_axes), _label(r, conf_axes)), {})
        for fig in [f for _, f, _ in metrics] + ["completed", "jobs"]:
            v = _num(r.get(fig))
            if v is not None:
                g.setdefault(fig, []).append(v)
    seeds = sorted({r.get("seed") for r in rows}, key=str)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{len(rows)} runs: {len(ok)} ok, <span class='{'bad' if failed else ''}'>{len(failed)} failed</span>; "
        f"{len(seeds)} seed(s); axes that vary: {_e(', '.join(varying) or 'none')}. Means are over seeds with "
        "95&nbsp;% confidence intervals (Student's t); a trace is an input × load × cluster, a configuration "
        "everything else but the seed.</p>",
    ]
    if metrics:
        jlabel, jfig, jhigher = metrics[0]
        parts.append(f"<h2>Best configuration per trace (by {_e(jlabel)})</h2>")
        parts.append(
            "<table><tr><th class='l'>trace</th><th class='l'>best configuration</th>"
            f"<th>{_e(jlabel)}</th><th>seeds</th><th>jobs finished</th><th class='l'>next best</th>"
            "<th>difference</th><th>Welch's p</th></tr>"
        )
        unequal = False
        traces = sorted({t for t, _ in groups})
        for tr in traces:
            cands = [(c, g[jfig]) for (t, c), g in groups.items() if t == tr and g.get(jfig)]
            cands.sort(key=lambda cv: (-1 if jhigher else 1) * mean_ci(cv[1])[0])
            if not cands:
                continue
            best, bv = cands[0]
            m, ci = mean_ci(bv)
            nxt, diff, p = "—", "—", "—"
            if len(cands) > 1:
                nc, nv = cands[1]
                nm = mean_ci(nv)[0]
                nxt = _e(nc)
                diff = f"{100 * (nm / m - 1):+.1f}%" if m else "—"
                if len(bv) > 1 and len(nv) > 1:
                    from scipy.stats import ttest_ind

                    with warnings.catch_warnings():  # identical values over seeds: no p-value
                        warnings.simplefilter("ignore")
                        pv = float(ttest_ind(bv, nv, equal_var=False).pvalue)
                    p = "—" if not math.isfinite(pv) else f"{pv:.3g}"
            finished = {c: (_avg(g.get("completed")), _avg(g.get("jobs"))) for (t, c), g in groups.items() if t == tr}
            mark = ""
            if len({f for f, _ in finished.values()}) > 1 or any(f != j for f, j in finished.values()):
                unequal = True
                mark = " <span class='bad'>⚠</span>"
            done, jobs = finished[best]
            parts.append(
                f"<tr><td class='l'>{_e(tr)}</td><td class='l'><b>{_e(best)}</b></td><td>{_fmt(m, ci)}</td>"
                f"<td>{len(bv)}</td><td>{_fmt(done)} of {_fmt(jobs)}{mark}</td><td class='l'>{nxt}</td>"
                f"<td>{diff}</td><td>{p}</td></tr>"
            )
        parts.append(
            "</table><p class='note'>difference: the next best's mean against the best's; Welch's p: "
            "two-sided t-test of the two over seeds (— with fewer than two seeds each); jobs finished: "
            "the best configuration's mean over seeds.</p>"
        )
        if unequal:
            parts.append(
                "<p class='bad'>⚠ Some runs left jobs unfinished (cut by <code>until</code>, or stuck), or the "
                "configurations of a trace finished different numbers of jobs: JCT means count finished "
                "jobs only, so a configuration that finishes fewer can look better. Read them with the jobs "
                "finished and the makespan.</p>"
            )
        parts.append("<h2>Means over seeds (95&nbsp;% CI)</h2><table><tr><th class='l'>trace</th>")
        parts.append("<th class='l'>configuration</th><th>seeds</th>")
        parts.append("".join(f"<th>{_e(lbl)}</th>" for lbl, _, _ in metrics) + "</tr>")
        for (tr, conf), g in sorted(groups.items()):
            cells = []
            for _, fig, _ in metrics:
                vals = g.get(fig)
                cells.append(_fmt(*mean_ci(vals), frac=_is_fraction(fig)) if vals else "—")
            n = max((len(v) for v in g.values()), default=0)
            parts.append(
                f"<tr><td class='l'>{_e(tr)}</td><td class='l'>{_e(conf)}</td><td>{n}</td>"
                + "".join(f"<td>{c}</td>" for c in cells)
                + "</tr>"
            )
        parts.append("</table>")
        with matplotlib.rc_context(RC):
            plotter = Plotter(pyplot(), wrap=True)
            plots = [a for a in axes if a != "seed" and a in varying]
            if plots:
                parts.append("<h2>Per axis</h2>")
            for a in plots:
                parts.append(f"<h3>{_e(a)}</h3>")
                parts.append(_axis_plot(ok, a, varying, metrics, plotter))
    if failed:
        parts.append("<h2 class='bad'>Failed runs</h2><table><tr><th class='l'>key</th><th class='l'>run</th>")
        parts.append("<th class='l'>error</th></tr>")
        for r in failed:
            parts.append(
                f"<tr><td class='l'>{_e(r.get('key'))}</td><td class='l'>{_e(_label(r, axes))}</td>"
                f"<td class='l'>{_e(r.get('error'))}</td></tr>"
            )
        parts.append("</table>")
    parts.append(f"<details><summary>every run ({len(rows)})</summary><table><tr>")
    cols = ["key", "status", *axes] + [fig for _, fig, _ in metrics]
    parts.append("".join(f"<th class='l'>{_e(c)}</th>" for c in cols) + "</tr>")
    for r in rows:
        parts.append("<tr>" + "".join(f"<td class='l'>{_e(r.get(c))}</td>" for c in cols) + "</tr>")
    parts.append("</table></details></body></html>")
    return "\n".join(parts)


def _series_axes(ok: list[dict[str, Any]], axis: str, varying: list[str], most: int = 8) -> list[str]:
    """The other axes that split a plot into series: those with the fewest values first, as long
    as there are at most ``most`` series; the rest are pooled."""
    counts = sorted((len({str(r.get(a)) for r in ok}), a) for a in varying if a not in (axis, "seed"))
    chosen: list[str] = []
    n = 1
    for c, a in counts:
        if n * c > most:
            break
        chosen.append(a)
        n *= c
    return [a for a in varying if a in chosen]


def _axis_plot(
    ok: list[dict[str, Any]], axis: str, varying: list[str], metrics: list[tuple[str, str, bool]], plotter: Plotter
) -> str:
    """Each metric against the axis' values (runs where the axis does not apply, such as a
    parameter of a policy that does not take it, left out): one series per combination of the
    other axes with the fewest values (at most 8), every other axis pooled; points are the mean
    over the runs at that value, bars their 95 % CI. Numeric axes are drawn as lines."""
    plt = plotter.plt
    runs = [r for r in ok if r.get(axis) is not None]
    values = sorted({r.get(axis) for r in runs}, key=lambda v: (_num(v) if _num(v) is not None else math.inf, str(v)))
    numeric = all(_num(v) is not None for v in values)
    series_axes = _series_axes(runs, axis, varying)
    names = sorted({_label(r, series_axes) for r in runs}) if series_axes else ["all runs"]
    fig, axs = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    xs = cast("list[float]", [_num(v) for v in values]) if numeric else list(range(len(values)))
    span = (max(xs) - min(xs)) if numeric and len(xs) > 1 else 1.0
    width = (0.03 * span if numeric else 0.6) / max(1, len(names))
    for ax, (label, figname, _) in zip(axs[0], metrics):
        for i, name in enumerate(names):
            ys, es = [], []
            for v in values:
                vals = [
                    x
                    for r in runs
                    if r.get(axis) == v and (not series_axes or _label(r, series_axes) == name)
                    for x in [_num(r.get(figname))]
                    if x is not None
                ]
                m, ci = mean_ci(vals) if vals else (math.nan, None)
                ys.append(m)
                es.append(ci or 0.0)
            off = (i - (len(names) - 1) / 2) * width
            ax.errorbar(
                [x + off for x in xs], ys, yerr=es, fmt="o-" if numeric else "o", ms=4, lw=1, capsize=3, label=name
            )
        ax.set_xticks(xs)
        ax.set_xticklabels([str(v) for v in values], rotation=30 if len(values) > 4 else 0, fontsize=7)
        ax.set_xlabel(axis)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    pooled = [a for a in varying if a not in series_axes and a != axis]
    title = f"series: {', '.join(series_axes) or '—'}; pooled: {', '.join(pooled) or '—'}"
    fig.suptitle(title, fontsize=8)
    if series_axes:
        handles, labels = axs[0][0].get_legend_handles_labels()
        fig.legend(handles, [lb[:60] for lb in labels], loc="lower center", ncol=min(4, len(labels)), fontsize=7)
        fig.tight_layout(rect=(0, 0.08 + 0.05 * ((len(labels) - 1) // 4), 1, 0.95))
    else:
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    return plotter.render(fig)


def write_report(
    rows: list[dict[str, Any]], header: Sequence[str], path: Path | str, title: str = "lavaflow sweep"
) -> None:
    """The report of a sweep's table (``header``: its columns; the axes are those between
    ``status`` and the first figure)."""
    axes = []
    for c in header[2:]:
        if c == "seed":
            axes.append(c)
            break
        axes.append(c)
    Path(path).write_text(render_report(rows, axes, title), encoding="utf-8")
