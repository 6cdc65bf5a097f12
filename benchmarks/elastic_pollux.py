"""Every elastic allocation policy on the Pollux workloads (160 jobs / 8 h each), 64 GPUs.

Usage: python benchmarks/elastic_pollux.py [--workloads DIR] [--policies A,B] [--resize-cost 30]
Prints avg JCT (hours) per policy per workload, the mean over workloads, and wall time per run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from lavaflow.elastic.data_paths import find_data
from lavaflow.elastic.policies import POLICY_NAMES, make_policy
from lavaflow.elastic.sim import Cluster, simulate
from lavaflow.elastic.workload import read_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=None, help="folder with workload-{1..8}.csv")
    ap.add_argument("--policies", default=",".join(POLICY_NAMES))
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--resize-cost", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    args = ap.parse_args()
    wdir = Path(args.workloads) if args.workloads else find_data("pollux/workloads")
    files = sorted(wdir.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    cluster = Cluster.homogeneous(args.nodes, args.gpus_per_node)
    print(f"# {len(files)} workloads from {wdir}; {args.nodes}x{args.gpus_per_node} GPUs; "
          f"resize cost {args.resize_cost:g}s, interval {args.interval:g}s; "
          f"python {platform.python_version()}, nproc {os.cpu_count()}", flush=True)
    table: dict[str, dict[str, dict]] = {p: {} for p in policies}
    for f in files:
        jobs = read_workload(f, max_gpus=cluster.total_gpus)
        for p in policies:
            t0 = time.perf_counter()
            r = simulate(jobs, cluster, make_policy(p, resize_cost=args.resize_cost),
                         resched_interval=args.interval, resize_cost=args.resize_cost)
            s = r.summary()
            s["wall"] = time.perf_counter() - t0
            table[p][f.stem] = s
            print(f"{f.stem:12s} {p:16s} avg JCT {s['avg_jct']/3600:6.3f} h  p99 {s['p99_jct']/3600:6.2f} h  "
                  f"makespan {s['makespan']/3600:6.2f} h  util {s['gpu_utilization']:.3f}  "
                  f"resizes {s['resizes']:4d} migrations {s['migrations']:4d}  wall {s['wall']:.2f}s",
                  file=sys.stderr, flush=True)
    names = [f.stem for f in files]
    print("\navg JCT (hours)")
    print(f"{'policy':16s} " + " ".join(f"{n.split('-')[1]:>6s}" for n in names) + "    mean  max wall(s)")
    means = {}
    for p in policies:
        vals = [table[p][n]["avg_jct"] / 3600 for n in names]
        means[p] = statistics.mean(vals)
        wall = max(table[p][n]["wall"] for n in names)
        print(f"{p:16s} " + " ".join(f"{v:6.3f}" for v in vals) + f"  {means[p]:6.3f}  {wall:7.2f}")
    if "Tiresias" in means:
        print()
        for p in policies:
            print(f"{p:16s} mean avg JCT vs Tiresias: {100 * (means[p] / means['Tiresias'] - 1):+6.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1, default=str))


if __name__ == "__main__":
    main()
