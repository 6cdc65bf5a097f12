"""The rescheduling plugin (lowNodeUtilization) with the shuffle action, through the simulator."""

from __future__ import annotations

import json

from test_network_topology import conf

from conftest import simulate

SHUFFLE = """\
actions: "enqueue, allocate, backfill, shuffle"
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
  - name: rescheduling
    arguments:
      interval: 5s
      strategies:
      - name: lowNodeUtilization
        params:
          thresholds: {cpu: 30, memory: 100, pods: 100}
          targetThresholds: {cpu: 60, memory: 100, pods: 100}
"""


def nodes(name: str, count: int, submit_at: int = 0) -> str:
    ann = {"sim.lavaflow.io/submit-at": str(submit_at)} if submit_at else {}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "sim.lavaflow.io/v1alpha1",
                "kind": "NodeGroup",
                "metadata": {"name": name, "annotations": ann},
                "spec": {"count": count, "capacity": {"cpu": "4", "memory": "16Gi"}},
            }
        )
        + "\n"
    )


def job() -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "j"},
                "spec": {
                    "minAvailable": 1,
                    "schedulerName": "volcano",
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": 4,
                            "template": {
                                "metadata": {"annotations": {"sim.lavaflow.io/duration": "1000"}},
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                            },
                        }
                    ],
                },
            }
        )
        + "\n"
    )


def final_nodes(result: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in result["pods"]:
        if p.get("node") and p.get("phase") in ("Running", "Succeeded"):
            out[p["node"]] = out.get(p["node"], 0) + 1
    return out


def test_shuffle_moves_pods_off_an_overused_node_once_underused_nodes_appear():
    text = nodes("a", 1) + nodes("b", 2, submit_at=10) + job()
    r = simulate(conf(SHUFFLE) + text, until=100)
    spread = final_nodes(r)
    assert spread.get("a-0", 0) == 2 and sum(spread.values()) == 4  # 100 % → 50 %, under the 60 % target
    without = simulate(conf(SHUFFLE.replace(", shuffle", "")) + text, until=100)
    assert final_nodes(without) == {"a-0": 4}
