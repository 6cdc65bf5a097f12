"""Sia's comparison (SOSP'23, Table 3) in lavaflow: its baselines and our policy, side by side.

Sia's *Heterogeneous* cluster (examples/gpu-cluster-sia.yaml: 6 x 4 T4, 3 x 8 RTX 2080 Ti, 2 x 8
A100 = 64 GPUs), Sia's workloads (sia-simulator/workloads/philly: 8 traces, .../saturn: 10 Helios
traces, 160 jobs each), every job run by Sia's per-GPU-type tables (lavaflow.elastic.sia: the
artifact is read at run time, never shipped). Every policy reads learned speed models (what the
jobs reported), none reads remaining work:

* ``Sia``         Sia's goodput-matrix ILP (p = -0.5, lambda_n = 1.1, 60 s rounds), adaptive batches;
* ``Pollux-Fix``  Pollux, heterogeneity-unaware, with the Sia paper's fix-up, adaptive batches;
* ``Goodput+AB``  ours (non-clairvoyant), adaptive batches;
* ``Goodput+AB+mv`` the same with ``type_moves`` (a job placed on one type may move to another);
* ``Gavel+TJ``    Gavel, heterogeneity-aware max-min fairness, 360 s rounds, TunedJobs (each job at
                  its trace size and batch) -- when the policy is registered.

Resumable: every finished replay is appended to ``--results`` (JSON lines) and skipped when the
script runs again, so the study can be split over sessions (``--sets philly --only 1,2``).

Usage: python benchmarks/elastic_sia.py --sia-artifact DIR [--sets philly,saturn] [--only 1,2]
           [--policies Sia,Pollux-Fix,Goodput+AB] [--results elastic_sia.jsonl] [--procs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "gpu-cluster-sia.yaml"
SETS = {"philly": 8, "saturn": 10}
SET_NAMES = {"philly": "Philly", "saturn": "Helios"}
# label -> (registered policy, adaptive batches)
ROWS: dict[str, tuple[str, bool, dict]] = {
    "Sia": ("Sia", True, {}),
    "Pollux-Fix": ("Pollux-Fix", True, {}),
    "Goodput+AB": ("Goodput", True, {}),
    "Goodput+AB+mv": ("Goodput", True, {"type_moves": True}),
    "Gavel+TJ": ("Gavel", False, {}),
}
# Sia's Table 3 (Heterogeneous setting): avg JCT, p99 JCT, makespan (h), GPU-hours per job
TABLE3 = {
    ("philly", "Sia"): (0.6, 9.5, 14.2, 4.0),
    ("philly", "Pollux-Fix"): (1.0, 14.9, 24.5, 5.6),
    ("philly", "Gavel+TJ"): (1.9, 30.0, 33.8, 9.0),
    ("saturn", "Sia"): (0.7, 10.9, 14.9, 4.8),
    ("saturn", "Pollux-Fix"): (1.0, 15.0, 25.5, 5.9),
    ("saturn", "Gavel+TJ"): (2.5, 38.7, 43.0, 12.1),
}


def run_one(task: tuple) -> dict:
    artifact, trace_set, path, label = task
    os.environ["LAVAFLOW_SIA_ARTIFACT"] = artifact
    import gc

    from lavaflow.sim import BATCH_GC_THRESHOLDS
    from lavaflow.sim.replay import replay, trace_inputs

    gc.set_threshold(*BATCH_GC_THRESHOLDS)
    name, adaptive, params = ROWS[label]
    t0, w0 = time.process_time(), time.perf_counter()
    res = replay(trace_inputs([path], yaml_files=[CLUSTER], adaptive=adaptive), name, params=params)
    s = res.summary()
    keep = ("avg_jct", "p50_jct", "p99_jct", "makespan", "gpu_hours_per_job", "gpu_utilization", "completed", "jobs")
    out = {k: s[k] for k in keep}
    out.update(
        set=trace_set,
        trace=Path(path).stem,
        policy=label,
        resizes=s["resizes"],
        migrations=s["migrations"],
        cpu=time.process_time() - t0,
        wall=time.perf_counter() - w0,
        load=os.getloadavg()[0],
    )
    return out


def _key(r: dict) -> tuple[str, str, str]:
    return (r["set"], r["trace"], r["policy"])


def table(results: list[dict], labels: list[str], sets: list[str]) -> str:
    lines = []
    for s in sets:
        rows = [r for r in results if r["set"] == s]
        traces = sorted({r["trace"] for r in rows}, key=lambda t: int(t.rsplit("-", 1)[-1]))
        lines.append(f"\n{SET_NAMES[s]} ({len(traces)} of {SETS[s]} traces: {', '.join(traces)})")
        lines.append(
            f"{'policy':14s} "
            + " ".join(f"{t[-2:]:>6s}" for t in traces)
            + "   avgJCT    p99  mkspan  GPUh/job   Table 3"
        )
        for label in labels:
            got = {r["trace"]: r for r in rows if r["policy"] == label}
            if not got:
                continue
            cells = " ".join(f"{got[t]['avg_jct'] / 3600:6.2f}" if t in got else "     -" for t in traces)
            done = [got[t] for t in traces if t in got]

            def mean(k: str, done: list[dict] = done) -> float:
                return statistics.mean(d[k] for d in done)

            ref = TABLE3.get((s, label))
            vs = ""
            if ref:
                vs = f"{ref[0]:.1f} h ({(mean('avg_jct') / 3600 - ref[0]) / ref[0] * 100:+.0f} %)"
            lines.append(
                f"{label:14s} {cells}   {mean('avg_jct') / 3600:5.2f}h {mean('p99_jct') / 3600:5.1f}h "
                f"{mean('makespan') / 3600:5.1f}h  {mean('gpu_hours_per_job'):7.2f}   {vs}"
            )
        for mine in ("Goodput+AB", "Goodput+AB+mv"):
            both = {r["trace"] for r in rows if r["policy"] == "Sia"} & {
                r["trace"] for r in rows if r["policy"] == mine
            }
            if both:
                sia = statistics.mean(r["avg_jct"] for r in rows if r["policy"] == "Sia" and r["trace"] in both)
                ours = statistics.mean(r["avg_jct"] for r in rows if r["policy"] == mine and r["trace"] in both)
                lines.append(f"{mine} vs Sia on the {len(both)} traces both ran: {(ours - sia) / sia * 100:+.1f} %")
    return "\n".join(lines)


def main() -> None:
    from lavaflow.elastic.policies import POLICY_NAMES

    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sia-artifact", default=os.environ.get("LAVAFLOW_SIA_ARTIFACT"), help="copy of siasosp23/artifacts"
    )
    ap.add_argument("--sets", default="philly,saturn")
    ap.add_argument("--only", default=None, help="comma-separated workload numbers (default all)")
    ap.add_argument("--policies", default="Sia,Pollux-Fix,Gavel+TJ,Goodput+AB")
    ap.add_argument("--results", default="elastic_sia.jsonl", help="JSON lines, appended to and resumed from")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--report-only", action="store_true", help="print the table of what --results holds")
    args = ap.parse_args()
    if not args.sia_artifact:
        raise SystemExit(
            "error: give --sia-artifact DIR (a copy of github.com/siasosp23/artifacts) or set LAVAFLOW_SIA_ARTIFACT"
        )
    base = Path(args.sia_artifact)
    wl = base / "sia-simulator" / "workloads" if (base / "sia-simulator").is_dir() else base / "workloads"
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    labels = [p.strip() for p in args.policies.split(",") if p.strip()]
    for label in labels:
        if label not in ROWS:
            raise SystemExit(f"error: --policies: unknown row {label!r} (known: {', '.join(ROWS)})")
    labels = [x for x in labels if ROWS[x][0] in POLICY_NAMES]  # (a baseline not registered yet is left out)
    only = {int(x) for x in args.only.split(",")} if args.only else None
    res_path = Path(args.results)
    results = (
        [json.loads(line) for line in res_path.read_text().splitlines() if line.strip()] if res_path.exists() else []
    )
    done = {_key(r) for r in results}
    tasks = []
    for s in sets:
        for i in range(1, SETS[s] + 1):
            if only and i not in only:
                continue
            path = wl / s / f"workload-{i}.csv"
            if not path.is_file():
                raise SystemExit(f"error: {path}: no such workload")
            for label in labels:
                if (s, path.stem, label) not in done:
                    tasks.append((str(base), s, str(path), label))
    print(
        f"# {platform.node()} nproc {os.cpu_count()} python {platform.python_version()}; "
        f"load {os.getloadavg()[0]:.2f}; {len(tasks)} replays to run, {len(done)} kept in {res_path}",
        flush=True,
    )
    if not args.report_only and tasks:
        with ProcessPoolExecutor(max_workers=max(args.procs, 1)) as pool, res_path.open("a") as out:
            for r in pool.map(run_one, tasks):
                out.write(json.dumps(r) + "\n")
                out.flush()
                results.append(r)
                print(
                    f"{r['set']:7s} {r['trace']:12s} {r['policy']:11s} avg JCT {r['avg_jct'] / 3600:5.2f} h  "
                    f"p99 {r['p99_jct'] / 3600:5.1f} h  makespan {r['makespan'] / 3600:5.1f} h  "
                    f"GPU-h/job {r['gpu_hours_per_job']:5.2f}  done {r['completed']}/{r['jobs']}  "
                    f"cpu {r['cpu']:.1f}s load {r['load']:.1f}",
                    flush=True,
                )
    print(table(results, [x for x in ROWS if x in labels or any(r["policy"] == x for r in results)], sets))


if __name__ == "__main__":
    main()
