"""resource-strategy-fit: per-resource MostAllocated / LeastAllocated scoring, a pod's own strategy,
sra (scarce resources kept for the pods that need them) and proportional, through the simulator."""

from __future__ import annotations

from plugin_helpers import queue_job as job
from test_network_topology import CONF, conf, nodes_of, reason_of

from conftest import node_group, simulate

PLAIN = CONF.replace("  - name: network-topology-aware\n", "")


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
