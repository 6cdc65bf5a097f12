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
  run to the end (no ``--until``);
- ``trace``: a Pollux trace of ``--pods`` jobs (comma-separated counts, one run
  each), written row by row as the script goes (never held in memory), on
  ``--gpus`` GPUs (nodes of 4) given as a NodeGroup: each row a row of Pollux's
  workloads 1–8 drawn at random (application, replicas, batch size), arriving
  as a Poisson process at Pollux's load (160 jobs per 8 h per 64 GPUs) unless
  ``--span`` is given, replayed under ``--policy`` (default FIFO) up to
  ``--until`` (default: to the end). Every row is checked before the run;
  the jobs are made as the simulated clock reaches them.

    python benchmarks/e2e_simulate.py --case burst --nodes 5000 --pods 50000
    python benchmarks/e2e_simulate.py --case burst --nodes 1000 --pods 10000
    python benchmarks/e2e_simulate.py --case arrival --nodes 1000 --pods 10000,20000,50000
    python benchmarks/e2e_simulate.py --case arrival --nodes 1000 --pods 5000,100000 --pods-per-job 1 --span 86400
    python benchmarks/e2e_simulate.py --case arrival --nodes 1000 --pods 100000 --pods-per-job 1 --span 86400 --until 0
    python benchmarks/e2e_simulate.py --case trace --pods 1000000 --gpus 10000 --until 6h

``--until 0`` measures what comes before the simulated clock moves: reading and checking the
input (and the first session). The output is read line by line (a large run's JSON is not parsed whole); ``--keep DIR``
keeps each input and JSON output there (to compare runs).
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


# Pollux's load: 160 jobs arriving over 8 h on 64 GPUs (its workloads 1-8 at load 1.0).
POLLUX_RATE = 160 / (8 * 3600) / 64  # jobs per second per GPU


def trace(path: Path, jobs: int, gpus: int, span: float | None, seed: int) -> None:
    """A Pollux trace of ``jobs`` rows, written as they are drawn: each a row of Pollux's workloads
    1-8 (application, replicas, batch size), arriving as a Poisson process over ``span`` seconds
    (default: at Pollux's load on ``gpus`` GPUs)."""
    sys.path.insert(0, str(REPO / "src"))
    from lavaflow.elastic.data_paths import find_data

    rows = []
    for w in range(1, 9):
        with (find_data("pollux/workloads") / f"workload-{w}.csv").open() as fh:
            rows += [line.rstrip("\n").split(",")[2:5] for line in list(fh)[1:]]
    rng = random.Random(seed)
    rate = jobs / span if span else POLLUX_RATE * gpus
    t = 0.0
    with path.open("w") as out:
        out.write("name,time,application,num_replicas,batch_size\n")
        for i in range(jobs):
            t += rng.expovariate(rate)
            app, replicas, batch = rows[rng.randrange(len(rows))]
            out.write(f"{app}-{i},{int(t)},{app},{replicas},{batch}\n")


def gpu_cluster(gpus: int) -> str:
    return f"""apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {{name: gpu}}
spec: {{count: {gpus // 4}, capacity: {{cpu: "64", memory: 256Gi, pods: "110", nvidia.com/gpu: "4"}}}}
"""


def summary_of(path: Path) -> dict:
    """What the table needs from a JSON result (written by the CLI with indent 2), read line by
    line: a large run's result is not parsed whole."""
    out: dict = {"pods": 0, "placed": 0, "completed": None}
    section = None
    with path.open() as fh:
        for line in fh:
            if line.startswith('  "'):  # a top-level key
                section = line[3 : line.index('"', 3)]
                if section in ("endTime", "cycles"):
                    out[section] = json.loads(line.split(":", 1)[1].strip().rstrip(","))
            elif section == "pods" and line.startswith('      "startTime": '):
                out["pods"] += 1
                out["placed"] += not line.rstrip().rstrip(",").endswith("null")
            elif section == "summary" and line.startswith('    "completed": '):
                out["completed"] = int(line.split(":", 1)[1].strip().rstrip(","))
    return out


def run_case(paths: list[Path], until: str | None, keep: Path | None, name: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "lavaflow.cli", "simulate", *map(str, paths), "--output", "json", *extra]
    if until is not None:
        cmd += ["--until", until]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = (keep or Path(tmp)) / f"{name}.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with out.open("w") as fh:
            proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        result = summary_of(out)
    return {
        "command": " ".join(cmd[1:]),
        **result,
        "wall": wall,
        "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "rss_mib": after.ru_maxrss / 1024,
        "end": result["endTime"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=("burst", "arrival", "trace"), default="burst")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", default="50000", help="comma-separated pod counts (one run each)")
    ap.add_argument("--pods-per-job", type=int, default=10)
    ap.add_argument(
        "--span", type=float, default=None, help="seconds over which jobs arrive (arrival: 2 h; trace: Pollux's load)"
    )
    ap.add_argument("--gpus", type=int, default=10000, help="trace: GPUs of the cluster (nodes of 4)")
    ap.add_argument("--policy", default="FIFO", help="trace: the elastic policy")
    ap.add_argument("--until", default=None, help="default: 60 for burst, none for arrival and trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="keep inputs and JSON outputs in this directory")
    args = ap.parse_args()
    until = args.until if args.until is not None else ("60" if args.case == "burst" else None)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'case':8} {'nodes':>6} {'pods':>7} {'placed':>7} {'wall s':>8} {'cpu s':>8} {'placed/s':>9} {'peak MiB':>9} {'sim end':>8} {'cycles':>6} {'jobs done':>9}"
    )
    base = None
    for n in [int(x) for x in args.pods.split(",")]:
        name = f"{args.case}-{args.nodes}n-{n}p" if args.case != "trace" else f"trace-{args.gpus}g-{n}j"
        with tempfile.TemporaryDirectory() as tmp:
            where = args.keep or Path(tmp)
            extra: list[str] = []
            if args.case == "trace":
                nodes = args.gpus // 4
                cluster = where / f"gpu-{args.gpus}.yaml"
                cluster.write_text(gpu_cluster(args.gpus))
                path = where / f"{name}.csv"
                trace(path, n, args.gpus, args.span, args.seed)
                paths = [cluster, path]
                extra = ["--policy", args.policy]
            else:
                nodes = args.nodes
                span = (args.span or 7200.0) if args.case == "arrival" else None
                path = where / f"{name}.yaml"
                path.write_text(workload(args.nodes, n, args.pods_per_job, span, args.seed))
                paths = [path]
            r = run_case(paths, until, args.keep, name, extra)
        rate = r["placed"] / r["wall"] if r["wall"] else float("inf")
        print(
            f"{args.case:8} {nodes:>6} {n:>7} {r['placed']:>7} {r['wall']:>8.1f} {r['cpu']:>8.1f} {rate:>9,.0f} "
            f"{r['rss_mib']:>9,.0f} {r['end']:>8.0f} {r['cycles']:>6} {r['completed']:>9}",
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
