"""The rescheduling plugin (lowNodeUtilization): with the shuffle action through the simulator, and the
victims it chooses."""

from __future__ import annotations

import json

from test_network_topology import conf

from conftest import simulate
from lavaflow.scheduler.framework.session import Session
from lavaflow.scheduler.model import TaskStatus
from scheduler_helpers import PCS, conf_of, make_cache, make_node, make_pg, make_pod

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


# ---------------------------------------------------------------- the victims it chooses
# The rescheduling plugin alone, with the arguments above: thresholds cpu 30 %, targets cpu 60 %.
RESCHEDULING = 'actions: "shuffle"\ntiers:\n- plugins:\n' + SHUFFLE[SHUFFLE.index("  - name: rescheduling") :]


def _hot_and_cold():
    # "hot" runs four 2-CPU pods (100 % of its CPU, over the 60 % target); "cold" runs nothing
    # (under the 30 % threshold) and can take pods up to 60 %.
    prios = {"h1": "high", "l1": "low", "h2": "high", "l2": "low"}
    return make_cache(
        [make_node("hot", 8, "64Gi"), make_node("cold", 8, "64Gi")],
        pgs=[make_pg("j", 1)],
        pods=[make_pod(name, "j", cpu=2, node="hot", phase="Running", priority_class=pc) for name, pc in prios.items()],
        priority_classes=PCS,
    )


def _victims(cache, now: float):
    ssn = Session(cache, conf_of(RESCHEDULING), now=now)
    ssn.open()
    chosen = ssn.fns.get("VictimTasks", {}).get("rescheduling")
    if chosen is None:
        return None  # the interval has not passed: no victims asked for
    running = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.RUNNING]
    return sorted(t.name for t in chosen(running))


def test_rescheduling_takes_the_lowest_priority_pods_until_the_node_is_below_its_target():
    # 8 of 8 CPUs (100 %) -> one pod off: 6 (75 %), still over 60 % -> two off: 4 (50 %)
    assert _victims(_hot_and_cold(), now=0) == ["l1", "l2"]


def test_rescheduling_runs_again_only_once_its_interval_has_passed():
    cache = _hot_and_cold()
    assert _victims(cache, now=0) == ["l1", "l2"]
    assert _victims(cache, now=3) is None
    assert _victims(cache, now=6) == ["l1", "l2"]


def test_rescheduling_leaves_nodes_alone_without_an_underused_node_to_take_the_pods():
    cache = _hot_and_cold()
    cache.on_pod(make_pod("fill", "j", cpu=3, node="cold", phase="Running"))  # 37.5 %: not under 30 %
    assert _victims(cache, now=0) == []
