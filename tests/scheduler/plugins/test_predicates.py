"""The predicates plugin: the callbacks it registers and what they decide; topology spread
constraints, host ports and volumes through the simulator."""

from __future__ import annotations

import json

import numpy as np

from conftest import node_group, simulate
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
    run_cycle,
)


def _mask(cache, pod_name):
    ssn = open_session(cache, only("predicates"))
    task = cache.tasks[f"default/{pod_name}"]
    mask, explain = fn(ssn, "Predicate", "predicates")(task)
    names = [ssn.nodes.names[i] for i in np.flatnonzero(mask)]
    return names, ssn, task, mask, explain


def _nodes3():
    return [
        make_node("n1", labels={"zone": "a", "disk": "ssd"}),
        make_node("n2", labels={"zone": "b"}),
        make_node("n3", labels={"zone": "c"}),
    ]


def test_predicates_node_selector():
    cache = make_cache(_nodes3(), pgs=[make_pg("j", 1)], pods=[make_pod("p", "j", node_selector={"disk": "ssd"})])
    names, ssn, task, mask, explain = _mask(cache, "p")
    assert names == ["n1"]
    assert explain(task, ~mask) == {"node(s) didn't match Pod's node affinity/selector": 2}
    assert "2 node(s) didn't match Pod's node affinity/selector" in ssn.fit_error(task)


def test_predicates_required_node_affinity():
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "c"]}]}]
            }
        }
    }
    cache = make_cache(_nodes3(), pgs=[make_pg("j", 1)], pods=[make_pod("p", "j", affinity=aff)])
    assert _mask(cache, "p")[0] == ["n2", "n3"]


def test_predicates_taints():
    nodes = [
        make_node("ns", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        make_node("ne", taints=[{"key": "maint", "effect": "NoExecute"}]),
        make_node("np", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
        make_node("clean"),
    ]
    tol = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    cache = make_cache(
        nodes,
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("plain", "j"),
            make_pod("tol", "j", tolerations=tol),
            make_pod("all", "j", tolerations=[{"operator": "Exists"}]),
        ],
    )
    names, ssn, task, mask, explain = _mask(cache, "plain")
    assert names == ["np", "clean"]  # PreferNoSchedule does not filter
    reasons = explain(task, ~mask)
    assert reasons == {
        "node(s) had untolerated taint {gpu: true}": 1,
        "node(s) had untolerated taint {maint: }": 1,  # kube-scheduler's wording for an empty value
    }
    assert _mask(cache, "tol")[0] == ["ns", "np", "clean"]
    assert _mask(cache, "all")[0] == ["ns", "ne", "np", "clean"]


def _term(labels, key="kubernetes.io/hostname"):
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def test_predicates_pod_affinity_by_hostname():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"})]}}
    cache = make_cache(
        _nodes3(),
        pgs=[make_pg("j", 1), make_pg("db", 1)],
        pods=[
            make_pod("db-0", "db", labels={"app": "db"}, node="n2", phase="Running"),
            make_pod("p", "j", affinity=aff),
        ],
    )
    names, ssn, task, mask, explain = _mask(cache, "p")
    assert names == ["n2"]
    assert explain(task, ~mask) == {"node(s) didn't match pod affinity rules": 2}


def test_predicates_pod_affinity_without_matching_pods():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"})]}}
    cache = make_cache(
        _nodes3(),
        pgs=[make_pg("j", 1)],
        pods=[make_pod("p", "j", affinity=aff), make_pod("self", "j", affinity=aff, labels={"app": "db"})],
    )
    assert _mask(cache, "p")[0] == []  # nothing to be near
    assert _mask(cache, "self")[0] == ["n1", "n2", "n3"]  # the first of its kind may go anywhere


def test_predicates_pod_affinity_by_zone():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"}, "zone")]}}
    nodes = [
        make_node("a1", labels={"zone": "a"}),
        make_node("a2", labels={"zone": "a"}),
        make_node("b1", labels={"zone": "b"}),
    ]
    cache = make_cache(
        nodes,
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("db-0", "j", labels={"app": "db"}, node="a1", phase="Running"),
            make_pod("p", "j", affinity=aff),
        ],
    )
    assert _mask(cache, "p")[0] == ["a1", "a2"]


def test_predicates_pod_anti_affinity():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "web"})]}}
    cache = make_cache(
        _nodes3(),
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("web-0", "j", labels={"app": "web"}, node="n1", phase="Running"),
            make_pod("web-1", "j", labels={"app": "web"}, node="n3"),  # Bound
            make_pod("p", "j", labels={"app": "web"}, affinity=anti),
        ],
    )
    names, ssn, task, mask, explain = _mask(cache, "p")
    assert names == ["n2"]
    assert explain(task, ~mask) == {"node(s) didn't match pod anti-affinity rules": 2}


def test_predicates_anti_affinity_symmetry():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "web"})]}}
    cache = make_cache(
        _nodes3(),
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("loner", "j", affinity=anti, node="n1", phase="Running"),
            make_pod("web", "j", labels={"app": "web"}),
            make_pod("other", "j", labels={"app": "db"}),
        ],
    )
    assert _mask(cache, "web")[0] == ["n2", "n3"]
    assert _mask(cache, "other")[0] == ["n1", "n2", "n3"]


def test_predicates_anti_affinity_spreads_a_gang():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "web"})]}}
    cache = make_cache(
        _nodes3(),
        pgs=[make_pg("j", 3)],
        pods=[make_pod(f"w{i}", "j", labels={"app": "web"}, affinity=anti) for i in range(3)],
    )
    _, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    assert sorted(node for _, node in d.binds) == ["n1", "n2", "n3"]
    cache2 = make_cache(
        _nodes3()[:2],
        pgs=[make_pg("j", 3)],
        pods=[make_pod(f"w{i}", "j", labels={"app": "web"}, affinity=anti) for i in range(3)],
    )
    ssn, d = run_cycle(cache2, only("gang", "predicates", "nodeorder"))
    assert d.binds == []
    assert "anti-affinity" in ssn.jobs["default/j"].condition[2]


def test_predicates_unschedulable_nodes_excluded_from_fit():
    cache = make_cache(
        [make_node("n1", unschedulable=True), make_node("n2", ready=False)],
        pgs=[make_pg("j", 1)],
        pods=[make_pod("p", "j")],
    )
    ssn, d = run_cycle(cache, only("gang", "predicates"))
    assert d.binds == []
    assert "2 node(s) were unschedulable or not ready" in ssn.jobs["default/j"].condition[2]


# ---------------------------------------------------------------- through the simulator
def pods(n: int, spread: list | None = None, host_port: int | None = None, cpu: str = "1") -> str:
    out = ""
    for i in range(n):
        c: dict = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        if host_port:
            c["ports"] = [{"containerPort": 80, "hostPort": host_port}]
        spec: dict = {"schedulerName": "volcano", "containers": [c]}
        if spread:
            spec["topologySpreadConstraints"] = spread
        out += (
            "---\n"
            + json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"p{i}",
                        "labels": {"app": "web"},
                        "annotations": {"sim.lavaflow.io/duration": "100"},
                    },
                    "spec": spec,
                }
            )
            + "\n"
        )
    return out


def zones() -> str:
    return node_group("za", 2, cpu="8", memory="32Gi", labels={"zone": "a"}) + node_group(
        "zb", 2, cpu="8", memory="32Gi", labels={"zone": "b"}
    )


def node_of(result: dict) -> dict[str, str]:
    return {p["name"]: p.get("node") for p in result["pods"]}


def test_topology_spread_keeps_zone_skew_within_max_skew():
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    got = node_of(simulate(zones() + pods(6, spread), until=50))
    per_zone = {"a": 0, "b": 0}
    for node in got.values():
        per_zone[node[1]] += 1
    assert per_zone == {"a": 3, "b": 3}
    packed = node_of(simulate(zones() + pods(6), until=50))
    assert len({n[1] for n in packed.values()}) == 1  # without the constraint binpack fills one zone


def test_topology_spread_on_hostname_and_missing_key():
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]
    got = node_of(simulate(zones() + pods(4, spread), until=50))
    assert len(set(got.values())) == 4
    nokey = [{"maxSkew": 1, "topologyKey": "rack", "labelSelector": {"matchLabels": {"app": "web"}}}]
    r = simulate(zones() + pods(1, nokey), until=50)
    assert node_of(r)["p0"] is None


def test_host_ports_conflict_on_a_node():
    r = simulate(node_group("n", 2, cpu="8", memory="32Gi") + pods(3, host_port=8080), until=50)
    got = node_of(r)
    placed = [v for v in got.values() if v]
    assert len(placed) == 2 and len(set(placed)) == 2  # one per node; the third waits
    msgs = json.dumps(r["podGroups"])
    assert "didn't have free ports for the requested pod ports" in msgs


def volume_objects(zone: str = "b") -> str:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "claimRef": {"namespace": "default", "name": "data"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"volumeName": "pv-1"},
    }
    return "---\n" + json.dumps(pv) + "\n---\n" + json.dumps(pvc) + "\n"


def pod_with_claim(name: str, claim: str) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "annotations": {"sim.lavaflow.io/duration": "100"}},
                "spec": {
                    "schedulerName": "volcano",
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
        + "\n"
    )


def test_bound_volume_node_affinity_restricts_placement():
    r = simulate(zones() + volume_objects("b") + pod_with_claim("p", "data"), until=50)
    assert node_of(r)["p"].startswith("zb-")
    assert node_of(simulate(zones() + volume_objects("a") + pod_with_claim("p", "data"), until=50))["p"].startswith(
        "za-"
    )


def test_missing_claim_keeps_the_pod_pending_with_reason():
    r = simulate(zones() + pod_with_claim("p", "nope"), until=50)
    assert node_of(r)["p"] is None
    assert 'persistentvolumeclaim \\"nope\\" not found' in json.dumps(r["podGroups"])
