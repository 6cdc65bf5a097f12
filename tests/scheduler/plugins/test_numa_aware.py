"""numa-aware: Numatopology objects, task topologyPolicy and per-NUMA-node accounting, through the simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_network_topology import CONF, conf, job_of, nodes_of, reason_of

from conftest import simulate
from lavaflow.api.loader import InputError, load_text
from lavaflow.api.topology import Numatopology
from lavaflow.scheduler.plugins.numa_aware import NodeNuma, assign
from lavaflow.sim.inputs import prepare

NUMA_CONF = CONF.replace("network-topology-aware", "numa-aware")


def numa_group(name: str, count: int, cpu: int, numa_nodes: int | None, policy: str = "single-numa-node") -> str:
    spec: dict = {"count": count, "capacity": {"cpu": str(cpu), "memory": "64Gi"}}
    if numa_nodes:
        spec["numa"] = {"nodes": numa_nodes, "topologyManagerPolicy": policy}
    return (
        "---\n"
        + json.dumps(
            {"apiVersion": "sim.lavaflow.io/v1alpha1", "kind": "NodeGroup", "metadata": {"name": name}, "spec": spec}
        )
        + "\n"
    )


def numa_job(
    name: str,
    replicas: int,
    cpu: str,
    policy: str | None = "single-numa-node",
    guaranteed: bool = True,
    submit_at: int = 0,
) -> str:
    res = {"limits": {"cpu": cpu, "memory": "1Gi"}} if guaranteed else {"requests": {"cpu": cpu, "memory": "1Gi"}}
    task: dict = {
        "name": "w",
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": {"sim.lavaflow.io/duration": "100"}},
            "spec": {"containers": [{"name": "c", "resources": res}]},
        },
    }
    if policy:
        task["topologyPolicy"] = policy
    ann = {"sim.lavaflow.io/submit-at": str(submit_at)} if submit_at else {}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name, "annotations": ann},
                "spec": {"minAvailable": replicas, "schedulerName": "volcano", "tasks": [task]},
            }
        )
        + "\n"
    )


def test_single_numa_node_jobs_land_only_where_they_fit_in_one_numa_node():
    # numa-*: 16 CPUs as 2 NUMA nodes of 8; plain-*: no NUMA topology at all.
    r = simulate(
        conf(NUMA_CONF) + numa_group("numa", 2, 16, 2) + numa_group("plain", 2, 16, None) + numa_job("hpc", 4, "6"),
        until=1000,
    )
    assert sorted(nodes_of(r, "hpc")) == ["numa-0", "numa-0", "numa-1", "numa-1"]  # one per NUMA node
    assert job_of(r, "hpc")["phase"] == "Completed"


def test_single_numa_node_gang_that_cannot_fit_waits_with_reason():
    # Five 6-CPU pods: only four NUMA nodes have 6 free CPUs, though 32 CPUs are free on numa nodes.
    r = simulate(conf(NUMA_CONF) + numa_group("numa", 2, 16, 2) + numa_job("hpc", 5, "6"), until=1000)
    assert job_of(r, "hpc")["phase"] == "Pending"
    why = reason_of(r, "hpc")
    assert "could not fit the pod's exclusive CPUs in their NUMA nodes (single-numa-node)" in why


def test_two_pods_never_take_the_same_cores_across_sessions():
    # The first job takes 6 of each NUMA node's 8 CPUs; the later one (4 CPUs) must wait for it
    # although each node still has 4 CPUs free in total.
    r = simulate(
        conf(NUMA_CONF) + numa_group("numa", 1, 16, 2) + numa_job("a", 2, "6") + numa_job("b", 1, "4", submit_at=10),
        until=1000,
    )
    a, b = job_of(r, "a"), job_of(r, "b")
    assert a["startTime"] == pytest.approx(0, abs=2) and b["startTime"] >= a["finishTime"]


def test_policy_must_match_the_nodes_topology_manager_policy():
    r = simulate(
        conf(NUMA_CONF)
        + numa_group("be", 1, 16, 2, policy="best-effort")
        + numa_group("snn", 1, 16, 2)
        + numa_job("x", 1, "4", policy="best-effort")
        + numa_job("y", 1, "4", policy="restricted"),
        until=1000,
    )
    assert nodes_of(r, "x") == ["be-0"]
    assert job_of(r, "y")["phase"] == "Pending"
    assert "topology manager policy isn't restricted" in reason_of(r, "y")


def test_without_the_plugin_numa_is_ignored():
    # 10 CPUs cannot come from one 8-CPU NUMA node, but without numa-aware nobody checks.
    text = numa_group("numa", 2, 16, 2) + numa_job("hpc", 2, "10")
    assert job_of(simulate(conf(NUMA_CONF) + text, until=1000), "hpc")["phase"] == "Pending"
    assert (
        job_of(simulate(conf(CONF.replace("  - name: network-topology-aware\n", "")) + text, until=1000), "hpc")[
            "phase"
        ]
        == "Completed"
    )


def test_burstable_pods_get_no_exclusive_cpus():
    r = simulate(
        conf(NUMA_CONF)
        + numa_group("numa", 1, 16, 2)
        + numa_job("s", 2, "7", policy=None, guaranteed=False)
        + numa_job("g", 2, "6", policy=None),
        until=1000,
    )
    assert job_of(r, "s")["phase"] == "Completed" and job_of(r, "g")["phase"] == "Completed"


def numatopo(policy: str, numa_sizes: list[int]) -> NodeNuma:
    detail, cpu = {}, 0
    for n, size in enumerate(numa_sizes):
        for _ in range(size):
            detail[str(cpu)] = {"numa": n}
            cpu += 1
    nt = Numatopology.model_validate(
        {
            "metadata": {"name": "n"},
            "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
                "numares": {"cpu": {"allocatable": f"0-{cpu - 1}", "capacity": cpu}},
                "cpuDetail": detail,
            },
        }
    )
    return NodeNuma(nt)


def test_policies_choose_numa_nodes_as_the_topology_manager_would():
    node = numatopo("restricted", [8, 8, 8, 8])
    node.free = np.array([2, 8, 5, 8])
    assert assign(node, [6], "single-numa-node").tolist() == [0, 6, 0, 0]  # the tightest single node
    assert assign(node, [9], "single-numa-node") is None
    assert assign(node, [12], "restricted").tolist() == [0, 8, 4, 0] or assign(node, [12], "restricted").sum() == 12
    assert int(np.count_nonzero(assign(node, [12], "restricted"))) == 2
    node.free = np.array([5, 5, 5, 5])
    assert assign(node, [12], "restricted") is None  # would need 3 NUMA nodes; 2 could hold it
    assert int(np.count_nonzero(assign(node, [12], "best-effort"))) == 3


def test_numa_layout_must_divide_the_cpus():
    with pytest.raises(InputError) as exc:
        prepare(load_text(numa_group("numa", 1, 10, 3)))
    assert any("NodeGroup/numa: spec.numa.nodes" in l for l in exc.value.problems)


def test_numa_aware_example():
    from conftest import EXAMPLES

    text = (EXAMPLES / "numa-aware.yaml").read_text()
    r = simulate(text)
    assert sorted(nodes_of(r, "solver")) == ["numa-0", "numa-0", "numa-1", "numa-1"]
    assert job_of(r, "mesher")["startTime"] >= job_of(r, "solver")["finishTime"]
    waiting = simulate(text, until=120)
    assert "exclusive CPUs in their NUMA nodes (single-numa-node)" in reason_of(waiting, "mesher")


def _restarted_binds(sim) -> list[str]:
    """The pods a scheduler started afresh over ``sim``'s cluster binds in its first cycle."""
    from lavaflow.scheduler.cache import DEFAULT_MAX_PODS, PLUGIN_KINDS, SchedulerCache
    from lavaflow.scheduler.scheduler import Scheduler
    from lavaflow.sim.engine import SIM_SCHEDULER_NAMES

    cache = SchedulerCache(scheduler_names=SIM_SCHEDULER_NAMES, kubelet_max_pods=DEFAULT_MAX_PODS)
    cache.register_resources(list(sim.cache.index.names))
    store = sim.store
    feeds = {"Node": "node", "PriorityClass": "priority_class", "Queue": "queue", "PodGroup": "podgroup", "Pod": "pod"}
    for kind, name in feeds.items():  # (in this order: what pods refer to first)
        for obj in store.list(kind):
            getattr(cache, f"on_{name}")(obj, False)
    for kind in PLUGIN_KINDS:
        for obj in store.list(kind):
            cache.on_object(kind, obj, False)
    Scheduler(cache, sim.scheduler.conf).run_once(sim.now)
    return [key for key, _node in cache.take_decisions().binds]


def test_a_restarted_scheduler_does_not_offer_the_cores_of_running_pods_again(monkeypatch):
    from lavaflow.scheduler.plugins import numa_aware
    from lavaflow.sim.engine import Simulation

    text = conf(NUMA_CONF) + numa_group("numa", 1, 16, 2) + numa_job("a", 2, "6") + numa_job("b", 1, "4", submit_at=10)
    sim = Simulation(prepare(load_text(text)), until=20)
    sim.run()
    assert sorted(p.status.phase for p in sim.store.list("Pod")) == ["Pending", "Running", "Running"]
    assert _restarted_binds(sim) == []  # a's pods hold 6 of each NUMA node's 8 CPUs
    monkeypatch.setattr(numa_aware, "_adopt", lambda *a: None)
    assert _restarted_binds(sim) == ["default/b-w-0"]  # what a restart did before it adopted them
