"""End to end: `lavaflow simulate` as a user runs it, whole process.

The script writes a YAML input, runs the CLI in a subprocess
(``python -m lavaflow.cli simulate FILE --output json [--until T]``) so that
parsing, admission, controllers, scheduling and the JSON output are all in the
measured time, and prints pods placed per wall-clock second, the wall time,
the child's CPU time and peak RSS.

Cases (``--case``):

- ``burst``: ``--nodes`` nodes (one NodeGroup, 32 cpu / 128 Gi / 110 pods each)
  and ``--pods`` pods as gang Volcano Jobs of ``--pods-per-job`` pods (1 cpu,
  2 Gi each, minAvailable = pods per job), all submitted at t = 0 and all
  fitting at once, default 60 s duration, run with ``--until 60``;
- ``arrival``: the same jobs submitted uniformly at random over ``--span``
  simulated seconds (default 2 h), each with a duration drawn from 60–600 s,
  run to the end (no ``--until``).

    python benchmarks/e2e_simulate.py --case burst --nodes 5000 --pods 50000
    python benchmarks/e2e_simulate.py --case burst --nodes 1000 --pods 10000
    python benchmarks/e2e_simulate.py --case arrival --nodes 1000 --pods 10000,20000,50000

``--keep DIR`` keeps each input YAML and JSON output there (to compare runs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def workload(nodes: int, pods: int, per_job: int, arrival_span: float | None, seed: int) -> str:
    rng = random.Random(seed)
    out = [
        f"""apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {{name: node}}
spec: {{count: {nodes}, capacity: {{cpu: "32", memory: 128Gi, pods: "110"}}}}
"""
    ]
    jobs = pods // per_job
    arrivals = sorted(rng.uniform(0, arrival_span) for _ in range(jobs)) if arrival_span else [0.0] * jobs
    for i, at in enumerate(arrivals):
        annotations = ""
        tmpl_annotations = ""
        if arrival_span:
            annotations = f'\n  annotations: {{sim.lavaflow.io/submit-at: "{at:.0f}"}}'
            tmpl_annotations = (
                f'\n      metadata: {{annotations: {{sim.lavaflow.io/duration: "{rng.randint(60, 600)}"}}}}'
            )
        out.append(
            f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: job-{i}{annotations}
spec:
  minAvailable: {per_job}
  schedulerName: volcano
  tasks:
  - name: worker
    replicas: {per_job}
    template:{tmpl_annotations}
      spec:
        containers:
        - name: c
          image: busybox
          resources: {{requests: {{cpu: "1", memory: 2Gi}}}}
"""
        )
    return "---\n".join(out)


def run_case(path: Path, until: str | None, keep: Path | None, name: str) -> dict:
    cmd = [sys.executable, "-m", "lavaflow.cli", "simulate", str(path), "--output", "json"]
    if until is not None:
        cmd += ["--until", until]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    if keep is not None:
        (keep / f"{name}.json").write_text(proc.stdout)
    result = json.loads(proc.stdout)
    placed = sum(1 for p in result["pods"] if p["startTime"] is not None)
    return {
        "command": " ".join(cmd[1:]),
        "pods": len(result["pods"]),
        "placed": placed,
        "wall": wall,
        "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "rss_mib": after.ru_maxrss / 1024,
        "end": result["endTime"],
        "cycles": result["cycles"],
        "completed": result["summary"]["completed"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=("burst", "arrival"), default="burst")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", default="50000", help="comma-separated pod counts (one run each)")
    ap.add_argument("--pods-per-job", type=int, default=10)
    ap.add_argument("--span", type=float, default=7200.0, help="arrival: seconds over which jobs arrive")
    ap.add_argument("--until", default=None, help="default: 60 for burst, none for arrival")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="keep inputs and JSON outputs in this directory")
    args = ap.parse_args()
    until = args.until if args.until is not None else ("60" if args.case == "burst" else None)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'case':8} {'nodes':>6} {'pods':>6} {'placed':>6} {'wall s':>8} {'cpu s':>8} {'placed/s':>9} {'peak MiB':>9} {'sim end':>8} {'cycles':>6}"
    )
    base = None
    for n in [int(x) for x in args.pods.split(",")]:
        text = workload(args.nodes, n, args.pods_per_job, args.span if args.case == "arrival" else None, args.seed)
        name = f"{args.case}-{args.nodes}n-{n}p"
        with tempfile.TemporaryDirectory() as tmp:
            path = (args.keep or Path(tmp)) / f"{name}.yaml"
            path.write_text(text)
            r = run_case(path, until, args.keep, name)
        rate = r["placed"] / r["wall"] if r["wall"] else float("inf")
        print(
            f"{args.case:8} {args.nodes:>6} {n:>6} {r['placed']:>6} {r['wall']:>8.1f} {r['cpu']:>8.1f} {rate:>9,.0f} "
            f"{r['rss_mib']:>9,.0f} {r['end']:>8.0f} {r['cycles']:>6}",
            flush=True,
        )
        if base is None:
            base = (n, r["wall"], r["cpu"])
        else:
            print(
                f"  pods ×{n / base[0]:.2f}: wall time ×{r['wall'] / base[1]:.2f}, CPU time ×{r['cpu'] / base[2]:.2f}"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
