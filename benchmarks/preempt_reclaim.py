"""Preempt and reclaim cycle time at scale (issue 4).

Builds a SchedulerCache directly (no simulator, no YAML): N nodes full of
running pods of low-priority jobs in an overused queue ``batch``, plus
starving high-priority jobs — in ``batch`` itself (preempt) or in a queue
``prod`` below its deserved share (reclaim). Each scenario is rebuilt from
scratch before every timed cycle; one ``Scheduler.run_once`` (enqueue,
allocate, backfill and preempt or reclaim) is timed, and the preempt/reclaim
action separately.

    .venv/bin/python benchmarks/preempt_reclaim.py [--nodes 1000] [--pods 10000] [--cycles 3] [--profile]

Target: ≤ 1 s per cycle at 1,000 nodes and 10,000 running pods (KAI reports
9 s for reclaim at 500 nodes).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import time

from lavaflow.api.core import Node, Pod
from lavaflow.api.volcano import GROUP_NAME_ANNOTATION, PodGroup, PriorityClass, Queue
from lavaflow.scheduler.cache import SchedulerCache
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.scheduler.scheduler import Scheduler

CONF = """actions: "enqueue, allocate, backfill, {action}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
POD_CPU = 1
LOW_JOB_PODS = 10  # running pods per low-priority job (minAvailable 1: 9 preemptable)
HIGH_JOBS, HIGH_JOB_PODS = 20, 8  # starving gangs (minAvailable = size)


def _node(name: str, cpu: int) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def _queue(name: str, weight: int = 1) -> Queue:
    return Queue.model_validate(
        {"metadata": {"name": name}, "spec": {"weight": weight, "reclaimable": True}, "status": {"state": "Open"}}
    )


def _pg(name: str, queue: str, members: int, prio: str, phase: str) -> PodGroup:
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": 0},
            "spec": {
                "minMember": members,
                "queue": queue,
                "priorityClassName": prio,
                "minResources": {"cpu": str(members * POD_CPU), "memory": f"{members * POD_CPU * 2}Gi"},
            },
            "status": {"phase": phase},
        }
    )


def _pod(name: str, group: str, prio: str, node: str | None) -> Pod:
    spec = {
        "schedulerName": "volcano",
        "priorityClassName": prio,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(POD_CPU), "memory": f"{POD_CPU * 2}Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {GROUP_NAME_ANNOTATION: group},
                "creationTimestamp": 0,
            },
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


def build(nodes: int, pods: int, scenario: str) -> SchedulerCache:
    """``pods`` running low-priority pods filling ``nodes`` nodes, plus the starving high-priority gangs."""
    per_node = -(-pods // nodes)
    cache = SchedulerCache(scheduler_names=("volcano",))
    cache.register_resources(["cpu", "memory", "pods"])
    for name, value in (("low", 10), ("high", 1000)):
        cache.on_priority_class(PriorityClass.model_validate({"metadata": {"name": name}, "value": value}))
    for i in range(nodes):
        cache.on_node(_node(f"node-{i}", per_node * POD_CPU))
    for q in ("root", "default", "batch", "prod"):
        cache.on_queue(_queue(q))
    high_queue = "batch" if scenario == "preempt" else "prod"
    for j in range(-(-pods // LOW_JOB_PODS)):
        cache.on_podgroup(_pg(f"low-{j}", "batch", 1, "low", "Running"))
    for j in range(HIGH_JOBS):
        cache.on_podgroup(_pg(f"high-{j}", high_queue, HIGH_JOB_PODS, "high", "Inqueue"))
    # Spread each low job over several nodes (pods of job j go round-robin).
    for k in range(pods):
        job, idx = divmod(k, LOW_JOB_PODS)
        cache.on_pod(_pod(f"low-{job}-{idx}", f"low-{job}", "low", f"node-{k % nodes}"))
    for j in range(HIGH_JOBS):
        for i in range(HIGH_JOB_PODS):
            cache.on_pod(_pod(f"high-{j}-{i}", f"high-{j}", "high", None))
    return cache


def one_cycle(nodes: int, pods: int, scenario: str, profile: bool = False):
    cache = build(nodes, pods, scenario)
    sched = Scheduler(cache, load_scheduler_conf(CONF.format(action=scenario)))
    action = next(a for a in sched.actions if a.name == scenario)
    inner = action.execute
    spent = [0.0]

    def timed(ssn, inner=inner):
        t = time.perf_counter()
        inner(ssn)
        spent[0] += time.perf_counter() - t

    action.execute = timed
    gc.collect()
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    sched.run_once(0.0)
    if prof:
        prof.disable()
    elapsed = time.perf_counter() - t0
    decisions = cache.take_decisions()
    return elapsed, spent[0], len(decisions.evictions), prof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the last cycle of each scenario")
    args = ap.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print(
        f"{args.nodes} nodes, {args.pods} running low-priority pods in queue batch, "
        f"{HIGH_JOBS} starving gangs of {HIGH_JOB_PODS} high-priority pods"
    )
    for scenario in ("preempt", "reclaim"):
        runs = []
        prof = None
        for c in range(args.cycles):
            elapsed, act, ev, prof = one_cycle(args.nodes, args.pods, scenario, args.profile and c == args.cycles - 1)
            runs.append((elapsed, act, ev))
        p50 = statistics.median(r[0] for r in runs)
        a50 = statistics.median(r[1] for r in runs)
        evs = sorted({r[2] for r in runs})
        verdict = "OK" if p50 <= 1.0 else "over target"
        print(
            f"{scenario:8s} cycle p50 {p50:.3f} s ({scenario} action {a50:.3f} s), evictions per cycle {evs}, "
            f"target <= 1 s: {verdict}"
        )
        if prof is not None:
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
            print(s.getvalue())


if __name__ == "__main__":
    main()
