"""The predicates plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

import numpy as np

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
