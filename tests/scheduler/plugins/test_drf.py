"""The drf plugin: the callbacks it registers and what they decide; with enableHierarchy (Volcano's
HDRF) hierarchical shares, queue order and reclaim victims; with enableNamespaceOrder the share of a
queue between namespaces."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import jobs_by, namespace_job as job, quota
from test_network_topology import CONF, conf

from conftest import node_group, simulate
from lavaflow.api.volcano import Queue
from lavaflow.scheduler.framework.session import PERMIT
from lavaflow.scheduler.framework.statement import Statement
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
)


def test_drf_lower_dominant_share_first_and_updates_on_allocate():
    cache = make_cache(
        [make_node("n1", 10, "100Gi")],
        pgs=[make_pg("a", 1, creation=0), make_pg("b", 1, creation=1)],
        pods=[
            make_pod("a-0", "a", cpu=2, mem="1Gi", node="n1", phase="Running"),
            make_pod("a-1", "a", cpu=1, mem="1Gi"),
            make_pod("b-0", "b", cpu=5, mem="1Gi"),
            make_pod("b-1", "b", cpu=1, mem="50Gi"),
        ],
    )
    ssn = open_session(cache, only("drf"))
    drf = ssn.plugins["drf"]
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert drf.share["default/a"] == pytest.approx(0.2)
    assert drf.share["default/b"] == 0.0
    assert sorted([a, b], key=ssn.job_key) == [b, a]
    stmt = Statement(ssn)
    stmt.allocate(b.tasks["default/b-0"], 0)
    assert drf.share["default/b"] == pytest.approx(0.5)
    assert sorted([a, b], key=ssn.job_key) == [a, b]
    # Memory can be the dominant resource.
    stmt.allocate(b.tasks["default/b-1"], 0)
    assert drf.share["default/b"] == pytest.approx(0.6)
    stmt.discard()
    assert drf.share["default/b"] == pytest.approx(0.0)
    # Pods are not a dominant resource.
    assert drf.share["default/a"] == pytest.approx(0.2)


def test_drf_preemptable_when_preemptor_share_stays_lower():
    cache = make_cache(
        [make_node("n1", 10, "100Gi")],
        pgs=[make_pg("big", 1), make_pg("small", 1)],
        pods=[make_pod(f"big-{i}", "big", cpu=2, mem="1Gi", node="n1", phase="Running") for i in range(4)]
        + [make_pod("small-0", "small", cpu=1, mem="1Gi")],
    )
    ssn = open_session(cache, only("drf"))
    actor = ssn.jobs["default/small"].tasks["default/small-0"]
    cands = list(ssn.jobs["default/big"].tasks.values())
    victims, vote = fn(ssn, "Preemptable", "drf")(actor, cands)
    assert vote == PERMIT and len(victims) == 4  # 0.1 < 0.6


# ---------------------------------------------------------------- hierarchy (HDRF)
HDRF = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: drf
    enableHierarchy: true
"""


def hqueue(
    name: str, hierarchy: str | None = None, weights: str | None = None, weight: int = 1, parent: str | None = None
) -> Queue:
    ann = {}
    if hierarchy is not None:
        ann["volcano.sh/hierarchy"] = hierarchy
    if weights is not None:
        ann["volcano.sh/hierarchy-weights"] = weights
    spec: dict = {"weight": weight}
    if parent:
        spec["parent"] = parent
    return Queue.model_validate(
        {"metadata": {"name": name, "annotations": ann}, "spec": spec, "status": {"state": "Open"}}
    )


def running_pods(job: str, n: int, cpu=1, pending: int = 1) -> list:
    pods = [make_pod(f"{job}-{i}", job, cpu=cpu, mem="1Gi", node="n1", phase="Running") for i in range(n)]
    pods += [make_pod(f"{job}-p{i}", job, cpu=cpu, mem="1Gi") for i in range(pending)]
    return pods


# Two levels under root: sci (weight 2) holds dev (1) and prod (3); eng (1) holds web (1).
TREE = [
    hqueue("dev", "root/sci/dev", "1/2/1"),
    hqueue("prod", "root/sci/prod", "1/2/3"),
    hqueue("web", "root/eng/web", "1/1/1"),
]


def tree_session(dev=2, prod=1, web=3, web_pending=1, prod_pending=1, cpus=10):
    cache = make_cache(
        [make_node("n1", cpus, "100Gi")],
        queues=TREE,
        pgs=[make_pg("d", 1, queue="dev"), make_pg("p", 1, queue="prod"), make_pg("w", 1, queue="web")],
        pods=running_pods("d", dev)
        + running_pods("p", prod, pending=prod_pending)
        + running_pods("w", web, pending=web_pending),
    )
    return open_session(cache, HDRF)


def node(drf, *path):
    n = drf.root
    for p in path:
        n = n.children[p]
    return n


def test_hierarchical_shares_rescale_siblings_to_the_smallest_share():
    ssn = tree_session()
    drf = ssn.plugins["drf"]
    assert drf.hierarchy
    # Jobs: dev 2 cpu (0.2), prod 1 cpu (0.1), web 3 cpu (0.3) of 10 cpus; memory (1Gi per pod) is not dominant.
    assert node(drf, "sci", "dev").share == pytest.approx(0.2)
    assert node(drf, "sci", "prod").share == pytest.approx(0.1)
    # sci rescales dev to prod's 0.1: 1 cpu + 1 cpu = 0.2 of the cluster.
    assert node(drf, "sci").allocated[0] == pytest.approx(2.0)  # cpus
    assert node(drf, "sci").share == pytest.approx(0.2)
    assert node(drf, "eng").share == pytest.approx(0.3)
    assert node(drf, "sci").weight == 2 and node(drf, "sci", "prod").weight == 3
    assert not node(drf, "sci").saturated and not node(drf, "eng").saturated


def test_queue_order_by_weighted_share_level_by_level():
    ssn = tree_session()
    q = ssn.queues
    # root level: sci 0.2/2 = 0.1 < eng 0.3; within sci: prod 0.1/3 < dev 0.2.
    assert sorted([q["web"], q["dev"], q["prod"]], key=ssn.queue_key) == [q["prod"], q["dev"], q["web"]]


def test_allocation_events_update_the_tree_and_the_order():
    # 20 cpus: dev 0.1, prod 0.05 (prod asks for 9 cpus), web 0.15.
    ssn = tree_session(prod_pending=8, cpus=20)
    q = ssn.queues
    drf = ssn.plugins["drf"]
    assert sorted([q["web"], q["dev"], q["prod"]], key=ssn.queue_key) == [q["prod"], q["dev"], q["web"]]
    stmt = Statement(ssn)
    job = ssn.jobs["default/p"]
    for i in range(7):
        stmt.allocate(job.tasks[f"default/p-p{i}"], 0)
    # prod 8 cpus: 0.4/3 > dev 0.1; sci rescales prod to 0.1 -> 2 + 2 cpus = 0.2, 0.2/2 = 0.1 < eng 0.15.
    assert node(drf, "sci", "prod").share == pytest.approx(0.4)
    assert node(drf, "sci").share == pytest.approx(0.2)
    assert drf.total_allocated[0] == pytest.approx(13.0)
    assert sorted([q["web"], q["dev"], q["prod"]], key=ssn.queue_key) == [q["dev"], q["prod"], q["web"]]
    stmt.discard()
    assert node(drf, "sci").share == pytest.approx(0.1)
    assert drf.total_allocated[0] == pytest.approx(6.0)
    assert sorted([q["web"], q["dev"], q["prod"]], key=ssn.queue_key) == [q["prod"], q["dev"], q["web"]]


def test_saturated_subtree_goes_last():
    # web's job has everything it asked for: eng is saturated and goes after sci despite its lower share.
    ssn = tree_session(dev=4, prod=4, web=1, web_pending=0)
    drf = ssn.plugins["drf"]
    assert node(drf, "eng").saturated and not node(drf, "sci").saturated
    assert node(drf, "eng").share == pytest.approx(0.1)
    assert node(drf, "sci").share / 2 == pytest.approx(0.4)
    q = ssn.queues
    assert sorted([q["web"], q["dev"]], key=ssn.queue_key) == [q["dev"], q["web"]]


def test_reclaimable_only_where_the_victim_queue_stays_above():
    # 16 cpus. root/qa (1): 5 running; root/grp (4)/qb: 4 running; root/qc (1): 2 running + the reclaimer.
    queues = [hqueue("qa", "root/qa", "1/1"), hqueue("qb", "root/grp/qb", "1/4/1"), hqueue("qc", "root/qc", "1/1")]
    cache = make_cache(
        [make_node("n1", 16, "100Gi")],
        queues=queues,
        pgs=[make_pg("a", 1, queue="qa"), make_pg("b", 1, queue="qb"), make_pg("c", 1, queue="qc")],
        pods=running_pods("a", 5) + running_pods("b", 4) + running_pods("c", 2, pending=2),
    )
    ssn = open_session(cache, HDRF)
    reclaim = ssn.fns["Reclaimable"]["drf"]
    reclaimer = ssn.jobs["default/c"].tasks["default/c-p0"]
    a0, b0 = cache.tasks["default/a-0"], cache.tasks["default/b-0"]
    # qc after reclaiming: 3/16; qa without a-0: 4/16 > 3/16 -> victim; grp without b-0: (3/16)/4 -> not.
    victims, vote = reclaim(reclaimer, [a0, b0])
    assert vote == PERMIT and victims == [a0]
    # The live tree is untouched by the what-if.
    drf = ssn.plugins["drf"]
    assert node(drf, "qa").share == pytest.approx(5 / 16)
    assert node(drf, "qc").share == pytest.approx(2 / 16)
    # A reclaimer whose job would then hold all it asked for is saturated and goes last: no victims.
    last = ssn.jobs["default/c"].tasks["default/c-p1"]
    ssn.plugins["drf"].requests["default/c"] = ssn.plugins["drf"].requests["default/c"] - last.resreq
    assert reclaim(reclaimer, [a0, b0])[0] == []
    ssn.plugins["drf"].requests["default/c"] = ssn.plugins["drf"].requests["default/c"] + last.resreq
    # Equal shares are not enough: a reclaimer in qa (6/16) takes nothing from qc or grp.
    victims, _ = reclaim(ssn.jobs["default/a"].tasks["default/a-p0"], [cache.tasks["default/c-0"], b0])
    assert victims == []


def test_hierarchy_from_parent_chain_when_annotations_are_absent():
    queues = [hqueue("p", weight=3), hqueue("c1", parent="p", weight=2), hqueue("o")]
    cache = make_cache(
        [make_node("n1", 10, "100Gi")], queues=queues, pgs=[make_pg("j", 1, queue="c1")], pods=running_pods("j", 2)
    )
    drf = open_session(cache, HDRF).plugins["drf"]
    assert drf.paths["c1"] == (["root", "p", "c1"], [1.0, 3.0, 2.0])
    assert drf.paths["o"] == (["root", "o"], [1.0, 1.0])
    assert node(drf, "p", "c1").share == pytest.approx(0.2)


def test_without_hierarchy_no_queue_order_or_reclaim():
    cache = make_cache(
        [make_node("n1", 10, "100Gi")], queues=TREE, pgs=[make_pg("d", 1, queue="dev")], pods=running_pods("d", 2)
    )
    ssn = open_session(cache, HDRF.replace("enableHierarchy: true", "enableHierarchy: false"))
    assert not ssn.plugins["drf"].hierarchy
    assert "drf" not in ssn.fns.get("QueueOrder", {}) and "drf" not in ssn.fns.get("Reclaimable", {})


# ---------------------------------------------------------------- simulator
def sim_text(hierarchy: bool) -> str:
    conf = (
        "\n".join(
            [
                'actions: "enqueue, allocate, backfill, reclaim"',
                "tiers:",
                "- plugins:",
                "  - name: priority",
                "  - name: gang",
                "  - name: conformance",
                "- plugins:",
                "  - name: drf",
                f"    enableHierarchy: {'true' if hierarchy else 'false'}",
                "  - name: predicates",
                "  - name: nodeorder",
            ]
        )
        + "\n"
    )
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": conf},
        }
    ]
    for name, path, weights in (("qa", "root/a/qa", "1/1/1"), ("qb", "root/b/qb", "1/3/1")):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {
                    "name": name,
                    "annotations": {"volcano.sh/hierarchy": path, "volcano.sh/hierarchy-weights": weights},
                },
                "spec": {"weight": 1},
            }
        )
    for name, q in (("ja", "qa"), ("jb", "qb")):
        pod = {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        }
        docs.append(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "schedulerName": "volcano",
                    "minAvailable": 1,
                    "queue": q,
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": 20,
                            "template": {"metadata": {"annotations": {"sim.lavaflow.io/duration": "inf"}}, "spec": pod},
                        }
                    ],
                },
            }
        )
    return "".join("---\n" + json.dumps(d) + "\n" for d in docs) + node_group(count=4, cpu="4")


def last_queues(result: dict) -> dict[str, float]:
    return {q: v.get("cpu", 0.0) for q, v in result["timeline"][-1]["queues"].items()}


def test_simulated_subtrees_share_a_busy_cluster_by_weight():
    r = simulate(sim_text(True), until=30)
    assert {p["time"]: p["queues"] for p in r["timeline"]}[1.0] == {"qa": {"cpu": 4.0}, "qb": {"cpu": 12.0}}
    # 16 cpus, both jobs want 20: the weight-3 subtree gets three times the weight-1 one.
    assert last_queues(r) == {"qa": 4.0, "qb": 12.0}
    assert not any(p["phase"] == "Deleted" for p in r["pods"])
    # Without the hierarchy there is no queue order by share: the first queue takes everything it can.
    flat = simulate(sim_text(False), until=5)
    assert {p["time"]: p["queues"] for p in flat["timeline"]}[1.0] == {"qa": {"cpu": 16.0}}


# ---------------------------------------------------------------- namespace order
PLAIN_CONF = CONF.replace("  - name: network-topology-aware\n", "")
NS_CONF = PLAIN_CONF.replace("  - name: drf\n", "  - name: drf\n    enableNamespaceOrder: true\n")


def _first_wave(conf_text: str, extra: str = "") -> list[str]:
    # One 4-CPU node; namespace a submits four 1-CPU jobs, then namespace b four, all at t=0.
    text = node_group("n", 1, cpu="4", memory="16Gi") + extra
    text += "".join(job(f"a{i}", "a", creation=0) for i in range(4)) + "".join(job(f"b{i}", "b") for i in range(4))
    r = simulate(conf(conf_text) + text, until=1000)
    return sorted(k.split("/")[0] for k, j in jobs_by(r).items() if j["startTime"] is not None and j["startTime"] < 50)


def test_namespace_order_shares_a_queue_between_namespaces_by_weight():
    assert _first_wave(PLAIN_CONF) == ["a", "a", "a", "a"]  # job order alone: first come first served
    assert _first_wave(NS_CONF) == ["a", "a", "b", "b"]
    weighted = quota("a", {"volcano.sh/namespace.weight": "3"}, name="weight")
    assert _first_wave(NS_CONF, weighted) == ["a", "a", "a", "b"]
