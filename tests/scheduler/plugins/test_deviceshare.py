"""deviceshare: volcano.sh/gpu-memory sharing and volcano.sh/gpu-number, accounted per physical GPU."""

from __future__ import annotations

import json

from test_network_topology import CONF, conf

from conftest import node_group, simulate

DS_CONF = CONF.replace(
    "  - name: network-topology-aware\n", "  - name: deviceshare\n    arguments: {deviceshare.GPUSharingEnable: true}\n"
)
NUM_CONF = CONF.replace(
    "  - name: network-topology-aware\n", "  - name: deviceshare\n    arguments: {deviceshare.GPUNumberEnable: true}\n"
)
PLAIN = CONF.replace("  - name: network-topology-aware\n", "")


def gpu_nodes(count: int = 1) -> str:
    # 2 GPUs of 16000 (MiB) each
    return node_group(
        "g", count, cpu="32", memory="64Gi", **{"volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "32000"}
    )


def pod(name: str, res: dict, submit: int = 0) -> str:
    ann = {"sim.lavaflow.io/duration": "100"}
    if submit:
        ann["sim.lavaflow.io/submit-at"] = str(submit)
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "annotations": ann},
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "resources": {"limits": {k: str(v) for k, v in res.items()}}}],
                },
            }
        )
        + "\n"
    )


def starts(result: dict) -> dict[str, float]:
    return {p["name"]: p.get("startTime") for p in result["pods"]}


def test_shared_gpu_memory_fits_per_physical_gpu():
    # 10000 + 10000 fit in 32000 in total but not on one 16000 GPU: the second waits for its own GPU,
    # and a third (10000) waits until one of the first two finishes.
    text = (
        gpu_nodes()
        + pod("a", {"volcano.sh/gpu-memory": 10000})
        + pod("b", {"volcano.sh/gpu-memory": 10000})
        + pod("c", {"volcano.sh/gpu-memory": 10000})
    )
    s = starts(simulate(conf(DS_CONF) + text, until=1000))
    assert sorted(v >= 100 for v in s.values()) == [False, False, True]  # two at once, one GPU each
    plain = starts(simulate(conf(PLAIN) + text, until=1000))
    assert all(v < 10 for v in plain.values())  # without the plugin only the node's total counts


def test_small_requests_share_one_gpu():
    text = gpu_nodes() + "".join(pod(f"p{i}", {"volcano.sh/gpu-memory": 4000}) for i in range(8))
    s = starts(simulate(conf(DS_CONF) + text, until=1000))
    assert all(v < 10 for v in s.values())  # 4 per GPU


def test_gpu_number_needs_idle_gpus():
    both = CONF.replace(
        "  - name: network-topology-aware\n",
        "  - name: deviceshare\n    arguments: {deviceshare.GPUSharingEnable: true, deviceshare.GPUNumberEnable: true}\n",
    )
    text = (
        gpu_nodes()
        + pod("share", {"volcano.sh/gpu-memory": 1000})
        + pod("whole", {"volcano.sh/gpu-number": 2}, submit=1)
    )
    r = simulate(conf(both) + text, until=1000)
    s = starts(r)
    assert s["whole"] >= 100  # GPU 0 is partly used: only one idle GPU until "share" ends
    r50 = simulate(conf(both) + text, until=50)
    messages = [c.get("message", "") for pg in r50["podGroups"] for c in pg["conditions"]]
    assert "1/1 tasks in gang unschedulable: 0/1 nodes are available: 1 node(s) had not enough idle GPUs." in messages


def test_schedule_policy_does_not_order_nodes_for_gpu_sharing():
    """Issue 35, item 21: Volcano's gpushare device scores every node 0, so binpack and spread
    leave node order to the other plugins: placements equal those without the arguments."""

    def nodes_with(policy: str) -> dict[str, str]:
        args = "{deviceshare.GPUSharingEnable: true" + (
            f", deviceshare.SchedulePolicy: {policy}, deviceshare.ScheduleWeight: 10}}" if policy else "}"
        )
        c = CONF.replace("  - name: network-topology-aware\n", f"  - name: deviceshare\n    arguments: {args}\n")
        text = gpu_nodes(3) + "".join(pod(f"p{i}", {"volcano.sh/gpu-memory": 4000}, submit=i) for i in range(4))
        return {p["name"]: p["node"] for p in simulate(conf(c) + text, until=50)["pods"]}

    plain = nodes_with("")
    assert nodes_with("binpack") == plain and nodes_with("spread") == plain
