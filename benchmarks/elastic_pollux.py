"""Elastic allocation policies on the Pollux workloads (160 jobs / 8 h each), 64 GPUs.

Usage: python benchmarks/elastic_pollux.py [--loads 1.0,0.5,1.5,2.0] [--workloads DIR]
           [--policies A,B,C+AB] [--adaptive-batch] [--resize-cost 30] [--interval S] [--json F]

``--loads`` picks Pollux's load variants (``workloads`` = 1.0, ``workloads-0.5`` ...), found like
every other data file ($LAVAFLOW_DATA, ../shared/data, package copy); ``--workloads DIR`` gives one
folder instead.  A policy written ``NAME+AB`` runs on the same jobs with batch-size co-adaptation
(``PolluxJobSpeed(adaptive=True)``); ``--adaptive-batch`` does so for every policy.  Without
``--interval`` each policy runs at its own tick (60 s for the literature Tiresias, else 30 s).
Prints avg JCT (hours) per policy per workload, the mean over workloads, the change against
``Tiresias`` (literature baseline) and whether the policy reads remaining work (clairvoyant).
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
from lavaflow.elastic.policies import POLICY_NAMES, make_policy, resolve_name
from lavaflow.elastic.sim import Cluster, simulate
from lavaflow.elastic.workload import read_workload

DEFAULT_POLICIES = ",".join(POLICY_NAMES)
AB = "+AB"


def parse_policy(spec: str, all_adaptive: bool) -> tuple[str, str, bool]:
    """``NAME`` or ``NAME+AB`` -> (row label, registered name, adaptive jobs)."""
    s = spec.strip()
    adaptive = all_adaptive
    if s.upper().endswith(AB):
        s, adaptive = s[: -len(AB)], True
    name = resolve_name(s)
    return (name + AB if adaptive else name), name, adaptive


def load_dir(load: str) -> Path:
    return find_data("pollux/workloads" if float(load) == 1.0 else f"pollux/workloads-{load}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=None, help="one folder with workload-{1..8}.csv")
    ap.add_argument("--loads", default="1.0", help="comma-separated Pollux load variants: 1.0,0.5,1.5,2.0")
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help="NAME or NAME+AB (adaptive batch), comma-separated")
    ap.add_argument("--adaptive-batch", action="store_true", help="every policy with batch-size co-adaptation")
    ap.add_argument("--only", default=None, help="comma-separated workload numbers (default all)")
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--resize-cost", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=None, help="reschedule rate limit (default: each policy's own tick, else 30 s)")
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    args = ap.parse_args()
    try:
        rows = [parse_policy(p, args.adaptive_batch) for p in args.policies.split(",") if p.strip()]
    except KeyError as exc:
        sys.exit(f"error: --policies: unknown policy {exc.args[0]!r} (choose from {', '.join(POLICY_NAMES)})")
    sets = [(str(args.workloads), Path(args.workloads))] if args.workloads else [
        (ld.strip(), load_dir(ld.strip())) for ld in args.loads.split(",") if ld.strip()]
    cluster = Cluster.homogeneous(args.nodes, args.gpus_per_node)
    print(f"# {args.nodes}x{args.gpus_per_node} GPUs; resize cost {args.resize_cost:g}s, interval "
          f"{args.interval if args.interval is not None else 'policy default'}; "
          f"python {platform.python_version()}, nproc {os.cpu_count()}, loadavg {os.getloadavg()[0]:.2f}",
          flush=True)
    out: dict = {}
    for label_set, wdir in sets:
        files = sorted(wdir.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
        if args.only:
            keep = {s.strip() for s in args.only.split(",")}
            files = [f for f in files if f.stem.split("-")[1] in keep]
        table: dict[str, dict[str, dict]] = {r[0]: {} for r in rows}
        clair: dict[str, bool] = {}
        for f in files:
            jobs = {False: read_workload(f, max_gpus=cluster.total_gpus)}
            if any(r[2] for r in rows):
                jobs[True] = read_workload(f, max_gpus=cluster.total_gpus, adaptive=True)
            for label, name, adaptive in rows:
                pol = make_policy(name, resize_cost=args.resize_cost)
                clair[label] = pol.clairvoyant
                t0 = time.perf_counter()
                r = simulate(jobs[adaptive], cluster, pol, resched_interval=args.interval, resize_cost=args.resize_cost)
                s = r.summary()
                s["wall"] = time.perf_counter() - t0
                table[label][f.stem] = s
                print(f"{label_set:>5s} {f.stem:12s} {label:18s} avg JCT {s['avg_jct']/3600:6.3f} h  "
                      f"p99 {s['p99_jct']/3600:6.2f} h  makespan {s['makespan']/3600:6.2f} h  "
                      f"util {s['gpu_utilization']:.3f}  resizes {s['resizes']:4d} migrations {s['migrations']:4d}  "
                      f"wall {s['wall']:.2f}s", file=sys.stderr, flush=True)
        names = [f.stem for f in files]
        print(f"\nload {label_set} ({wdir}): avg JCT (hours)")
        print(f"{'policy':18s} {'clairv.':>7s} " + " ".join(f"{n.split('-')[1]:>6s}" for n in names)
              + "    mean  vs Tiresias  max wall(s)")
        means = {label: statistics.mean(table[label][n]["avg_jct"] / 3600 for n in names) for label, _, _ in rows}
        base = means.get("Tiresias")
        for label, _, _ in rows:
            vals = [table[label][n]["avg_jct"] / 3600 for n in names]
            wall = max(table[label][n]["wall"] for n in names)
            rel = f"{100 * (means[label] / base - 1):+6.1f}%" if base else "      -"
            print(f"{label:18s} {'yes' if clair[label] else 'no':>7s} " + " ".join(f"{v:6.3f}" for v in vals)
                  + f"  {means[label]:6.3f}  {rel:>11s}  {wall:7.2f}", flush=True)
        out[label_set] = {"dir": str(wdir), "clairvoyant": clair, "means": means, "runs": table}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
