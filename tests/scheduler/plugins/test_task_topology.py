"""task-topology: affinity / anti-affinity / order between a job's task roles, through the simulator."""

from __future__ import annotations

import json

from test_network_topology import CONF, conf

from conftest import node_group, simulate
from scheduler_helpers import make_cache, make_node, make_pg, make_pod, open_session, tiers_conf

TT_CONF = CONF.replace(
    "  - name: network-topology-aware\n", "  - name: task-topology\n    arguments: {task-topology.weight: 10}\n"
)
PLAIN_CONF = CONF.replace("  - name: network-topology-aware\n", "")


def tf_job(annotations: dict, ps: int = 2, workers: int = 4) -> str:
    def task(name: str, n: int) -> dict:
        return {
            "name": name,
            "replicas": n,
            "template": {
                "metadata": {"annotations": {"sim.lavaflow.io/duration": "100"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            },
        }

    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "tf", "annotations": annotations},
                "spec": {
                    "minAvailable": ps + workers,
                    "schedulerName": "volcano",
                    "tasks": [task("ps", ps), task("worker", workers)],
                },
            }
        )
        + "\n"
    )


def placement(result: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in result["pods"]:
        role = p["name"].split("-")[1]
        out.setdefault(role, []).append(p["node"])
    return {k: sorted(v) for k, v in out.items()}


def run(text_conf: str, annotations: dict) -> dict:
    return simulate(conf(text_conf) + node_group("n", 4, cpu="8", memory="32Gi") + tf_job(annotations), until=500)


def test_self_affinity_packs_workers_that_would_otherwise_spread():
    ann = {"volcano.sh/task-topology-affinity": "worker"}
    assert len(set(placement(run(TT_CONF, ann))["worker"])) == 1
    assert len(set(placement(run(PLAIN_CONF, ann))["worker"])) > 1  # least-requested spreads them


def test_anti_affinity_spreads_workers_and_ps_that_binpack_would_pack():
    ann = {"volcano.sh/task-topology-anti-affinity": "ps;worker"}
    binpack = "  - name: binpack\n    arguments: {binpack.weight: 10}\n"
    spread = placement(run(TT_CONF.replace("  - name: binpack\n", binpack), ann))
    assert len(set(spread["worker"])) == 4 and len(set(spread["ps"])) == 2
    packed = placement(run(PLAIN_CONF.replace("  - name: binpack\n", binpack), ann))
    assert len(set(packed["worker"])) < 4


def test_affinity_packs_workers_with_their_ps_and_ps_apart():
    ann = {
        "volcano.sh/task-topology-affinity": "ps,worker",
        "volcano.sh/task-topology-anti-affinity": "ps",
        "volcano.sh/task-topology-task-order": "ps,worker",
    }
    got = placement(run(TT_CONF, ann))
    assert len(set(got["ps"])) == 2
    assert set(got["worker"]) <= set(got["ps"])  # every worker shares a node with a ps


def test_task_order_places_the_named_roles_first_in_that_order():
    def order(annotations: dict[str, str], plugin: str = "task-topology") -> list[str]:
        pg = make_pg("tf", 3)
        pg.metadata.annotations.update(annotations)
        pods = [
            make_pod("tf-chief-0", "tf", role="chief", index=0),
            make_pod("tf-ps-0", "tf", role="ps", index=0),
            make_pod("tf-worker-0", "tf", role="worker", index=0),
        ]
        cache = make_cache([make_node("n1", 8)], pgs=[pg], pods=pods)
        ssn = open_session(cache, tiers_conf([plugin]))
        return [t.role for t in sorted(cache.jobs["default/tf"].tasks.values(), key=ssn.task_key)]

    task_order = {"volcano.sh/task-topology-task-order": "worker,ps"}
    both = {**task_order, "volcano.sh/task-topology-affinity": "worker,ps,chief"}
    assert order(both) == ["worker", "ps", "chief"]
    assert order(both, "gang") == ["chief", "ps", "worker"]
    # As in Volcano, the order applies to the tasks in buckets, i.e. roles with an affinity or an
    # anti-affinity: a task order alone changes nothing (issue 35, item 23).
    assert order(task_order) == ["chief", "ps", "worker"]


def test_unknown_role_in_annotations_is_ignored_like_volcano():
    ann = {"volcano.sh/task-topology-anti-affinity": "ps;worker;chief"}
    assert placement(run(TT_CONF, ann)) == placement(run(PLAIN_CONF, ann))


def test_the_first_task_of_a_group_goes_where_the_whole_group_fits():
    """Issue 35, item 23: Volcano scores the affinity group as a bucket (calcBucketScore: a point
    lost for each task of the bucket that does not fit the node), so the group's first task does
    not land on a node the rest cannot follow, even where binpack would put it."""
    # n-small is fuller (binpack's pick) but has room for 2 of the group's 4 one-CPU tasks;
    # n-big is empty and holds them all.
    filler = (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "filler", "annotations": {"sim.lavaflow.io/duration": "inf"}},
                "spec": {
                    "schedulerName": "volcano",
                    "nodeName": "n-small-0",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            }
        )
        + "\n"
    )
    nodes = node_group("n-big", 1, cpu="8", memory="32Gi") + node_group("n-small", 1, cpu="3", memory="32Gi")
    ann = {"volcano.sh/task-topology-affinity": "ps,worker"}
    text = nodes + filler + tf_job(ann, ps=1, workers=3).replace('"minAvailable": 4', '"minAvailable": 1')
    binpack = "  - name: binpack\n    arguments: {binpack.weight: 10}\n"

    def nodes_of(c: str) -> dict[str, str]:
        result = simulate(conf(c.replace("  - name: binpack\n", binpack)) + text, until=50)
        return {p["name"]: p["node"] for p in result["pods"] if p["name"].startswith("tf-")}

    assert nodes_of(PLAIN_CONF)["tf-ps-0"] == "n-small-0"  # binpack's pick without the plugin
    got = nodes_of(TT_CONF)
    assert got == {f"tf-{r}-{i}": "n-big-0" for r, n in (("ps", 1), ("worker", 3)) for i in range(n)}, got
