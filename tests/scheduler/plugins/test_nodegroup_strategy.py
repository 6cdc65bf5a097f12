"""nodegroup (queue ↔ node-group affinity) and resource-strategy-fit, through the simulator."""

from __future__ import annotations

import json

from test_network_topology import CONF, conf, reason_of

from conftest import node_group, resources, simulate

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


def job(
    name: str,
    queue_name: str,
    replicas: int = 2,
    cpu: str = "1",
    gpu: str | None = None,
    annotations: dict | None = None,
) -> str:
    req = {"cpu": cpu}
    if gpu:
        req["nvidia.com/gpu"] = gpu
    tmpl_ann = {"sim.lavaflow.io/duration": "100", **(annotations or {})}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "minAvailable": replicas,
                    "schedulerName": "volcano",
                    "queue": queue_name,
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"annotations": tmpl_ann},
                                "spec": {"containers": [{"name": "c", "resources": resources(req)}]},
                            },
                        }
                    ],
                },
            }
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


def test_resource_strategy_fit_most_allocated_packs_gpus():
    gpu_nodes = node_group("g", 3, cpu="16", memory="64Gi", **{"nvidia.com/gpu": "4"})
    rsf = (
        PLAIN.replace("  - name: binpack\n", "").replace("  - name: nodeorder\n", "")
        + "  - name: resource-strategy-fit\n    arguments:\n      resources:\n        nvidia.com/*: {type: MostAllocated, weight: 2}\n        cpu: {type: LeastAllocated, weight: 1}\n"
    )
    text = gpu_nodes + "".join(job(f"j{i}", "default", 1, gpu="1") for i in range(4))
    packed = simulate(conf(rsf) + text, until=500)
    assert len({p["node"] for p in packed["pods"]}) == 1
    least = rsf.replace("{type: MostAllocated, weight: 2}", "{type: LeastAllocated, weight: 2}")
    spread = simulate(conf(least) + text, until=500)
    assert len({p["node"] for p in spread["pods"]}) == 3


def test_pod_annotation_chooses_its_own_strategy():
    gpu_nodes = node_group("g", 3, cpu="16", memory="64Gi", **{"nvidia.com/gpu": "4"})
    rsf = (
        PLAIN.replace("  - name: binpack\n", "").replace("  - name: nodeorder\n", "")
        + "  - name: resource-strategy-fit\n"
    )
    ann = {
        "volcano.sh/resource-strategy-scoring-type": "MostAllocated",
        "volcano.sh/resource-strategy-weight": '{"nvidia.com/gpu": 1}',
    }
    text = gpu_nodes + "".join(job(f"j{i}", "default", 1, gpu="1", annotations=ann) for i in range(4))
    assert len({p["node"] for p in simulate(conf(rsf) + text, until=500)["pods"]}) == 1


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


RSF_ONLY = PLAIN.replace("  - name: binpack\n", "").replace("  - name: nodeorder\n", "")


def test_sra_keeps_cpu_jobs_off_gpu_nodes():
    sra = RSF_ONLY + (
        "  - name: resource-strategy-fit\n    arguments:\n      resourceStrategyFitWeight: 0\n"
        "      sra: {enable: true, resources: nvidia.com/gpu, weight: 10, resourceWeight: {nvidia.com/gpu: 1}}\n"
    )
    # Without sra, ties go to the first node: the GPU node comes first.
    text = (
        node_group("a-gpu", 1, cpu="16", memory="64Gi", **{"nvidia.com/gpu": "4"})
        + node_group("b-cpu", 1, cpu="16", memory="64Gi")
        + job("c", "default", 2)
    )
    assert {n.split("-")[1] for n in nodes_of(simulate(conf(sra) + text, until=500), "c")} == {"cpu"}
    plain = RSF_ONLY + "  - name: resource-strategy-fit\n    arguments: {resourceStrategyFitWeight: 0}\n"
    assert {n.split("-")[1] for n in nodes_of(simulate(conf(plain) + text, until=500), "c")} == {"gpu"}


def test_proportional_keeps_cpu_for_idle_gpus():
    prop = RSF_ONLY + (
        "  - name: resource-strategy-fit\n    arguments:\n      proportional: {enable: true, resources: nvidia.com/gpu,"
        " resourceProportion: {nvidia.com/gpu.cpu: 3, nvidia.com/gpu.memory: 1}}\n"
    )
    # The only node has 4 idle GPUs: 12 of its 16 CPUs stay for GPU pods, so a 6-CPU job waits.
    text = (
        node_group("g", 1, cpu="16", memory="64Gi", **{"nvidia.com/gpu": "4"})
        + job("c", "default", 1, cpu="6")
        + job("ok", "default", 1, cpu="4")
    )
    r = simulate(conf(prop) + text, until=50)
    assert nodes_of(r, "c") == [] and nodes_of(r, "ok") == ["g-0"]
    assert "in proportion to their idle scarce resources" in reason_of(r, "c")
