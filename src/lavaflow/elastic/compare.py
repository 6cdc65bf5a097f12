"""Tabulate the results of several policies on one workload (the replays themselves run in the
scheduler: lavaflow simulate / lavaflow.sim.replay)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .results import SimResult

COLUMNS = (
    ("policy", "policy"),
    ("clairvoyant", "reads work"),
    ("oracle", "oracle"),
    ("shared_profiles", "shares"),
    ("avg_jct", "avg JCT"),
    ("p50_jct", "p50 JCT"),
    ("p99_jct", "p99 JCT"),
    ("makespan", "makespan"),
    ("gpu_utilization", "GPU util"),
    ("resizes", "resizes"),
    ("migrations", "migrations"),
    ("halts", "halts"),
    ("completed", "done"),
)


def fmt_duration(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 3600:
        return f"{v / 3600:.2f}h"
    if v >= 60:
        return f"{v / 60:.1f}m"
    return f"{v:.0f}s"


def table_rows(results: Sequence[SimResult]) -> tuple[list[str], list[list[str]]]:
    header = [h for _, h in COLUMNS]
    rows = []
    for r in results:
        s = r.summary()
        row = []
        for key, _ in COLUMNS:
            v = s[key]
            if key in ("avg_jct", "p50_jct", "p99_jct", "makespan"):
                row.append(fmt_duration(v))
            elif key == "gpu_utilization":
                row.append("-" if v is None else f"{100 * v:.1f}%")
            elif key in ("clairvoyant", "oracle", "shared_profiles"):
                row.append("yes" if v else "no")
            elif key == "completed":
                row.append(f"{v}/{s['jobs']}")
            else:
                row.append(str(v))
        rows.append(row)
    return header, rows


def format_table(results: Sequence[SimResult]) -> str:
    header, rows = table_rows(results)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def to_json(results: Sequence[SimResult], per_job: bool = False) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"results": []}
    for r in results:
        d = r.summary()
        if per_job:
            d["jobs_detail"] = [
                {
                    "name": j.name,
                    "application": j.application,
                    "submit": j.submit,
                    "start": j.start,
                    "finish": j.finish,
                    "jct": j.jct,
                    "resizes": j.resizes,
                    "migrations": j.migrations,
                }
                for j in r.jobs
            ]
        out["results"].append(d)
    return out
