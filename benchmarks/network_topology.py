"""Network-topology-aware placement benchmark (issue 13).

1,000 nodes (32 CPU, 128 GiB) under a 3-tier HyperNode tree — 125 tier-1 HyperNodes of
8 nodes, 25 tier-2 of 5 tier-1s, 5 tier-3 of 5 tier-2s — and 100 gangs of 8–64 pods
(4 or 8 CPU each) in hard mode, each with the lowest highestTierAllowed its size can
fit in (tier 1 up to 32 pods of 4 CPU, tier 2 beyond). Runs scheduling cycles with
Volcano's default configuration plus network-topology-aware until every gang is
placed or a cycle makes no progress, and prints the cycle times; then the same gangs without
networkTopology with the plugin configured (HyperNode binpacking of ordinary pods), and with
the plugin not configured, for reference.

    PYTHONPATH=src .venv/bin/python benchmarks/network_topology.py
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from placement import apply, make_queues  # noqa: E402

from lavaflow.api.core import Node, Pod  # noqa: E402
from lavaflow.api.topology import HyperNode  # noqa: E402
from lavaflow.api.volcano import GROUP_NAME_ANNOTATION, TASK_INDEX_KEY, TASK_SPEC_KEY, PodGroup  # noqa: E402
from lavaflow.scheduler.cache import SchedulerCache  # noqa: E402
from lavaflow.scheduler.framework.conf import load_scheduler_conf  # noqa: E402
from lavaflow.scheduler.scheduler import Scheduler  # noqa: E402

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
NT_CONF = CONF + "  - name: network-topology-aware\n"
LEAF, FAN = 8, 5  # nodes per tier-1 HyperNode; children per tier-2/3 HyperNode


def make_nodes(k: int) -> list[Node]:
    return [
        Node.model_validate(
            {
                "metadata": {"name": f"node-{i:04d}"},
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
            }
        )
        for i in range(k)
    ]


def make_hypernodes(k: int) -> list[HyperNode]:
    out = []
    leaves = []
    for s in range(k // LEAF):
        name = f"leaf-{s:03d}"
        leaves.append(name)
        members = [
            {"type": "Node", "selector": {"exactMatch": {"name": f"node-{i:04d}"}}}
            for i in range(s * LEAF, (s + 1) * LEAF)
        ]
        out.append(HyperNode.model_validate({"metadata": {"name": name}, "spec": {"tier": 1, "members": members}}))
    level, tier = leaves, 2
    while tier <= 3:
        parents = []
        for p in range(0, len(level), FAN):
            name = f"t{tier}-{p // FAN:03d}"
            parents.append(name)
            members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in level[p : p + FAN]]
            out.append(
                HyperNode.model_validate({"metadata": {"name": name}, "spec": {"tier": tier, "members": members}})
            )
        level, tier = parents, tier + 1
    return out


def make_workload(n_jobs: int, rng: random.Random, topology: bool) -> tuple[list[PodGroup], list[Pod]]:
    pgs, pods = [], []
    for j in range(n_jobs):
        size = rng.randint(8, 64)
        cpu = rng.choice((4, 8))
        name = f"gang-{j:03d}"
        per_leaf = LEAF * (32 // cpu)
        spec = {
            "minMember": size,
            "queue": "default",
            "minResources": {"cpu": str(cpu * size), "memory": f"{cpu * 2 * size}Gi", "pods": str(size)},
        }
        if topology:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1 if size <= per_leaf else 2}
        pgs.append(
            PodGroup.model_validate(
                {"metadata": {"name": name, "namespace": "default", "creationTimestamp": float(j)}, "spec": spec}
            )
        )
        for i in range(size):
            pods.append(
                Pod.model_validate(
                    {
                        "metadata": {
                            "name": f"{name}-w-{i}",
                            "namespace": "default",
                            "creationTimestamp": float(j),
                            "annotations": {GROUP_NAME_ANNOTATION: name, TASK_SPEC_KEY: "w", TASK_INDEX_KEY: str(i)},
                        },
                        "spec": {
                            "schedulerName": "volcano",
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": str(cpu), "memory": f"{cpu * 2}Gi"}}}
                            ],
                        },
                    }
                )
            )
    return pgs, pods


def run(args, topology: bool, plugin: bool | None = None) -> None:
    plugin = topology if plugin is None else plugin
    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes)
    pg_list, pod_list = make_workload(args.gangs, rng, topology)
    queues = {q.name: q for q in make_queues()}
    cache = SchedulerCache()
    cache.register_resources(["cpu", "memory", "pods"])
    for node in nodes:
        cache.on_node(node)
    for q in queues.values():
        cache.on_queue(q)
    if plugin:
        for hn in make_hypernodes(args.nodes):
            cache.on_object("HyperNode", hn)
    pgs = {}
    for pg in pg_list:
        pgs[pg.key] = pg
        cache.on_podgroup(pg)
    pods = {}
    for pod in pod_list:
        pods[pod.key] = pod
        cache.on_pod(pod)
    sched = Scheduler(cache, load_scheduler_conf(NT_CONF if plugin else CONF))
    times, cpu, placed = [], [], 0
    for cycle in range(args.max_cycles):
        t0, c0 = time.perf_counter(), time.process_time()
        sched.run_once(now=float(cycle))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        decisions = cache.decisions
        cache.decisions = type(decisions)()
        binds = apply(cache, decisions, pods, pgs, queues)
        placed += binds
        if not binds and cycle > 0:
            break
    n = len(cache.nodes)
    assert not np.any(cache.nodes.used[:n] > cache.nodes.allocatable[:n] + 1e-6), "overcommitted node"
    if topology:
        check_gangs_inside_hypernodes(cache, pods, pgs)
    label = (
        "with networkTopology (hard)"
        if topology
        else "without networkTopology, plugin configured (HyperNode binpacking of normal pods)"
        if plugin
        else "without (plugin not configured)"
    )
    print(f"{label}:")
    print(f"  pods placed        {placed} of {len(pod_list)} in {len(pg_list)} gangs")
    print(f"  cycles             {len(times)}")
    print(f"  first cycle        {times[0] * 1000:.1f} ms (cpu {cpu[0] * 1000:.1f} ms)")
    print(f"  cycle p50 / max    {sorted(times)[len(times) // 2] * 1000:.1f} / {max(times) * 1000:.1f} ms")
    print(f"  total              {sum(times):.3f} s (cpu {sum(cpu):.3f} s)")
    print(f"  load average       {' '.join(open('/proc/loadavg').read().split()[:3])}")


def check_gangs_inside_hypernodes(cache, pods, pgs) -> None:
    """Every placed gang lies inside one HyperNode of its allowed tier (no leaf = 8 nodes etc.)."""
    by_job: dict[str, set[int]] = {}
    for pod in pods.values():
        if pod.spec.node_name:
            by_job.setdefault(pod.metadata.annotations[GROUP_NAME_ANNOTATION], set()).add(int(pod.spec.node_name[5:]))
    for name, idx in by_job.items():
        tier = pgs[f"default/{name}"].spec.network_topology.highest_tier_allowed
        span = LEAF * FAN ** (tier - 1)
        assert len({i // span for i in idx}) == 1, f"{name} spans more than one tier-{tier} HyperNode"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gangs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-cycles", type=int, default=50)
    args = ap.parse_args(argv)
    run(args, topology=True)
    run(args, topology=False, plugin=True)
    run(args, topology=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
