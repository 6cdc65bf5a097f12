"""network-topology-aware: HyperNodes and Job/PodGroup spec.networkTopology, through the simulator."""

from __future__ import annotations

import json

import pytest

from conftest import node_group, simulate
from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.inputs import prepare

CONF = """\
actions: "enqueue, allocate, backfill"
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
  - name: binpack
  - name: network-topology-aware
"""


def conf(text: str = CONF) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "vc"},
                "data": {"volcano-scheduler.conf": text},
            }
        )
        + "\n"
    )


def hypernode(name: str, tier: int, members: list[dict]) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {"tier": tier, "members": members},
            }
        )
        + "\n"
    )


def two_racks() -> str:
    """Racks a and b (4 nodes of 4 CPU each) under one spine: s0 by regex, s1 by labels."""
    return (
        node_group("a", 4, cpu="4", memory="16Gi", labels={"rack": "a"})
        + node_group("b", 4, cpu="4", memory="16Gi", labels={"rack": "b"})
        + hypernode("s0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^a-"}}}])
        + hypernode("s1", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "b"}}}}])
        + hypernode(
            "spine",
            2,
            [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}},
            ],
        )
    )


def job(
    name: str, replicas: int, cpu: str = "4", topology: dict | None = None, submit_at: int = 0, duration: int = 100
) -> str:
    spec: dict = {
        "minAvailable": replicas,
        "schedulerName": "volcano",
        "tasks": [
            {
                "name": "w",
                "replicas": replicas,
                "template": {
                    "metadata": {"annotations": {"sim.lavaflow.io/duration": str(duration)}},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                },
            }
        ],
    }
    if topology is not None:
        spec["networkTopology"] = topology
    ann = {"sim.lavaflow.io/submit-at": str(submit_at)} if submit_at else {}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name, "annotations": ann},
                "spec": spec,
            }
        )
        + "\n"
    )


def filler(name: str, node: str, cpu: str = "4") -> str:
    """A bare pod pinned to a node, to occupy it."""
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "annotations": {"sim.lavaflow.io/duration": "1000"}},
                "spec": {
                    "schedulerName": "volcano",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                },
            }
        )
        + "\n"
    )


def nodes_of(result: dict, job_name: str) -> list[str]:
    return sorted(p["node"] for p in result["pods"] if p["job"] == job_name and p.get("node"))


def job_of(result: dict, name: str) -> dict:
    return next(j for j in result["jobs"] if j["name"] == name)


def reason_of(result: dict, name: str) -> str:
    pg = next(pg for pg in result["podGroups"] if pg["name"].startswith(name + "-"))
    return " ".join(c.get("message", "") for c in pg.get("conditions", []))


def test_hard_gang_lands_inside_one_tier1_hypernode_and_a_too_big_one_waits_with_reason():
    r = simulate(
        conf()
        + two_racks()
        + job("small", 3, topology={"mode": "hard", "highestTierAllowed": 1})
        + job("big", 6, topology={"mode": "hard", "highestTierAllowed": 1}),
        until=500,
    )
    placed = nodes_of(r, "small")
    assert len(placed) == 3 and len({n[0] for n in placed}) == 1  # all in rack a or all in rack b
    assert job_of(r, "small")["phase"] == "Completed"
    assert job_of(r, "big")["phase"] == "Pending"
    assert nodes_of(r, "big") == []
    why = reason_of(r, "big")
    assert "network topology (hard, tier ≤ 1)" in why and "HyperNode" in why


def test_hard_gang_may_span_the_spine_when_tier2_is_allowed():
    r = simulate(conf() + two_racks() + job("big", 6, topology={"mode": "hard", "highestTierAllowed": 2}), until=500)
    placed = nodes_of(r, "big")
    assert len(placed) == 6 and {n[0] for n in placed} == {"a", "b"}
    assert job_of(r, "big")["phase"] == "Completed"


def test_hard_gang_waits_for_a_rack_to_free_up_instead_of_splitting():
    # Two nodes of each rack are busy until t=1000: 8 free CPUs in total, but only 8 across two racks.
    busy = filler("f0", "a-0") + filler("f1", "a-1") + filler("f2", "b-0") + filler("f3", "b-1")
    r = simulate(
        conf() + two_racks() + busy + job("g", 3, topology={"mode": "hard", "highestTierAllowed": 1}), until=5000
    )
    placed = nodes_of(r, "g")
    assert len(placed) == 3 and len({n[0] for n in placed}) == 1
    g = job_of(r, "g")
    assert g["phase"] == "Completed" and g["startTime"] >= 1000  # waited for a whole rack rather than split


def test_soft_gang_prefers_the_lowest_tier_and_runs_anyway_when_no_hypernode_fits():
    busy = filler("f0", "a-0") + filler("f1", "a-1")
    r = simulate(
        conf()
        + two_racks()
        + busy
        + job("soft", 3, topology={"mode": "soft"})
        + job("wide", 7, cpu="2", topology={"mode": "soft", "highestTierAllowed": 1}, submit_at=10),
        until=5000,
    )
    assert [n[0] for n in nodes_of(r, "soft")] == ["b", "b", "b"]  # rack b has room for all three
    assert job_of(r, "wide")["phase"] == "Completed"


def test_without_network_topology_and_normal_pod_binpacking_off_the_plugin_changes_nothing():
    base = node_group("a", 4, cpu="4", memory="16Gi") + job("j", 3) + job("k", 2, submit_at=5)
    plain = simulate(conf(CONF.replace("  - name: network-topology-aware\n", "")) + base, until=500)
    off = CONF.replace(
        "  - name: network-topology-aware\n",
        "  - name: network-topology-aware\n    arguments: {hypernode.binpack.normal-pod.enable: false}\n",
    )
    with_plugin = simulate(
        conf(off) + base + hypernode("s0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "a-[01]"}}}]),
        until=500,
    )
    assert plain["pods"] == with_plugin["pods"]


def test_pods_without_network_topology_prefer_the_fuller_hypernode():
    # s1 = {a-2, a-3} is half used (a-3 full); node scorers alone tie a-0, a-1, a-2 and take a-0.
    text = (
        node_group("a", 4, cpu="4", memory="16Gi")
        + hypernode("s0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "a-[01]"}}}])
        + hypernode("s1", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "a-[23]"}}}])
        + filler("f", "a-3")
        + job("j", 1, cpu="1", submit_at=5)
    )
    assert nodes_of(simulate(conf() + text, until=50), "j") == ["a-2"]
    assert nodes_of(simulate(conf(CONF.replace("  - name: network-topology-aware\n", "")) + text, until=50), "j") == [
        "a-0"
    ]


def test_a_running_gang_grows_only_inside_its_hypernode():
    # Elastic job: minAvailable 2 of 4 replicas, placed in one rack; the rest must follow it there.
    doc = json.loads(job("e", 4, cpu="2", topology={"mode": "hard", "highestTierAllowed": 1}).split("\n", 1)[1])
    doc["spec"]["minAvailable"] = 2
    r = simulate(conf() + two_racks() + "---\n" + json.dumps(doc) + "\n", until=500)
    placed = nodes_of(r, "e")
    assert len(placed) == 4 and len({n[0] for n in placed}) == 1


def test_invalid_hypernode_is_refused_with_field_path():
    text = node_group("a", 1) + hypernode(
        "bad",
        1,
        [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "x"}}}, {"type": "Node", "selector": {}}],
    )
    with pytest.raises(InputError) as exc:
        prepare(load_text(text))
    lines = exc.value.problems
    assert any(
        "HyperNode/bad: spec.members[0].selector: a HyperNode member can only be selected by exactMatch" in l
        for l in lines
    )
    assert any("HyperNode/bad: spec.members[1].selector: needs exactly one of" in l for l in lines)


def test_invalid_network_topology_mode_is_refused():
    with pytest.raises(InputError) as exc:
        prepare(load_text(job("j", 1, topology={"mode": "strict"})))
    assert any("Job/j: spec.networkTopology.mode" in l for l in exc.value.problems)


def test_soft_gang_that_fits_nowhere_explains_with_the_usual_fit_error():
    # minResources fit the cluster in total (admitted), but no node has 6 CPUs.
    r = simulate(conf() + two_racks() + job("huge", 2, cpu="6", topology={"mode": "soft"}), until=50)
    assert job_of(r, "huge")["phase"] == "Pending"
    assert "Insufficient cpu" in reason_of(r, "huge")


def test_hard_gang_preempts_only_inside_one_hypernode():
    from queue_scenarios import PRIORITIES, conf as queues_conf, job as qjob

    cm = queues_conf(overcommit_factor=10)
    text_conf = (
        json.loads(cm.split("\n", 1)[1])["data"]["volcano-scheduler.conf"] + "  - name: network-topology-aware\n"
    )
    # Racks a and b of two 4-CPU nodes. "guard" (a gang of one, so never a victim) holds a-1; the
    # three pods of "elastic" (minAvailable 1) hold a-0, b-0 and b-1. Rack a can free 4 CPUs only:
    # the gang (2 × 4 CPU, tier 1) must take both of rack b's pods, not a-0's and b-0's.
    guard = qjob("guard", 1, cpu="4", prio="low", node_selector={"kubernetes.io/hostname": "a-1"})
    elastic = qjob("elastic", 3, cpu="4", min_available=1, prio="low", at=1)
    high = json.loads(job("hi", 2, topology={"mode": "hard", "highestTierAllowed": 1}, submit_at=5).split("\n", 1)[1])
    high["spec"]["priorityClassName"] = "high"
    high["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["sim.lavaflow.io/duration"] = "inf"
    racks = (
        node_group("a", 2, cpu="4", memory="16Gi")
        + node_group("b", 2, cpu="4", memory="16Gi")
        + hypernode("s0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^a-"}}}])
        + hypernode("s1", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^b-"}}}])
    )
    text = PRIORITIES + racks + guard + elastic + "---\n" + json.dumps(high) + "\n"

    def evicted_nodes(r):
        return sorted(p["node"] for p in r["pods"] if p["phase"] == "Deleted" and p.get("reason") == "Evicted")

    r = simulate(conf(text_conf) + text, until=60)
    assert evicted_nodes(r) == ["b-0", "b-1"]
    assert sorted(nodes_of(r, "hi")) == ["b-0", "b-1"]
    plain = simulate(conf(text_conf.replace("  - name: network-topology-aware\n", "")) + text, until=60)
    assert {n[0] for n in nodes_of(plain, "hi")} == {"a", "b"}  # without topology it splits the racks


def test_network_topology_example():
    from conftest import EXAMPLES

    r = simulate((EXAMPLES / "network-topology.yaml").read_text())
    racks = {name: {n.split("-")[1] for n in nodes_of(r, name)} for name in ("pretrain", "finetune", "sweep")}
    assert len(racks["pretrain"]) == 1 and len(racks["finetune"]) == 1 and racks["pretrain"] != racks["finetune"]
    assert racks["sweep"] == {"a", "b"}
    assert job_of(r, "sweep")["startTime"] >= job_of(r, "pretrain")["finishTime"]
    assert all(j["phase"] == "Completed" for j in r["jobs"])


def test_a_highest_tier_name_no_hypernode_has_is_warned_about():
    """Issue 35, item 20: it means 'every tier'; said, not silent."""
    text = two_racks() + job("g", 2, topology={"mode": "hard", "highestTierName": "rack"})
    warnings = prepare(load_text(conf() + text)).warnings
    assert [w.split(": ", 2)[-1] for w in warnings] == [
        "Job/g: spec.networkTopology.highestTierName 'rack' is the tierName of no HyperNode (tierNames: none); "
        "the job may span every tier"
    ]


def test_soft_gang_tries_every_eligible_hypernode_of_a_tier_before_spanning():
    """Issue 35, item 22: Volcano makes soft mode hard at the cluster's top tier and tries every
    eligible HyperNode of each tier (allocateForJob); lavaflow gave up after four per tier."""
    # Racks r1..r4: three 4-CPU nodes each, half used (6 CPU idle in all: eligible, but no node
    # holds a 3-CPU pod); rack r5: two empty 4-CPU nodes (the clean fit); node x (8 CPU) in no rack.
    text = ""
    racks = []
    for r in range(1, 6):
        count = 3 if r < 5 else 2
        text += node_group(f"r{r}", count, cpu="4", memory="16Gi")
        racks.append(hypernode(f"rack{r}", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^r{r}-"}}}]))
        if r < 5:
            text += "".join(filler(f"f{r}-{i}", f"r{r}-{i}", cpu="2") for i in range(count))
    text += node_group("x", 1, cpu="8", memory="32Gi") + "".join(racks)
    members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack{r}"}}} for r in range(1, 6)]
    members.append({"type": "Node", "selector": {"exactMatch": {"name": "x-0"}}})
    text += hypernode("spine", 2, members)
    # without binpack, least-requested alone would put the pods on x, outside every rack
    r = simulate(conf(CONF.replace("  - name: binpack\n", "")) + text + job("g", 2, cpu="3", topology={"mode": "soft"}))
    assert sorted(nodes_of(r, "g")) == ["r5-0", "r5-1"]
