"""nodegroup (queue ↔ node-group affinity), through the simulator."""

from __future__ import annotations

import json

from plugin_helpers import queue_job as job
from test_network_topology import CONF, conf, reason_of

from conftest import node_group, simulate

PLAIN = CONF.replace("  - name: network-topology-aware\n", "")
NG_CONF = CONF.replace("  - name: network-topology-aware\n", "  - name: nodegroup\n")


def queue(name: str, affinity: dict | None = None) -> str:
    spec: dict = {"weight": 1}
    if affinity is not None:
        spec["affinity"] = affinity
    return (
        "---\n"
        + json.dumps(
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        )
        + "\n"
    )


def nodes_of(result: dict, job_name: str) -> list[str]:
    return sorted(p["node"] for p in result["pods"] if p["job"] == job_name and p.get("node"))


GROUPS = node_group("x", 2, cpu="4", memory="16Gi", labels={"volcano.sh/nodegroup-name": "gx"}) + node_group(
    "y", 2, cpu="4", memory="16Gi", labels={"volcano.sh/nodegroup-name": "gy"}
)


def test_queue_affinity_binds_jobs_to_their_node_group():
    text = (
        GROUPS
        + queue("qx", {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["gx"]}})
        + queue(
            "qy",
            {
                "nodeGroupAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["gy"]},
                "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["gx"]},
            },
        )
        + job("a", "qx", 4)
        + job("b", "qy", 4)
    )
    r = simulate(conf(NG_CONF) + text, until=500)
    assert {n[0] for n in nodes_of(r, "a")} == {"x"}
    assert {n[0] for n in nodes_of(r, "b")} == {"y"}
    plain = simulate(conf(PLAIN) + text, until=500)
    assert {n[0] for n in nodes_of(plain, "b")} != {"y"}  # without the plugin nothing keeps b off gx


def test_queue_without_affinity_cannot_use_grouped_nodes_in_strict_mode():
    text = GROUPS + node_group("free", 1, cpu="4", memory="16Gi") + job("c", "default", 2)
    r = simulate(conf(NG_CONF) + text, until=500)
    assert nodes_of(r, "c") == []
    assert "node group" in reason_of(r, "c")
    relaxed = NG_CONF.replace("  - name: nodegroup\n", "  - name: nodegroup\n    arguments: {strict: false}\n")
    assert {n.split("-")[0] for n in nodes_of(simulate(conf(relaxed) + text, until=500), "c")} == {"free"}


def child_queue(name: str, parent: str, annotations: dict | None = None, affinity: dict | None = None) -> str:
    spec: dict = {"weight": 1, "parent": parent}
    if affinity:
        spec["affinity"] = affinity
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": spec,
            }
        )
        + "\n"
    )


def test_hierarchy_inherits_the_nearest_ancestors_affinity():
    text = (
        GROUPS
        + queue("team", {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["gy"]}})
        + child_queue("dev", "team")
        + job("a", "dev", 2)
    )
    hier = NG_CONF.replace("  - name: nodegroup\n", "  - name: nodegroup\n    enableHierarchy: true\n")
    assert {n[0] for n in nodes_of(simulate(conf(hier) + text, until=500), "a")} == {"y"}
    assert nodes_of(simulate(conf(NG_CONF) + text, until=500), "a") == []  # dev has no affinity of its own


def test_nodegroup_resource_limits_cap_a_queue_per_group():
    aff = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["gx", "gy"]}}
    limits = {"volcano.sh/nodegroup-resource-limits": json.dumps({"gx": {"cpu": "2"}})}
    text = GROUPS + child_queue("q", "root", limits, aff) + job("a", "q", 6)
    r = simulate(conf(NG_CONF) + text, until=500)
    placed = nodes_of(r, "a")
    assert len(placed) == 6 and sum(1 for n in placed if n.startswith("x")) <= 2
    bad = child_queue("q", "root", {"volcano.sh/nodegroup-resource-limits": "{not json"}, aff) + job("a", "q", 1)
    r = simulate(conf(NG_CONF) + GROUPS + bad, until=100)
    assert nodes_of(r, "a") == [] and "node group resource limit annotation invalid" in reason_of(r, "a")
