"""Placement throughput benchmark (issue 2 §8).

Builds a SchedulerCache directly (no simulator, no YAML): K nodes, the queues
"root" and "default", gang PodGroups of mixed sizes and their pods. Then runs
scheduling cycles with Volcano's shipped default configuration (enqueue,
allocate, backfill; priority, gang, conformance, overcommit, drf, predicates,
proportion, nodeorder, binpack) and applies each cycle's decisions the way a
backend does, until every pod is placed or a cycle makes no progress.

Only ``Scheduler.run_once`` is timed; building the objects and applying the
decisions are measured separately.

    .venv/bin/python benchmarks/placement.py --nodes 5000 --pods 50000
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

from lavaflow.api.core import Node, Pod
from lavaflow.api.volcano import (
    GROUP_NAME_ANNOTATION,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    PodGroup,
    PodGroupCondition,
    Queue,
)
from lavaflow.scheduler.cache import SchedulerCache
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.scheduler.scheduler import Scheduler

GI = 2**30
GANG_SIZES = (1, 2, 4, 8, 16, 32)
CPU_CHOICES = (0.5, 1.0, 2.0, 4.0)  # cores per pod
MEM_PER_CPU = (2, 4)  # GiB per core
GPU_NODE_EVERY = 8  # one node in 8 has 8 GPUs
GPU_JOB_SHARE = 0.05  # share of jobs whose pods ask for one GPU each
NODE_CPU, NODE_MEM, NODE_PODS, NODE_GPU = 32, 128 * GI, 110, 8
TARGET_FILL = 0.90


def make_nodes(k: int) -> list[Node]:
    base = Node.model_validate(
        {
            "metadata": {"name": "node-0", "labels": {"kubernetes.io/os": "linux"}},
            "status": {"allocatable": {"cpu": str(NODE_CPU), "memory": f"{NODE_MEM // GI}Gi", "pods": str(NODE_PODS)}},
        }
    )
    gpu = Node.model_validate(
        {
            "metadata": {"name": "node-0", "labels": {"kubernetes.io/os": "linux", "accelerator": "nvidia"}},
            "status": {
                "allocatable": {
                    "cpu": str(NODE_CPU),
                    "memory": f"{NODE_MEM // GI}Gi",
                    "pods": str(NODE_PODS),
                    "nvidia.com/gpu": str(NODE_GPU),
                }
            },
        }
    )
    out = []
    for i in range(k):
        tmpl = gpu if i % GPU_NODE_EVERY == GPU_NODE_EVERY - 1 else base
        meta = tmpl.metadata.model_copy(update={"name": f"node-{i:05d}"})
        out.append(tmpl.model_copy(update={"metadata": meta}))
    return out


def make_queues() -> list[Queue]:
    root = Queue.model_validate({"metadata": {"name": "root"}, "spec": {"weight": 1, "reclaimable": False}})
    default = Queue.model_validate(
        {"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True, "parent": "root"}}
    )
    root.status.state = default.status.state = "Open"
    return [root, default]


def plan_jobs(k: int, n_pods: int, rng: random.Random) -> list[tuple[int, float, float, int]]:
    """(gang size, cpu, memory GiB, gpu) per job, summing to n_pods pods."""
    gpu_nodes = sum(1 for i in range(k) if i % GPU_NODE_EVERY == GPU_NODE_EVERY - 1)
    gpu_cap = gpu_nodes * NODE_GPU
    jobs = []
    placed = 0
    gpus = 0
    while placed < n_pods:
        size = min(rng.choice(GANG_SIZES), n_pods - placed)
        cpu = rng.choice(CPU_CHOICES)
        mem = cpu * rng.choice(MEM_PER_CPU)
        gpu = 0
        if rng.random() < GPU_JOB_SHARE and gpus + size <= TARGET_FILL * gpu_cap:
            gpu = 1
            gpus += size
        jobs.append((size, cpu, mem, gpu))
        placed += size
    return jobs


def scale_to_fit(jobs, k: int, fill: float = TARGET_FILL) -> list[tuple[int, float, float, int]]:
    """Shrink per-pod cpu/memory so that total requests stay within ``fill`` of capacity."""
    cpu = sum(s * c for s, c, _, _ in jobs)
    mem = sum(s * m for s, _, m, _ in jobs)
    pods = sum(s for s, *_ in jobs)
    f = min(
        1.0,
        fill * k * NODE_CPU / cpu if cpu else 1.0,
        fill * k * (NODE_MEM / GI) / mem if mem else 1.0,
    )
    if fill <= TARGET_FILL and pods > fill * k * NODE_PODS:
        sys.exit(f"{pods} pods do not fit in {TARGET_FILL:.0%} of {k} nodes × {NODE_PODS} pods")
    if f >= 1.0:
        return jobs
    # round down to whole millicores / MiB so that quantities stay exact
    return [
        (s, max(0.001, int(c * f * 1000) / 1000), max(1 / 1024, int(m * f * 1024) / 1024), g) for s, c, m, g in jobs
    ]


def make_workload(jobs, rng: random.Random) -> tuple[list[PodGroup], list[Pod]]:
    pgs, pods = [], []
    for j, (size, cpu, mem, gpu) in enumerate(jobs):
        name = f"job-{j:06d}"
        req = {"cpu": f"{int(round(cpu * 1000))}m", "memory": f"{int(round(mem * 1024))}Mi"}
        resources: dict[str, dict[str, str]] = {"requests": req}
        if gpu:
            req["nvidia.com/gpu"] = str(gpu)
            # an extended resource is never overcommitted: Kubernetes wants its limit, equal to the request
            resources["limits"] = {"nvidia.com/gpu": str(gpu)}
        min_res = {"cpu": f"{int(round(cpu * 1000)) * size}m", "memory": f"{int(round(mem * 1024)) * size}Mi"}
        if gpu:
            min_res["nvidia.com/gpu"] = str(gpu * size)
        pgs.append(
            PodGroup.model_validate(
                {
                    "metadata": {"name": name, "namespace": "default", "creationTimestamp": float(j)},
                    "spec": {"minMember": size, "queue": "default", "minResources": min_res},
                }
            )
        )
        tmpl = Pod.model_validate(
            {
                "metadata": {
                    "name": f"{name}-worker-0",
                    "namespace": "default",
                    "creationTimestamp": float(j),
                    "annotations": {GROUP_NAME_ANNOTATION: name, TASK_SPEC_KEY: "worker", TASK_INDEX_KEY: "0"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                },
            }
        )
        for i in range(size):
            meta = tmpl.metadata.model_copy(
                update={
                    "name": f"{name}-worker-{i}",
                    "annotations": {GROUP_NAME_ANNOTATION: name, TASK_SPEC_KEY: "worker", TASK_INDEX_KEY: str(i)},
                }
            )
            pods.append(tmpl.model_copy(update={"metadata": meta, "status": tmpl.status.model_copy()}))
    return pgs, pods


def apply(cache: SchedulerCache, decisions, pods: dict[str, Pod], pgs: dict[str, PodGroup], queues) -> int:
    """Apply a cycle's decisions as a backend would; returns the number of binds."""
    for key, node in decisions.binds:
        pod = pods[key]
        # The spec and status are shared with the job's template pod: give this pod its own.
        pod = pod.model_copy(
            update={"spec": pod.spec.model_copy(update={"node_name": node}), "status": pod.status.model_copy()}
        )
        pod.status.phase = "Running"
        pods[key] = pod
        cache.on_pod(pod)
    for key, status in decisions.podgroups:
        pg = pgs[key]
        pg.status.phase = status["phase"]
        pg.status.running = status["running"]
        pg.status.succeeded = status["succeeded"]
        pg.status.failed = status["failed"]
        pg.status.conditions = [PodGroupCondition.model_validate(c) for c in status["conditions"]]
        cache.on_podgroup(pg)
    for name, status in decisions.queues:
        q = queues[name]
        q.status.allocated = dict(status["allocated"])
        cache.on_queue(q)
    if decisions.evictions:
        raise AssertionError(f"unexpected evictions: {decisions.evictions[:3]}")
    return len(decisions.binds)


def check_no_overcommit(cache: SchedulerCache) -> None:
    cache.check_consistency()
    n = len(cache.nodes)
    alloc = cache.nodes.allocatable[:n]
    used = cache.nodes.used[:n]
    bad = np.flatnonzero(np.any(used > alloc + 1e-6, axis=1))
    if len(bad):
        raise AssertionError(f"{len(bad)} nodes overcommitted, e.g. {cache.nodes.names[bad[0]]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", type=Path, help="volcano-scheduler.conf (default: Volcano's shipped default)")
    ap.add_argument("--max-cycles", type=int, default=1000)
    ap.add_argument(
        "--jobs-per-cycle",
        type=int,
        default=0,
        help="submit this many PodGroups before each cycle (0: all before the first cycle)",
    )
    ap.add_argument("--profile", type=Path, help="write a cProfile of the timed cycles to this file")
    ap.add_argument(
        "--fill",
        type=float,
        default=TARGET_FILL,
        help="scale requests down to at most this share of capacity (above 1: an overloaded cluster, for testing)",
    )
    ap.add_argument("--dump", type=Path, help="write every decision (cycle, binds, PodGroup statuses) to this file")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    nodes = make_nodes(args.nodes)
    jobs = scale_to_fit(plan_jobs(args.nodes, args.pods, rng), args.nodes, args.fill)
    pg_list, pod_list = make_workload(jobs, rng)
    queues = {q.name: q for q in make_queues()}
    t_build = time.perf_counter() - t0

    conf = load_scheduler_conf(args.config.read_text()) if args.config else load_scheduler_conf()
    t0 = time.perf_counter()
    cache = SchedulerCache()
    cache.register_resources(["cpu", "memory", "pods", "nvidia.com/gpu"])
    for node in nodes:
        cache.on_node(node)
    for q in queues.values():
        cache.on_queue(q)
    pods_by_job: dict[str, list[Pod]] = {}
    for pod in pod_list:
        pods_by_job.setdefault(pod.metadata.annotations[GROUP_NAME_ANNOTATION], []).append(pod)
    pending_pgs = list(pg_list)
    per_cycle = args.jobs_per_cycle or len(pending_pgs)

    def submit() -> None:
        batch, pending_pgs[:] = pending_pgs[:per_cycle], pending_pgs[per_cycle:]
        for pg in batch:
            cache.on_podgroup(pg)
            for pod in pods_by_job[pg.name]:
                cache.on_pod(pod)

    if not args.jobs_per_cycle:
        submit()
    t_feed = time.perf_counter() - t0

    pods = {p.key: p for p in pod_list}
    pgs = {pg.key: pg for pg in pg_list}
    sched = Scheduler(cache, conf)
    gc.collect()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    cycle_times: list[float] = []
    dump: list[str] | None = [] if args.dump else None
    t_apply = 0.0
    placed = 0
    idle_cycles = 0
    for cycle in range(args.max_cycles):
        if args.jobs_per_cycle and pending_pgs:
            t0 = time.perf_counter()
            submit()
            t_feed += time.perf_counter() - t0
        if profiler is not None:
            profiler.enable()
        t0 = time.perf_counter()
        sched.run_once(float(cycle))
        dt = time.perf_counter() - t0
        if profiler is not None:
            profiler.disable()
        cycle_times.append(dt)
        t0 = time.perf_counter()
        decisions = cache.take_decisions()
        if dump is not None:
            dump.append(repr((cycle, decisions.binds, decisions.podgroups, decisions.queues)))
        n = apply(cache, decisions, pods, pgs, queues)
        t_apply += time.perf_counter() - t0
        placed += n
        if placed >= len(pod_list):
            break
        if n == 0 and not pending_pgs:
            idle_cycles += 1
            if idle_cycles >= 2:  # one more cycle lets PodGroup phases settle
                break
        else:
            idle_cycles = 0

    check_no_overcommit(cache)
    if dump is not None:
        args.dump.write_text("\n".join(dump) + "\n")
    if profiler is not None:
        profiler.dump_stats(str(args.profile))
    total = sum(cycle_times)
    ms = np.array(cycle_times) * 1000.0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    n_nodes = len(cache.nodes)
    used = cache.nodes.used[:n_nodes].sum(axis=0)
    cap = cache.nodes.allocatable[:n_nodes].sum(axis=0)
    util = ", ".join(f"{name} {used[i] / cap[i]:.0%}" for i, name in enumerate(cache.index.names) if cap[i] > 0)
    print(f"nodes              {args.nodes}")
    print(f"pods               {len(pod_list)} in {len(pg_list)} gang jobs (sizes {'/'.join(map(str, GANG_SIZES))})")
    print(f"placed             {placed}")
    print(f"cycles             {len(cycle_times)}")
    print(f"scheduling time    {total:.3f} s (run_once only)")
    print(f"placements/s       {placed / total:,.0f}" if total > 0 else "placements/s       n/a")
    print(f"cycle p50 / p99    {np.percentile(ms, 50):.1f} / {np.percentile(ms, 99):.1f} ms (max {ms.max():.1f})")
    print(f"peak RSS           {rss:.0f} MiB")
    print(f"utilisation        {util}")
    print(f"build objects      {t_build:.2f} s; feed cache {t_feed:.2f} s; apply decisions {t_apply:.2f} s (untimed)")
    return 0 if placed == len(pod_list) else 1


if __name__ == "__main__":
    sys.exit(main())
