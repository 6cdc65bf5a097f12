"""Heterogeneity-aware vs type-agnostic allocation on a K80/P100/V100 cluster.

A Gavel-style trace (lavaflow.elastic.trace_readers.gavel_workload: Gavel's measured models, Poisson
arrivals, Philly-like scale factors) runs on equal numbers of k80, p100 and v100 nodes, through
the scheduler: each job is an elastic Volcano Job sized by the elastic action (sim/replay.py).
Usage: python benchmarks/elastic_hetero.py [--nodes-per-type 4] [--jobs 96] [--hours 8] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from lavaflow.elastic.trace_readers import _gavel_job, gavel_workload
from lavaflow.sim.replay import gpu_cluster, replay, spec_inputs

VARIANTS = [
    ("ElasticFIFO (type-agnostic)", "ElasticFIFO", {}),
    ("ElasticTiresias (type-agnostic)", "ElasticTiresias", {}),
    ("AFS-L (type-agnostic)", "AFS-L", {}),
    ("Lavaflow type-agnostic (ablation)", "Lavaflow", {"type_agnostic": True}),
    ("Lavaflow (heterogeneity-aware)", "Lavaflow", {}),
    ("Lavaflow + type_moves", "Lavaflow", {"type_moves": True}),
    ("Goodput (heterogeneity-aware)", "Goodput", {}),
    ("Goodput + type_moves", "Goodput", {"type_moves": True}),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes-per-type", type=int, default=4)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=96)
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--resize-cost", type=float, default=30.0)
    ap.add_argument(
        "--oracle",
        action="store_true",
        help="hand the policies the true speed models (ablation; default: models learned from the jobs' reports)",
    )
    args = ap.parse_args()
    types = {"k80": args.nodes_per_type, "p100": args.nodes_per_type, "v100": args.nodes_per_type}
    cluster = gpu_cluster(types, gpus_per_node=args.gpus_per_node)
    total = sum(types.values()) * args.gpus_per_node
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"# cluster {types} x {args.gpus_per_node} GPUs = {total}; {args.jobs} jobs over "
        f"{args.hours:g} h; seeds {seeds}; resize cost {args.resize_cost:g}s; nproc {os.cpu_count()}; speed models: "
        + ("ORACLE (the simulator's true models)" if args.oracle else "learned from the jobs' reports")
    )
    res: dict[str, list[float]] = {v[0]: [] for v in VARIANTS}
    for seed in seeds:
        rows = gavel_workload(args.jobs, args.hours, seed)
        jobs = [_gavel_job("gavel", i + 2, *r, max_gpus=total) for i, r in enumerate(rows)]
        loaded = spec_inputs(jobs, cluster)
        for label, name, kw in VARIANTS:
            t0 = time.perf_counter()
            r = replay(loaded, name, params=kw, cost=args.resize_cost, oracle=args.oracle)
            s = r.summary()
            res[label].append(s["avg_jct"] / 3600)
            print(
                f"seed {seed}  {label:36s} avg JCT {s['avg_jct'] / 3600:6.3f} h  p99 {s['p99_jct'] / 3600:6.2f} h  "
                f"makespan {s['makespan'] / 3600:6.2f} h  util {s['gpu_utilization']:.3f}  done {s['completed']}/{s['jobs']}  "
                f"wall {time.perf_counter() - t0:.2f}s",
                flush=True,
            )
    base = statistics.mean(res[VARIANTS[0][0]])
    print("\nmean avg JCT over seeds (hours) and speed-up vs type-agnostic ElasticFIFO")
    for label, _, _ in VARIANTS:
        m = statistics.mean(res[label])
        print(f"{label:36s} {m:7.3f}   {base / m:5.2f}x")


if __name__ == "__main__":
    main()
