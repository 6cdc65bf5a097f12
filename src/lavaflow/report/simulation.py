"""Self-contained HTML report for one or more simulation runs.

``write_report(results, path)`` renders a single HTML page with inline CSS and
inline SVG plots (matplotlib, Agg backend); the page references no external
resources and contains no JavaScript.

Each element of ``results`` is the JSON-like result of one simulation run::

    {"scheduler": str, "stalled": bool, "endTime": float,
     "jobs": [...], "podGroups": [...], "pods": [...], "stuck": [...],
     "summary": {...}, "timeline": [...]}

Missing keys and ``None`` values are tolerated everywhere; unknown keys are
ignored.
"""

from __future__ import annotations

import html
import math
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ..api.volcano import JobPhase
from .charts import RC, Plotter, pyplot

__all__ = ["write_report"]

#: Gantt charts with more pods than this are not drawn (a note is shown).
MAX_GANTT_PODS = 20_000
#: Draw a legend on the Gantt chart only up to this many jobs.
MAX_LEGEND_JOBS = 20
#: Collapse the jobs table into a <details> element above this many jobs.
JOBS_TABLE_COLLAPSE = 50
#: Maximum Gantt figure height in inches.
MAX_GANTT_HEIGHT_IN = 30.0

_DASH = "\u2014"

# (key, label, kind) for the summary table; kind: int | dur | frac
_SUMMARY_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("completed", "Completed jobs", "int"),
    ("failed", "Failed jobs", "int"),
    ("stuck", "Stuck jobs", "int"),
    ("makespan", "Makespan (s)", "dur"),
    ("jctMean", "JCT mean (s)", "dur"),
    ("jctP50", "JCT p50 (s)", "dur"),
    ("jctP95", "JCT p95 (s)", "dur"),
    ("waitMean", "Wait mean (s)", "dur"),
    ("waitP50", "Wait p50 (s)", "dur"),
    ("waitP95", "Wait p95 (s)", "dur"),
    ("cpuAllocationMean", "CPU allocation mean", "frac"),
    ("gpuAllocationMean", "GPU allocation mean", "frac"),
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:2px solid #ccc;padding-bottom:.2em;margin-top:2em}h3{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#666;font-style:italic}.bad{color:#b00020;font-weight:600}
.plot svg{max-width:100%;height:auto}.plot svg *{stroke-linejoin:round;stroke-linecap:butt}
nav a{margin-right:1em}details summary{cursor:pointer;margin:.5em 0}
"""


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def _e(value: Any) -> str:
    """HTML-escape any value (None -> empty string)."""
    if value is None:
        return ""
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float | None:
    """Coerce to a finite float, or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _fmt_dur(value: Any) -> str:
    f = _num(value)
    return _DASH if f is None else f"{f:.1f}"


def _fmt_frac(value: Any) -> str:
    f = _num(value)
    return _DASH if f is None else f"{100.0 * f:.1f}%"


def _fmt_int(value: Any) -> str:
    if value is None:
        return _DASH
    if isinstance(value, bool):
        return _e(value)
    f = _num(value)
    if f is None:
        return _e(value)
    return str(int(f)) if f == int(f) else f"{f:.1f}"


def _fmt(kind: str, value: Any) -> str:
    if kind == "dur":
        return _fmt_dur(value)
    if kind == "frac":
        return _fmt_frac(value)
    return _fmt_int(value)


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)) else []


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mpl(text: Any) -> str:
    """Make a user string safe as matplotlib text (no mathtext, no hidden label)."""
    s = "" if text is None else str(text)
    s = s.replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def _natural_key(name: str) -> list[tuple[int, int, str]]:
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok.lower()) for tok in re.split(r"(\d+)", name) if tok]


def _qualified(namespace: Any, name: Any) -> str:
    ns = "" if namespace is None else str(namespace)
    nm = "" if name is None else str(name)
    return f"{ns}/{nm}" if ns else nm


def _scheduler_names(results: Sequence[Mapping[str, Any]]) -> list[str]:
    names = []
    for i, r in enumerate(results):
        s = r.get("scheduler")
        names.append(str(s) if s not in (None, "") else f"run {i + 1}")
    return names


def _jcts(result: Mapping[str, Any]) -> list[float]:
    out = []
    for job in _list(result.get("jobs")):
        job = _dict(job)
        if job.get("phase") not in (JobPhase.COMPLETED, JobPhase.FAILED):
            continue
        sub, fin = _num(job.get("submitTime")), _num(job.get("finishTime"))
        if sub is None or fin is None:
            continue
        out.append(fin - sub)
    return sorted(out)


def _end_time(result: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> float:
    end = _num(result.get("endTime"))
    if end is not None:
        return end
    # fall back to the latest time we know about
    best = 0.0
    for p in pods:
        for k in ("createTime", "startTime", "finishTime"):
            v = _num(p.get(k))
            if v is not None and v > best:
                best = v
    for pt in _list(result.get("timeline")):
        v = _num(_dict(pt).get("time"))
        if v is not None and v > best:
            best = v
    return best


def _job_colors(job_keys: Sequence[str], plt: Any) -> dict[str, Any]:
    n = len(job_keys)
    if n <= 20:
        cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
        return {k: cmap(i % cmap.N) for i, k in enumerate(job_keys)}
    cmap = plt.get_cmap("turbo")
    # spread hues, interleaving so neighbours in sort order differ strongly
    step = 0.381966  # golden-ratio conjugate
    return {k: cmap(0.05 + 0.9 * ((i * step) % 1.0)) for i, k in enumerate(job_keys)}


def _gantt(result: Mapping[str, Any], plotter: Plotter) -> str:
    plt = plotter.plt
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    pods = [_dict(p) for p in _list(result.get("pods"))]
    end = _end_time(result, pods)
    bars: list[tuple[str, str, float, float, bool]] = []  # node, job, start, end, unfinished
    for p in pods:
        node = p.get("node")
        start = _num(p.get("startTime"))
        if node in (None, "") or start is None:
            continue
        fin = _num(p.get("finishTime"))
        unfinished = fin is None
        stop = end if fin is None else fin
        if stop < start:
            stop = start
        job = _qualified(p.get("namespace"), p.get("job") if p.get("job") is not None else p.get("name"))
        bars.append((str(node), job, start, stop, unfinished))

    if not bars:
        return '<p class="note">No pods were placed on nodes; nothing to draw.</p>'
    if len(bars) > MAX_GANTT_PODS:
        return f'<p class="note">Gantt chart skipped: {len(bars)} placed pods (more than {MAX_GANTT_PODS}).</p>'

    nodes = sorted({b[0] for b in bars}, key=_natural_key)
    row = {n: i for i, n in enumerate(nodes)}
    jobs = sorted({b[1] for b in bars}, key=_natural_key)
    colors = _job_colors(jobs, plt)

    # Pods that overlap in time on one node get lanes of their own within the node's row.
    lane_of: list[int] = [0] * len(bars)
    lanes_per_node: dict[str, int] = {}
    by_node: dict[str, list[int]] = {}
    for i, b in enumerate(bars):
        by_node.setdefault(b[0], []).append(i)
    for node, idx in by_node.items():
        ends: list[float] = []  # end time of the last bar in each lane
        for i in sorted(idx, key=lambda i: (bars[i][2], bars[i][3])):
            s0, t0 = bars[i][2], bars[i][3]
            free = next((k for k, e in enumerate(ends) if e <= s0), None)
            if free is None:
                ends.append(t0)
                free = len(ends) - 1
            else:
                ends[free] = t0
            lane_of[i] = free
        lanes_per_node[node] = max(len(ends), 1)

    verts, faces, edges = [], [], []
    for i, (node, job, s, t, unfinished) in enumerate(bars):
        lanes = lanes_per_node[node]
        h = 0.8 / lanes
        y0 = row[node] - 0.4 + lane_of[i] * h
        w = max(t - s, 0.0)
        verts.append([(s, y0), (s, y0 + h * 0.9), (s + w, y0 + h * 0.9), (s + w, y0)])
        faces.append(colors[job])
        edges.append((0.0, 0.0, 0.0, 0.9) if unfinished else (1.0, 1.0, 1.0, 0.6))

    n_nodes = len(nodes)
    height = min(MAX_GANTT_HEIGHT_IN, max(2.5, 1.2 + 0.22 * n_nodes))
    fontsize = 8 if n_nodes <= 60 else (6 if n_nodes <= 120 else 4.5)
    fig, ax = plt.subplots(figsize=(11, height))
    lw = 0.4 if len(bars) < 2000 else 0.0
    coll = PolyCollection(verts, facecolors=faces, edgecolors=edges, linewidths=lw)
    ax.add_collection(coll)
    ax.set_ylim(-0.6, n_nodes - 0.4)
    xmax = max(end, max(b[3] for b in bars))
    xmin = min(0.0, min(b[2] for b in bars))
    ax.set_xlim(xmin, xmax if xmax > xmin else xmin + 1.0)
    ax.invert_yaxis()
    ax.set_yticks(range(n_nodes))
    ax.set_yticklabels([_mpl(n) for n in nodes], fontsize=fontsize)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("node")
    ax.set_title("Pods per node (black edge = not finished by end of run)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if len(jobs) <= MAX_LEGEND_JOBS:
        handles = [Patch(facecolor=colors[j], label=_mpl(j)) for j in jobs]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, title="job", frameon=False)
    note = ""
    if len(jobs) > MAX_LEGEND_JOBS:
        note = f'<p class="note">{len(jobs)} jobs; legend omitted.</p>'
    return plotter.render(fig) + note


def _allocation(result: Mapping[str, Any], plotter: Plotter) -> str:
    plt = plotter.plt
    timeline = [_dict(p) for p in _list(result.get("timeline"))]
    timeline = [p for p in timeline if _num(p.get("time")) is not None]
    if not timeline:
        return '<p class="note">No timeline data.</p>'
    # (every point left has a time)
    timeline.sort(key=lambda p: cast(float, _num(p.get("time"))))
    times = cast("list[float]", [_num(p.get("time")) for p in timeline])

    resources: list[str] = []
    for p in timeline:
        for name, cap in _dict(p.get("capacity")).items():
            c = _num(cap)
            if c is not None and c > 0 and name not in resources:
                resources.append(str(name))
    order = {"cpu": 0, "memory": 1}
    resources.sort(key=lambda r: (order.get(r, 2), r))

    end = _num(result.get("endTime"))
    x = list(times)
    if end is not None and end > x[-1]:
        x.append(end)  # extend the last step to the end of the run

    def extend(ys: list[float]) -> list[float]:
        return ys + [ys[-1]] if len(x) > len(ys) else ys

    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 5.2), sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    styles = ("-", "--", ":", "-.")
    for idx, res in enumerate(resources):
        ys = []
        for p in timeline:
            a = _num(_dict(p.get("allocated")).get(res))
            c = _num(_dict(p.get("capacity")).get(res))
            ys.append((a or 0.0) / c if c else float("nan"))
        ax.step(x, extend(ys), where="post", label=_mpl(res), linewidth=1.6, linestyle=styles[idx % len(styles)])
    if resources:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, "no resource with capacity > 0", transform=ax.transAxes, ha="center", va="center")
    ax.set_ylim(-0.02, 1.05)
    ax.set_ylabel("allocated / capacity")
    ax.set_title("Cluster allocation over time", fontsize=10)
    ax.grid(alpha=0.3)

    running = [_num(p.get("runningPods")) or 0.0 for p in timeline]
    pending = [_num(p.get("pendingPods")) or 0.0 for p in timeline]
    ax2.step(x, extend(running), where="post", label="running pods", color="tab:green")
    ax2.step(x, extend(pending), where="post", label="pending pods", color="tab:red")
    ax2.set_ylabel("pods")
    ax2.set_xlabel("simulated time (s)")
    ax2.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax2.grid(alpha=0.3)
    ax2.set_ylim(bottom=0)
    return plotter.render(fig)


def _queue_shares(result: Mapping[str, Any], plotter: Plotter, resource: str = "cpu") -> str:
    """Allocation of each queue over time (solid) against its deserved share (dashed), with Jain's index."""
    plt = plotter.plt
    timeline = [_dict(p) for p in _list(result.get("timeline")) if _num(_dict(p).get("time")) is not None]
    queues = sorted(
        {q for p in timeline for q in _dict(p.get("queues"))} | {q for p in timeline for q in _dict(p.get("deserved"))}
    )
    if len(queues) < 2:
        return ""
    times = [_num(p.get("time")) for p in timeline]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 5.2), sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ratios_by_time: list[list[float]] = [[] for _ in timeline]
    for i, q in enumerate(queues):
        alloc = [_num(_dict(_dict(p.get("queues")).get(q)).get(resource)) or 0.0 for p in timeline]
        des = [_num(_dict(_dict(p.get("deserved")).get(q)).get(resource)) or 0.0 for p in timeline]
        color = colors[i % len(colors)]
        ax.step(times, alloc, where="post", color=color, label=f"{_mpl(q)} allocated", linewidth=1.5)
        ax.step(times, des, where="post", color=color, linestyle="--", linewidth=1.0, label=f"{_mpl(q)} deserved")
        for k, (a, d) in enumerate(zip(alloc, des)):
            if d > 0:
                ratios_by_time[k].append(a / d)
    jain = []
    for r in ratios_by_time:
        sq = sum(x * x for x in r)
        jain.append((sum(r) ** 2) / (len(r) * sq) if r and sq > 0 else float("nan"))
    ax.set_ylabel(f"{_mpl(resource)} allocated")
    ax.set_title(f"Queue allocation over time ({_mpl(resource)}; dashed: deserved share)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    ax2.step(times, jain, where="post", color="black", linewidth=1.2)
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("Jain's index")
    ax2.set_xlabel("simulated time (s)")
    ax2.grid(alpha=0.3)
    return plotter.render(fig)


def _cdf_plot(series: Sequence[tuple[str, list[float]]], plotter: Plotter, title: str) -> str:
    plt = plotter.plt
    series = [(name, vals) for name, vals in series if vals]
    if not series:
        return '<p class="note">No completed or failed jobs; no JCT distribution.</p>'
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, vals in series:
        n = len(vals)
        xs = [vals[0]] + list(vals)
        ys = [0.0] + [(i + 1) / n for i in range(n)]
        ax.step(xs, ys, where="post", label=_mpl(f"{name} (n={n})"), linewidth=1.5)
    ax.set_xlabel("job completion time: finish \u2212 submit (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title(_mpl(title), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return plotter.render(fig)


# --------------------------------------------------------------------------
# HTML tables
# --------------------------------------------------------------------------


def _extra_summary_keys(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    known = {k for k, _, _ in _SUMMARY_FIELDS}
    extra: list[str] = []
    for s in summaries:
        for k, v in s.items():
            if k in known or k in extra:
                continue
            if v is None or isinstance(v, (int, float, str, bool)):
                extra.append(str(k))
    return extra


def _summary_table(result: Mapping[str, Any]) -> str:
    summary = _dict(result.get("summary"))
    rows = []
    stalled = bool(result.get("stalled"))
    rows.append("<tr><th>Stalled</th><td" + (' class="bad">yes' if stalled else ">no") + "</td></tr>")
    rows.append(f'<tr><th>End time (s)</th><td class="num">{_fmt_dur(result.get("endTime"))}</td></tr>')
    for key, label, kind in _SUMMARY_FIELDS:
        rows.append(f'<tr><th>{_e(label)}</th><td class="num">{_e(_fmt(kind, summary.get(key)))}</td></tr>')
    for key in _extra_summary_keys([summary]):
        v = summary.get(key)
        # each branch already yields HTML-safe text
        cell = _fmt_dur(v) if isinstance(v, float) else _fmt_int(v) if isinstance(v, int) else _e(v)
        rows.append(f'<tr><th>{_e(key)}</th><td class="num">{cell}</td></tr>')
    return '<table class="summary">' + "".join(rows) + "</table>"


def _stuck_table(result: Mapping[str, Any]) -> str:
    return _stuck_rows(result) + _lost_table(result)


def _lost_table(result: Mapping[str, Any]) -> str:
    """Jobs that ended without completing their work (lost with a node, evicted, deleted)."""
    lost = [_dict(j) for j in _list(result.get("jobs")) if _dict(j).get("reason")]
    if not lost:
        return ""
    rows = "".join(
        f"<tr><td>{_e(_qualified(j.get('namespace'), j.get('name')))}</td><td>{_e(j.get('phase'))}</td>"
        f"<td>{_e(j.get('reason'))}</td></tr>"
        for j in lost
    )
    return f'<table class="stuck"><tr><th>Job that lost work</th><th>Phase</th><th>Reason</th></tr>{rows}</table>'


def _stuck_rows(result: Mapping[str, Any]) -> str:
    stuck = [_dict(s) for s in _list(result.get("stuck"))]
    if not stuck:
        return '<p class="note">No stuck jobs.</p>'
    rows = "".join(
        f"<tr><td>{_e(_qualified(s.get('namespace'), s.get('name')))}</td><td>{_e(s.get('reason'))}</td></tr>"
        for s in stuck
    )
    return f'<table class="stuck"><tr><th>Stuck job</th><th>Reason</th></tr>{rows}</table>'


def _jobs_table(result: Mapping[str, Any]) -> str:
    jobs = [_dict(j) for j in _list(result.get("jobs"))]
    if not jobs:
        return '<p class="note">No jobs.</p>'
    head = (
        "<tr><th>Job</th><th>Queue</th><th>Phase</th><th>Submitted (s)</th><th>Started (s)</th>"
        "<th>Finished (s)</th><th>Waited (s)</th><th>Ran (s)</th></tr>"
    )
    rows = []
    for j in jobs:
        sub, st, fin = _num(j.get("submitTime")), _num(j.get("startTime")), _num(j.get("finishTime"))
        waited = st - sub if st is not None and sub is not None else None
        ran = fin - st if fin is not None and st is not None else None
        rows.append(
            "<tr>"
            f"<td>{_e(_qualified(j.get('namespace'), j.get('name')))}</td>"
            f"<td>{_e(j.get('queue'))}</td>"
            f"<td>{_e(j.get('phase'))}{_e(': ' + str(j['reason'])) if j.get('reason') else ''}</td>"
            f'<td class="num">{_fmt_dur(sub)}</td>'
            f'<td class="num">{_fmt_dur(st)}</td>'
            f'<td class="num">{_fmt_dur(fin)}</td>'
            f'<td class="num">{_fmt_dur(waited)}</td>'
            f'<td class="num">{_fmt_dur(ran)}</td>'
            "</tr>"
        )
    table = f'<table class="jobs">{head}{"".join(rows)}</table>'
    if len(jobs) > JOBS_TABLE_COLLAPSE:
        return f"<details><summary>{len(jobs)} jobs (click to expand)</summary>{table}</details>"
    return table


def _comparison_table(results: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str:
    summaries = [_dict(r.get("summary")) for r in results]
    head = "<tr><th>Metric</th>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"
    rows = [
        "<tr><th>Stalled</th>" + "".join(f"<td>{'yes' if r.get('stalled') else 'no'}</td>" for r in results) + "</tr>",
        "<tr><th>End time (s)</th>"
        + "".join(f'<td class="num">{_fmt_dur(r.get("endTime"))}</td>' for r in results)
        + "</tr>",
    ]
    for key, label, kind in _SUMMARY_FIELDS:
        cells = "".join(f'<td class="num">{_e(_fmt(kind, s.get(key)))}</td>' for s in summaries)
        rows.append(f"<tr><th>{_e(label)}</th>{cells}</tr>")
    return '<table class="comparison">' + head + "".join(rows) + "</table>"


# --------------------------------------------------------------------------
# public entry point
# --------------------------------------------------------------------------


def write_report(
    results: Sequence[Mapping[str, Any]],
    path: str | pathlib.Path,
    title: str = "lavaflow simulation report",
) -> None:
    """Write a self-contained HTML report (inline CSS + inline SVG) to *path*.

    One section per result (headed by its ``scheduler`` name) with a summary
    table, stuck jobs, a per-node pod Gantt chart, cluster allocation over
    time, the JCT empirical CDF and a jobs table. With more than one result a
    leading "Comparison" section shows the metrics side by side and overlays
    all JCT CDFs.
    """
    import matplotlib

    plt = pyplot()
    results = [_dict(r) for r in (results or [])]
    names = _scheduler_names(results)
    plotter = Plotter(plt, wrap=True)

    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
    ]

    with matplotlib.rc_context(RC):
        if not results:
            parts.append('<p class="note">No simulation results.</p>')
        else:
            nav = []
            if len(results) > 1:
                nav.append('<a href="#comparison">Comparison</a>')
            nav += [f'<a href="#run-{i + 1}">{_e(n)}</a>' for i, n in enumerate(names)]
            parts.append("<nav>" + "".join(nav) + "</nav>")

        if len(results) > 1:
            parts.append('<section id="comparison"><h2>Comparison</h2>')
            parts.append(_comparison_table(results, names))
            parts.append("<h3>JCT distribution (all schedulers)</h3>")
            parts.append(_cdf_plot([(n, _jcts(r)) for n, r in zip(names, results)], plotter, "JCT empirical CDF"))
            parts.append("</section>")

        for i, (name, result) in enumerate(zip(names, results)):
            parts.append(f'<section id="run-{i + 1}"><h2>{_e(name)}</h2>')
            parts.append("<h3>Summary</h3>")
            parts.append(_summary_table(result))
            parts.append("<h3>Stuck jobs</h3>")
            parts.append(_stuck_table(result))
            parts.append("<h3>Pods per node</h3>")
            parts.append(_gantt(result, plotter))
            parts.append("<h3>Cluster allocation</h3>")
            parts.append(_allocation(result, plotter))
            shares = _queue_shares(result, plotter)
            if shares:
                parts.append("<h3>Queue shares</h3>")
                parts.append(shares)
            parts.append("<h3>JCT distribution</h3>")
            parts.append(_cdf_plot([(name, _jcts(result))], plotter, f"JCT empirical CDF \u2014 {name}"))
            parts.append("<h3>Jobs</h3>")
            parts.append(_jobs_table(result))
            parts.append("</section>")

    parts.append("</body></html>\n")
    out = pathlib.Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts), encoding="utf-8")
