"""Elastic policies on the Pollux workloads (160 jobs / 8 h each), 64 GPUs, through the scheduler.

Every trace job becomes an elastic Volcano Job that goes through the loader, admission, the job
controller and the scheduler's `elastic` action; the simulator runs it by its work and speed
(lavaflow/sim/replay.py, the same path as `lavaflow simulate TRACE.csv --policy P`).

Usage: python benchmarks/elastic_pollux.py [--workloads DIR[,DIR...]] [--policies A,B] [--procs 2]
                                           [--resize-cost 30] [--interval 30] [--json FILE]
Prints avg JCT (hours) per policy per workload, the mean over workloads, each policy against the
literature Tiresias, and CPU seconds per run (the whole replay, loading included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def run_one(args: tuple[str, str, float, float]) -> tuple[str, str, dict]:
    path, policy, cost, interval = args
    from lavaflow.elastic.policies import make_policy, resolve_name
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    t0 = time.process_time()
    w0 = time.perf_counter()
    res = replay(trace_inputs([path], gpu_cluster()), policy, interval=interval, cost=cost)
    s = res.summary()
    s["cpu"] = time.process_time() - t0
    s["wall"] = time.perf_counter() - w0
    pol = make_policy(resolve_name(policy))
    s["clairvoyant"] = bool(getattr(pol, "clairvoyant", pol.needs_info))
    return path, policy, s


def main() -> None:
    from lavaflow.elastic.data_paths import find_data
    from lavaflow.elastic.policies import POLICY_NAMES

    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=None, help="folder(s) with workload-{1..8}.csv, comma-separated")
    ap.add_argument("--policies", default=",".join(POLICY_NAMES))
    ap.add_argument("--resize-cost", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    args = ap.parse_args()
    dirs = [Path(d) for d in args.workloads.split(",")] if args.workloads else [find_data("pollux/workloads")]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    load = os.getloadavg()
    print(f"# {', '.join(str(d) for d in dirs)}; 16x4 GPUs; resize cost {args.resize_cost:g}s, interval "
          f"{args.interval:g}s; python {platform.python_version()}, nproc {os.cpu_count()}, {args.procs} processes, "
          f"load {load[0]:.1f}", flush=True)
    tasks = []
    for d in dirs:
        files = sorted(d.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
        tasks += [(str(f), p, args.resize_cost, args.interval) for f in files for p in policies]
    table: dict[str, dict[str, dict[str, dict]]] = {}
    with ProcessPoolExecutor(max_workers=args.procs) as ex:
        for path, policy, s in ex.map(run_one, tasks):
            d, name = str(Path(path).parent.name), Path(path).stem
            table.setdefault(d, {}).setdefault(policy, {})[name] = s
            print(f"{d:20s} {name:12s} {policy:16s} avg JCT {s['avg_jct']/3600:6.3f} h  p99 {s['p99_jct']/3600:6.2f} h  "
                  f"util {s['gpu_utilization']:.3f}  resizes {s['resizes']:4d} migrations {s['migrations']:4d}  "
                  f"cpu {s['cpu']:.1f}s", file=sys.stderr, flush=True)
    base = next((p for p in policies if p.lower() == "tiresias"), None)
    for d, by_policy in table.items():
        names = sorted(next(iter(by_policy.values())), key=lambda n: int(n.split("-")[1]))
        print(f"\n{d}: avg JCT (hours); * = reads remaining work (clairvoyant)")
        print(f"{'policy':18s} " + " ".join(f"{n.split('-')[1]:>6s}" for n in names) + "    mean  max cpu(s)")
        means = {}
        for p in policies:
            vals = [by_policy[p][n]["avg_jct"] / 3600 for n in names]
            means[p] = statistics.mean(vals)
            cpu = max(by_policy[p][n]["cpu"] for n in names)
            mark = " *" if by_policy[p][names[0]]["clairvoyant"] else ""
            print(f"{p + mark:18s} " + " ".join(f"{v:6.3f}" for v in vals) + f"  {means[p]:6.3f}  {cpu:7.2f}")
        if base is not None:
            for p in policies:
                print(f"{p:18s} mean avg JCT vs {base}: {100 * (means[p] / means[base] - 1):+6.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1, default=str))


if __name__ == "__main__":
    main()
