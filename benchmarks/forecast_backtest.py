"""Backtest of `lavaflow forecast`: in a simulation, snapshot at T, forecast, continue the true run,
and compare each pending job's predicted start with the start it really had.

For every workload the true run is made once; at each snapshot time T (the first moment the run
reaches it) the store — what the API server holds then — is handed to ``forecast`` and the run goes
on untouched (the forecast works on copies). A job counts when it is pending at T (submitted, not
started); its error is ``predicted start − true start``. Relative error: its absolute value over the
wait that was left, ``true start − T`` (at least 1 s). The naive baseline says every pending job
starts now (its error is the wait left). Coverage: true starts inside the forecast's p10–p90 range.

Usage: python benchmarks/forecast_backtest.py [--examples a.yaml,b.yaml] [--pollux 6]
           [--policies Lavaflow,FIFO] [--points 8] [--samples 8] [--seed 0] [--json FILE]

Examples default to those of examples/ with pending jobs; ``--pollux N`` adds
``pollux/workloads/workload-N.csv`` (found under $LAVAFLOW_DATA, ../shared/data) once per policy
of ``--policies``; T runs over ``--points`` evenly spaced times inside the run (its arrivals for a
trace).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from lavaflow.cli.main import _elastic_conf, _load  # noqa: E402
from lavaflow.forecast import forecast  # noqa: E402
from lavaflow.sim.engine import Simulation  # noqa: E402

EXAMPLES = (
    "coscheduling-podgroup.yaml",
    "elastic-pytorch.yaml",
    "elastic-torchrun.yaml",
    "network-topology.yaml",
    "numa-aware.yaml",
    "spark-wordcount.yaml",
)


def data_dir() -> Path:
    env = os.environ.get("LAVAFLOW_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def true_run(path: Path, policy: str | None, times: list[float], samples: int, seed: int):
    """The true run of ``path`` with a forecast at each of ``times``: (result, snapshots), a
    snapshot being (T, forecast, CPU seconds it took)."""
    sim_input, conf = _load([path], None)
    if policy is not None:
        conf = _elastic_conf(conf, policy, None, None)
    sim = Simulation(sim_input, conf=conf, seed=seed)
    todo = sorted(times)
    for t in todo:  # the run stops at each T (an event that changes nothing), to be snapshot there
        sim._push(t, "wake", "forecast-backtest")
    snaps = []

    def at_step(now: float, *_counts: int) -> None:
        if todo and now >= todo[0]:
            while todo and now >= todo[0]:
                todo.pop(0)
            t0 = time.process_time()
            fc = forecast(sim.store, sim.scheduler.conf, now, seed=seed, samples=samples)
            snaps.append((now, fc, time.process_time() - t0))

    result = sim.run(progress=at_step)
    return result, snaps


def snapshot_times(path: Path, policy: str | None, points: int, seed: int) -> list[float]:
    """``points`` times evenly inside the span where jobs wait: from the first submission to the
    last start of a first run."""
    sim_input, conf = _load([path], None)
    if policy is not None:
        conf = _elastic_conf(conf, policy, None, None)
    jobs = Simulation(sim_input, conf=conf, seed=seed).run()["jobs"]
    lo = min(j["submitTime"] or 0.0 for j in jobs)
    hi = max(j["startTime"] or 0.0 for j in jobs)
    return [lo + (hi - lo) * (i + 0.5) / points for i in range(points)]


def errors(result: dict, snaps) -> list[dict]:
    truth = {f"{j['namespace']}/{j['name']}": j for j in result["jobs"]}
    rows = []
    for now, fc, _cpu in snaps:
        for key, jf in fc.jobs.items():
            if jf.running or key not in truth:
                continue
            true_start = truth[key]["startTime"]
            if true_start is None or true_start < now:
                continue  # (a job an elastic policy halted after it started: not waiting for its start)
            left = max(true_start - now, 1.0)
            row = {"job": key, "at": now, "true": true_start, "source": jf.source, "wait_left": true_start - now}
            if jf.start is None:
                row.update(predicted=None)
            else:
                err = jf.start - true_start
                lo = jf.start_low if jf.start_low is not None else jf.start
                hi = jf.start_high if jf.start_high is not None else math.inf
                row.update(
                    predicted=jf.start,
                    error=err,
                    abs=abs(err),
                    rel=abs(err) / left,
                    covered=lo - 1.0 <= true_start <= hi + 1.0,  # (within a scheduling period)
                )
            rows.append(row)
    return rows


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[max(math.ceil(q * len(s)) - 1, 0)]


def summary(rows: list[dict]) -> dict:
    done = [r for r in rows if r.get("predicted") is not None]
    return {
        "pending": len(rows),
        "predicted": len(done),
        "abs_p50": pct([r["abs"] for r in done], 0.5),
        "abs_p90": pct([r["abs"] for r in done], 0.9),
        "rel_p50": pct([r["rel"] for r in done], 0.5),
        "rel_p90": pct([r["rel"] for r in done], 0.9),
        "naive_p50": pct([max(r["wait_left"], 0.0) for r in rows], 0.5),
        "naive_p90": pct([max(r["wait_left"], 0.0) for r in rows], 0.9),
        "covered": (sum(r["covered"] for r in done) / len(done)) if done else None,
        "sources": {s: sum(r["source"] == s for r in rows) for s in sorted({r["source"] for r in rows})},
    }


def fmt(v, unit: str = "s") -> str:
    if v is None:
        return "-"
    if unit == "%":
        return f"{100 * v:.0f} %"
    return f"{v:,.0f} s" if v >= 10 else f"{v:.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--pollux", default="6", help="Pollux workload numbers (comma-separated; '' for none)")
    ap.add_argument("--policies", default="Lavaflow,FIFO")
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cases: list[tuple[str, Path, str | None]] = [
        (name, ROOT / "examples" / name, None) for name in filter(None, args.examples.split(","))
    ]
    for n in filter(None, args.pollux.split(",")):
        trace = data_dir() / "pollux" / "workloads" / f"workload-{n}.csv"
        for pol in filter(None, args.policies.split(",")):
            cases.append((f"pollux workload-{n} ({pol})", trace, pol))
    print(f"# {platform.node()} · {os.cpu_count()} CPUs · load average {os.getloadavg()}", flush=True)
    header = (
        f"{'workload':36} {'snap':>4} {'pending':>7} {'pred':>5} {'|err| p50':>10} {'|err| p90':>10} "
        f"{'rel p50':>8} {'rel p90':>8} {'naive p50':>10} {'naive p90':>10} {'in p10-p90':>10} "
        f"{'cpu/fc':>7}  sources"
    )
    print(header)
    out = {"cases": [], "seed": args.seed, "samples": args.samples, "points": args.points}
    every: list[dict] = []
    for label, path, pol in cases:
        times = snapshot_times(path, pol, args.points, args.seed)
        result, snaps = true_run(path, pol, times, args.samples, args.seed)
        rows = errors(result, snaps)
        every += rows
        s = summary(rows)
        cpu = statistics.mean(c for _, _, c in snaps) if snaps else 0.0
        print(
            f"{label:36} {len(snaps):>4} {s['pending']:>7} {s['predicted']:>5} {fmt(s['abs_p50']):>10} "
            f"{fmt(s['abs_p90']):>10} {fmt(s['rel_p50'], '%'):>8} {fmt(s['rel_p90'], '%'):>8} "
            f"{fmt(s['naive_p50']):>10} {fmt(s['naive_p90']):>10} {fmt(s['covered'], '%'):>10} "
            f"{cpu:>6.2f}s  {s['sources']}",
            flush=True,
        )
        out["cases"].append({"workload": label, "snapshots": len(snaps), "cpuPerForecast": cpu, **s, "rows": rows})
    s = summary(every)
    print(
        f"{'all':36} {'':>4} {s['pending']:>7} {s['predicted']:>5} {fmt(s['abs_p50']):>10} {fmt(s['abs_p90']):>10} "
        f"{fmt(s['rel_p50'], '%'):>8} {fmt(s['rel_p90'], '%'):>8} {fmt(s['naive_p50']):>10} "
        f"{fmt(s['naive_p90']):>10} {fmt(s['covered'], '%'):>10}"
    )
    print(f"# load average after: {os.getloadavg()}")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
