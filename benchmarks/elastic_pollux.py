"""Elastic policies on the Pollux workloads (160 jobs / 8 h each), 64 GPUs, through the scheduler.

Every trace job becomes an elastic Volcano Job that goes through the loader, admission, the job
controller and the scheduler's `elastic` action; the simulator runs it by its work and speed
(lavaflow/sim/replay.py, the same path as `lavaflow simulate TRACE.csv --policy P`).

Usage: python benchmarks/elastic_pollux.py [--loads 1.0,0.5,1.5,2.0] [--workloads DIR]
           [--policies A,B,C+AB] [--adaptive-batch] [--only 1,5] [--procs 2]
           [--resize-cost 30] [--interval S] [--param NAME=VALUE ...] [--fresh] [--json FILE]
           [--shared-profiles auto|on|off] [--oracle]

``--loads`` picks Pollux's load variants (``workloads`` = 1.0, ``workloads-0.5`` ...), found like
every other data file ($LAVAFLOW_DATA, ../shared/data, package copy); ``--workloads DIR`` gives one
folder instead. A policy written ``NAME+AB`` runs on the same trace with every job allowed to
co-adapt its batch size (``lavaflow.io/adaptive-batch``); ``--adaptive-batch`` does so for every
policy; ``+SP`` / ``-SP`` at the end of a policy (``Pollux+AB+SP``) turns the sharing of
measurements between jobs of one model (``lavaflow.io/profile-group``, the trace's application)
on / off for that row, ``--shared-profiles`` for every row (default: each policy's own choice, off
for Pollux as its artifact runs it); ``--param NAME=VALUE`` (repeatable) passes a policy parameter to every policy that takes
parameters (e.g. ``--param prior=14400 --param switch_factor=24`` for Goodput, as
``elastic.policy.<NAME>`` in the scheduler configuration). Without ``--interval`` each policy runs at its own tick (60 s for the literature Tiresias,
else 30 s). Prints avg JCT (hours) per policy per workload, the mean over workloads, the change
against ``Tiresias`` (literature baseline), whether the policy reads remaining work (clairvoyant),
and CPU seconds per replay (the whole replay: loading, admission, controllers, scheduler; with
``--fresh`` each replay runs in a new process, so its CPU time also includes the imports and the
speed tables a process builds once).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

AB = "+AB"
# Mean avg JCT (s) over workloads 1-8 of the Pollux artifact's own Pollux policy, per load
# (simulator/results-jobload/pollux-<load>/summary.json, OSDI'21 branch of petuum/adaptdl)
ARTIFACT_POLLUX = {"0.5": 1534.0, "1.0": 2751.0, "1.5": 3685.0, "2.0": 5289.0}


def parse_policy(spec: str, all_adaptive: bool, shared: bool | None = None) -> tuple[str, str, bool, bool]:
    """``NAME``, ``NAME+AB`` (adaptive batch), with ``+SP`` / ``-SP`` at the end (profile sharing on /
    off for this row) -> (row label, registered name, adaptive jobs, profiles shared)."""
    from lavaflow.elastic.policies import make_policy, resolve_name

    s = spec.strip()
    if s.upper().endswith(("+SP", "-SP")):
        s, shared = s[:-3], s[-3] == "+"
    adaptive = all_adaptive
    if s.upper().endswith(AB):
        s, adaptive = s[: -len(AB)], True
    name = resolve_name(s)
    own = make_policy(name).shares_profiles
    share = own if shared is None else shared
    label = (name + AB if adaptive else name) + ("" if share == own else ("+SP" if share else "-SP"))
    return label, name, adaptive, share


def run_one(task: tuple) -> tuple:
    label_set, path, label, name, adaptive, cost, interval, params, oracle, shared = task
    from lavaflow.sim import BATCH_GC_THRESHOLDS

    gc.set_threshold(*BATCH_GC_THRESHOLDS)  # as `lavaflow simulate` sets it for its process
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    t0 = time.process_time()
    w0 = time.perf_counter()
    res = replay(
        trace_inputs([path], gpu_cluster(), adaptive=adaptive),
        name,
        params=params,
        interval=interval,
        cost=cost,
        oracle=oracle,
        shared_profiles=shared,
    )
    s = res.summary()
    s["cpu"] = time.process_time() - t0
    s["wall"] = time.perf_counter() - w0
    return label_set, Path(path).stem, label, s


def _takes_params() -> set[str]:
    from lavaflow.elastic.policies import _RESIZE_AWARE

    return set(_RESIZE_AWARE)


def main() -> None:
    from lavaflow.elastic.data_paths import find_data
    from lavaflow.elastic.policies import POLICY_NAMES

    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=None, help="one folder with workload-{1..8}.csv")
    ap.add_argument("--loads", default="1.0", help="comma-separated Pollux load variants: 1.0,0.5,1.5,2.0")
    ap.add_argument(
        "--policies", default=",".join(POLICY_NAMES), help="NAME or NAME+AB (adaptive batch), comma-separated"
    )
    ap.add_argument("--adaptive-batch", action="store_true", help="every policy with batch-size co-adaptation")
    ap.add_argument("--only", default=None, help="comma-separated workload numbers (default all)")
    ap.add_argument("--resize-cost", type=float, default=30.0)
    ap.add_argument(
        "--interval",
        type=float,
        default=None,
        help="reschedule rate limit (default: each policy's own tick, else 30 s)",
    )
    ap.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="each replay in a new process, so its CPU time includes the imports and the speed tables "
        "(what one `lavaflow simulate TRACE.csv` pays); default: a process runs several replays",
    )
    ap.add_argument("--param", action="append", default=[], help="NAME=VALUE policy parameter (repeatable)")
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    ap.add_argument(
        "--oracle",
        action="store_true",
        help="hand the policies the simulator's true speed models (ablation; default: models learned from reports)",
    )
    ap.add_argument(
        "--shared-profiles",
        choices=("auto", "on", "off"),
        default="auto",
        help="jobs of one model (the trace's application) share their measurements: on / off for every "
        "policy (ablation), auto: each policy's own choice (off for Pollux, as its artifact runs it)",
    )
    args = ap.parse_args()
    shared = {"auto": None, "on": True, "off": False}[args.shared_profiles]
    if args.oracle:
        shared = False  # (the true models: nothing to learn, nothing to share)
    try:
        rows = [parse_policy(p, args.adaptive_batch, shared) for p in args.policies.split(",") if p.strip()]
    except KeyError as exc:
        sys.exit(f"error: --policies: unknown policy {exc.args[0]!r} (choose from {', '.join(POLICY_NAMES)})")
    params = {}
    for kv in args.param:
        k, sep, v = kv.partition("=")
        if not sep or not k.strip():
            sys.exit(f"error: --param: expected NAME=VALUE, got {kv!r}")
        try:
            params[k.strip()] = float(v)
        except ValueError:
            params[k.strip()] = v.strip()
    sets = (
        [(str(args.workloads), Path(args.workloads))]
        if args.workloads
        else [
            (ld.strip(), find_data("pollux/workloads" if float(ld) == 1.0 else f"pollux/workloads-{ld.strip()}"))
            for ld in args.loads.split(",")
            if ld.strip()
        ]
    )
    print(
        f"# 16x4 GPUs; resize cost {args.resize_cost:g}s, interval "
        f"{args.interval if args.interval is not None else 'policy default'}; python {platform.python_version()}, "
        f"nproc {os.cpu_count()}, {args.procs} processes{' (a new one per replay)' if args.fresh else ''}, "
        f"loadavg {os.getloadavg()[0]:.2f}" + (f"; params {params}" if params else ""),
        flush=True,
    )
    tasks = []
    for label_set, wdir in sets:
        files = sorted(wdir.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
        if args.only:
            keep = {s.strip() for s in args.only.split(",")}
            files = [f for f in files if f.stem.split("-")[1] in keep]
        tasks += [
            (
                label_set,
                str(f),
                label,
                name,
                ada,
                args.resize_cost,
                args.interval,
                params if name in _takes_params() else {},
                args.oracle,
                share,
            )
            for f in files
            for label, name, ada, share in rows
        ]
    table: dict[str, dict[str, dict[str, dict]]] = {}
    # max_tasks_per_child starts every worker anew (spawn): nothing is imported or cached yet
    with ProcessPoolExecutor(max_workers=args.procs, max_tasks_per_child=1 if args.fresh else None) as ex:
        for label_set, wl, label, s in ex.map(run_one, tasks):
            table.setdefault(label_set, {}).setdefault(label, {})[wl] = s
            print(
                f"load {label_set:5s} {wl:12s} {label:18s} avg JCT {s['avg_jct'] / 3600:6.3f} h  p99 {s['p99_jct'] / 3600:6.2f} h  "
                f"util {s['gpu_utilization']:.3f}  resizes {s['resizes']:4d} migrations {s['migrations']:4d}  "
                f"cpu {s['cpu']:.1f}s wall {s['wall']:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    for label_set, by_label in table.items():
        names = sorted(next(iter(by_label.values())), key=lambda n: int(n.split("-")[1]))
        print(
            f"\nload {label_set}: avg JCT (hours); * = reads remaining work (clairvoyant); "
            "s = jobs of one model share their measurements (lavaflow.io/profile-group); "
            + ("speed models: ORACLE (the simulator's true models)" if args.oracle else "speed models: learned")
        )
        print(f"{'policy':20s} " + " ".join(f"{n.split('-')[1]:>6s}" for n in names) + "    mean  max cpu(s)")
        means = {}
        for label, _, _, share in rows:
            vals = [by_label[label][n]["avg_jct"] / 3600 for n in names]
            means[label] = statistics.mean(vals)
            cpu = max(by_label[label][n]["cpu"] for n in names)
            mark = (" *" if by_label[label][names[0]].get("clairvoyant") else "") + (" s" if share else "")
            print(f"{label + mark:20s} " + " ".join(f"{v:6.3f}" for v in vals) + f"  {means[label]:6.3f}  {cpu:7.2f}")
        print(f"{'policy':20s}  mean avg JCT (s)  mean p99 JCT (h)  mean makespan (h)  GPU-h per job")
        for label, _, _, _ in rows:
            runs = [by_label[label][n] for n in names]
            print(
                f"{label:20s}  {statistics.mean(r['avg_jct'] for r in runs):16.0f}  "
                f"{statistics.mean(r['p99_jct'] for r in runs) / 3600:16.2f}  "
                f"{statistics.mean(r['makespan'] for r in runs) / 3600:17.2f}  "
                f"{statistics.mean(r['gpu_hours_per_job'] for r in runs):13.2f}"
            )
        if "Tiresias" in means:
            for label, _, _, _ in rows:
                print(f"{label:20s} mean avg JCT vs Tiresias: {100 * (means[label] / means['Tiresias'] - 1):+6.1f}%")
        ref = ARTIFACT_POLLUX.get(label_set)
        if ref is not None and len(names) == 8:
            for label, _, _, _ in rows:
                print(
                    f"{label:20s} mean avg JCT vs the Pollux artifact's own Pollux ({ref:.0f} s): "
                    f"{100 * (means[label] * 3600 / ref - 1):+6.1f}%"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1, default=str))


if __name__ == "__main__":
    main()
