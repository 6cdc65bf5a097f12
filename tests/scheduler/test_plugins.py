"""Scheduler plugins: the callbacks each registers and what they decide."""

from __future__ import annotations

import numpy as np
import pytest

from lavaflow.scheduler.framework.session import ABSTAIN, PERMIT, REJECT
from lavaflow.scheduler.framework.statement import Statement
from lavaflow.scheduler.model import TaskStatus
from scheduler_helpers import (
    make_cache,
    make_node,
    make_pg,
    make_pod,
    make_priority_class,
    make_queue,
    open_session,
    run_cycle,
    tiers_conf,
)


def fn(ssn, point, plugin):
    return ssn.fns[point][plugin]


def only(*plugins, actions="enqueue, allocate, backfill"):
    return tiers_conf(list(plugins), actions=actions)


PCS = [make_priority_class("high", 100), make_priority_class("low", 1)]

# ---------------------------------------------------------------------------- priority


def _prio_cache():
    return make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("hi", 1, priority_class="high"), make_pg("lo", 1, priority_class="low"), make_pg("mid", 1)],
        pods=[
            make_pod("hi-0", "hi", priority_class="high"),
            make_pod("hi-1", "hi", priority_class="low", node="n1", phase="Running"),
            make_pod("lo-0", "lo", priority_class="low", node="n1", phase="Running"),
            make_pod("mid-0", "mid", node="n1", phase="Running"),
        ],
        priority_classes=PCS,
    )


def test_priority_orders_tasks_and_jobs():
    ssn = open_session(_prio_cache(), only("priority"))
    hi, lo, mid = (ssn.jobs[f"default/{n}"] for n in ("hi", "lo", "mid"))
    assert sorted([lo, mid, hi], key=ssn.job_key) == [hi, lo, mid]
    order = fn(ssn, "JobOrder", "priority")
    assert order(hi, lo) == -1 and order(lo, hi) == 1 and order(hi, hi) == 0
    t_hi, t_lo = hi.tasks["default/hi-0"], hi.tasks["default/hi-1"]
    assert ssn.task_order(t_hi, t_lo) == -1
    assert fn(ssn, "TaskOrder", "priority")(t_lo, t_hi) == 1


def test_priority_preemptable_only_lower_priority():
    ssn = open_session(_prio_cache(), only("priority"))
    hi, lo, mid = (ssn.jobs[f"default/{n}"] for n in ("hi", "lo", "mid"))
    preemptor = hi.tasks["default/hi-0"]
    cands = [lo.tasks["default/lo-0"], mid.tasks["default/mid-0"], hi.tasks["default/hi-1"]]
    victims, vote = fn(ssn, "Preemptable", "priority")(preemptor, cands)
    assert vote == PERMIT
    # lo (1) and mid (0) jobs are lower; hi-1 is the same job with a lower task priority.
    assert {t.name for t in victims} == {"lo-0", "mid-0", "hi-1"}
    # A low-priority job cannot preempt a higher or equal one.
    low_task = lo.tasks["default/lo-0"]
    victims, _ = fn(ssn, "Preemptable", "priority")(low_task, [hi.tasks["default/hi-1"], mid.tasks["default/mid-0"]])
    assert [t.name for t in victims] == ["mid-0"]
    # Same job, same task priority: not a victim.
    victims, _ = fn(ssn, "Preemptable", "priority")(hi.tasks["default/hi-1"], [hi.tasks["default/hi-1"]])
    assert victims == []


def test_priority_job_starving():
    ssn = open_session(_prio_cache(), only("priority"))
    starving = fn(ssn, "JobStarving", "priority")
    assert starving(ssn.jobs["default/hi"])  # 1 of 2 tasks running
    assert not starving(ssn.jobs["default/lo"])


def test_priority_schedules_high_priority_job_first():
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("lo", 1, priority_class="low", creation=0), make_pg("hi", 1, priority_class="high", creation=5)],
        pods=[make_pod("lo-0", "lo", cpu=2), make_pod("hi-0", "hi", cpu=2)],
        priority_classes=PCS,
    )
    _, d = run_cycle(cache, only("priority", "gang", "predicates"))
    assert d.binds == [("default/hi-0", "n1")]


# ---------------------------------------------------------------------------- gang


def test_gang_job_valid_counts_valid_tasks_and_task_minimums():
    cache = make_cache(
        [make_node("n1")],
        pgs=[
            make_pg("short", 3),
            make_pg("ok", 2),
            make_pg("roles", 3, min_task_member={"ps": 1, "worker": 2}),
            make_pg("loose", 2, min_task_member={"ps": 1, "worker": 2}),
            make_pg("failed", 2),
        ],
        pods=[
            make_pod("s-0", "short"),
            make_pod("s-1", "short"),
            make_pod("o-0", "ok"),
            make_pod("o-1", "ok"),
            make_pod("r-0", "roles", role="ps"),
            make_pod("r-1", "roles", role="worker"),
            make_pod("r-2", "roles", role="ps"),
            make_pod("l-0", "loose", role="ps"),
            make_pod("l-1", "loose", role="ps"),
            make_pod("f-0", "failed"),
            make_pod("f-1", "failed", node="n1", phase="Failed"),
        ],
    )
    ssn = open_session(cache, only("gang"))
    valid = fn(ssn, "JobValid", "gang")
    ok, reason = valid(ssn.jobs["default/short"])
    assert not ok and "2 valid, 3 minAvailable" in reason
    assert valid(ssn.jobs["default/ok"]) == (True, "")
    ok, reason = valid(ssn.jobs["default/roles"])
    assert not ok and "task worker" in reason and "1 valid, 2 required" in reason
    # minAvailable below the sum of the task minimums: Volcano skips the per-task check.
    assert valid(ssn.jobs["default/loose"]) == (True, "")
    ok, _ = valid(ssn.jobs["default/failed"])
    assert not ok
    assert ssn.job_valid(ssn.jobs["default/short"])[0] is False


def test_gang_ready_and_pipelined():
    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("j", 2, min_task_member={"w": 2})],
        pods=[make_pod("a", "j", role="w"), make_pod("b", "j", role="w"), make_pod("c", "j", role="m")],
    )
    ssn = open_session(cache, only("gang"))
    job = ssn.jobs["default/j"]
    a, b, c = (job.tasks[f"default/{x}"] for x in "abc")
    ready, pipelined = fn(ssn, "JobReady", "gang"), fn(ssn, "JobPipelined", "gang")
    assert not ready(job) and pipelined(job) == REJECT
    stmt = Statement(ssn)
    stmt.allocate(a, 0)
    stmt.allocate(c, 0)
    # minAvailable reached but the task minimum of "w" is not.
    assert job.is_ready() and not ready(job)
    assert pipelined(job) == REJECT
    stmt.pipeline(b, 0)
    assert not ready(job)
    assert pipelined(job) == PERMIT
    stmt.discard()
    stmt.allocate(a, 0)
    stmt.allocate(b, 0)
    assert ready(job) and pipelined(job) == PERMIT
    assert not fn(ssn, "JobStarving", "gang")(job)
    stmt.discard()
    assert fn(ssn, "JobStarving", "gang")(job)


def test_gang_job_order_puts_unready_first():
    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("ready", 1, creation=0), make_pg("waiting", 1, creation=9)],
        pods=[make_pod("r", "ready", node="n1", phase="Running"), make_pod("r2", "ready"), make_pod("w", "waiting")],
    )
    ssn = open_session(cache, only("gang"))
    r, w = ssn.jobs["default/ready"], ssn.jobs["default/waiting"]
    assert sorted([r, w], key=ssn.job_key) == [w, r]


def test_gang_job_order_completes_a_started_gang_before_starting_another():
    """Two gangs part bound (one pod each, as a leader that died mid-gang leaves them) and one
    admitted but not started, on room for only two of them: the default configuration completes
    the started gangs; starting the third first (drf's order, share 0) would strand one of them."""
    nodes = [make_node(f"n{i}", 2, "8Gi") for i in range(5)]
    pgs = [make_pg(g, 4, min_resources={"cpu": "4"}, creation=i) for i, g in enumerate(("g0", "g1", "g2"))]
    pods = [
        make_pod(f"{g}-{i}", g, node="n0" if (g, i) == ("g0", 0) else "n2" if (g, i) == ("g2", 0) else None)
        for g in ("g0", "g1", "g2")
        for i in range(4)
    ]
    cache = make_cache(nodes, pgs=pgs, pods=pods)
    ssn = open_session(cache, only("gang"))
    g0, g1, g2 = (ssn.jobs[f"default/{g}"] for g in ("g0", "g1", "g2"))
    order = fn(ssn, "JobOrder", "gang")
    assert order(g0, g1) == -1 and order(g1, g2) == 1 and order(g0, g2) == 0
    _, d = run_cycle(cache)
    bound = {g: sum(1 for key, _ in d.binds if key.startswith(f"default/{g}-")) for g in ("g0", "g1", "g2")}
    assert bound == {"g0": 3, "g1": 0, "g2": 3}


def test_gang_victims_keep_min_available():
    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("big", 2), make_pg("exact", 2), make_pg("p", 1)],
        pods=[make_pod(f"big-{i}", "big", node="n1", phase="Running") for i in range(4)]
        + [make_pod(f"exact-{i}", "exact", node="n1", phase="Running") for i in range(2)]
        + [make_pod("p-0", "p")],
    )
    ssn = open_session(cache, only("gang"))
    actor = ssn.jobs["default/p"].tasks["default/p-0"]
    cands = [t for n in ("big", "exact") for t in ssn.jobs[f"default/{n}"].tasks.values()]
    for point in ("Preemptable", "Reclaimable"):
        victims, vote = fn(ssn, point, "gang")(actor, cands)
        assert vote == PERMIT
        assert len(victims) == 2 and all(t.job == "default/big" for t in victims)


def test_gang_condition_at_close():
    cache = make_cache(
        [make_node("n1", 2, "8Gi"), make_node("n2", 2, "8Gi")],
        pgs=[make_pg("j", 3), make_pg("fits", 1)],
        pods=[make_pod(f"j-{i}", "j", cpu=2) for i in range(3)] + [make_pod("f-0", "fits", cpu=1)],
    )
    ssn, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    job = ssn.jobs["default/j"]
    assert job.condition[0] == "Unschedulable" and job.condition[1] == "NotEnoughResources"
    msg = job.condition[2]
    # "fits" went first (uid order) and took half a node; one task of j was tentatively placed
    # before the statement was discarded, so two were missing (Volcano counts pending tasks whose
    # last transaction was an allocation as schedulable).
    assert d.binds == [("default/f-0", d.binds[0][1])]
    assert msg.startswith("2/3 tasks in gang unschedulable: 0/2 nodes are available")
    assert "Insufficient cpu" in msg
    status = dict(d.podgroups)["default/j"]
    cond = [c for c in status["conditions"] if c["type"] == "Unschedulable"][0]
    assert cond["message"] == msg
    fits = ssn.jobs["default/fits"]
    assert fits.condition[0] == "Scheduled"


def test_gang_condition_counts_unready_tasks():
    # 2 of 4 fit, minAvailable 3: one task short.
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("j", 3)],
        pods=[make_pod(f"j-{i}", "j", cpu=1) for i in range(4)],
    )
    ssn, d = run_cycle(cache, only("gang", "predicates"))
    assert d.binds == []
    assert ssn.jobs["default/j"].condition[2].startswith("1/4 tasks in gang unschedulable: ")
    # Nothing fits at all: the whole minimum is missing.
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("j", 3)],
        pods=[make_pod(f"j-{i}", "j", cpu=4) for i in range(4)],
    )
    ssn, d = run_cycle(cache, only("gang", "predicates"))
    assert ssn.jobs["default/j"].condition[2] == (
        "3/4 tasks in gang unschedulable: 0/1 nodes are available: 1 Insufficient cpu."
    )


# ---------------------------------------------------------------------------- conformance


def test_conformance_protects_system_pods():
    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("sys", 1, namespace="kube-system"), make_pg("app", 1), make_pg("p", 1)],
        pods=[
            make_pod("s", "sys", namespace="kube-system", node="n1", phase="Running"),
            make_pod("c1", "app", priority_class="system-cluster-critical", node="n1", phase="Running"),
            make_pod("c2", "app", priority_class="system-node-critical", node="n1", phase="Running"),
            make_pod("plain", "app", node="n1", phase="Running"),
            make_pod("p-0", "p"),
        ],
    )
    ssn = open_session(cache, only("conformance"))
    actor = ssn.jobs["default/p"].tasks["default/p-0"]
    cands = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.RUNNING]
    assert len(cands) == 4
    for point in ("Preemptable", "Reclaimable"):
        victims, vote = fn(ssn, point, "conformance")(actor, cands)
        assert vote == PERMIT and [t.name for t in victims] == ["plain"]


# ---------------------------------------------------------------------------- overcommit


def _oc_cache(*extra_pgs, extra_pods=()):
    return make_cache(
        [make_node("n1", 5, "100Gi"), make_node("n2", 5, "100Gi")],
        pgs=[
            make_pg("c12", 1, min_resources={"cpu": 12}, phase="Pending"),
            make_pg("c13", 1, min_resources={"cpu": 13}, phase="Pending"),
            make_pg("c15", 1, min_resources={"cpu": 15}, phase="Pending"),
            make_pg("c4", 1, min_resources={"cpu": 4}, phase="Pending"),
            make_pg("c5", 1, min_resources={"cpu": 5}, phase="Pending"),
            make_pg("nomin", 1, phase="Pending"),
            *extra_pgs,
        ],
        pods=list(extra_pods),
    )


def test_overcommit_default_factor():
    ssn = open_session(_oc_cache(), only("overcommit"))
    enq = fn(ssn, "JobEnqueueable", "overcommit")
    assert enq(ssn.jobs["default/c12"]) == PERMIT  # 10 cpu × 1.2
    job = ssn.jobs["default/c13"]
    assert enq(job) == REJECT
    assert "overcommit factor 1.2" in job.job_fit_errors
    assert enq(ssn.jobs["default/nomin"]) == ABSTAIN


def test_overcommit_factor_argument():
    text = (
        'actions: "enqueue"\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: 1.5\n'
    )
    ssn = open_session(_oc_cache(), text)
    enq = fn(ssn, "JobEnqueueable", "overcommit")
    assert enq(ssn.jobs["default/c15"]) == PERMIT
    assert enq(ssn.jobs["default/c13"]) == PERMIT
    # Enqueued jobs count against the rest.
    fn(ssn, "JobEnqueued", "overcommit")(ssn.jobs["default/c12"])
    assert enq(ssn.jobs["default/c4"]) == REJECT  # 12 + 4 > 15
    # A factor below 1 falls back to the default.
    ssn = open_session(_oc_cache(), text.replace("1.5", "0.5"))
    assert fn(ssn, "JobEnqueueable", "overcommit")(ssn.jobs["default/c13"]) == REJECT
    assert fn(ssn, "JobEnqueueable", "overcommit")(ssn.jobs["default/c12"]) == PERMIT


def test_overcommit_counts_inqueue_min_resources():
    ssn = open_session(_oc_cache(make_pg("adm", 1, min_resources={"cpu": 8}, phase="Inqueue")), only("overcommit"))
    enq = fn(ssn, "JobEnqueueable", "overcommit")
    assert enq(ssn.jobs["default/c5"]) == REJECT  # 8 + 5 > 12
    assert enq(ssn.jobs["default/c4"]) == PERMIT  # 8 + 4 = 12


def test_overcommit_counts_unallocated_part_of_running_podgroups():
    # A running driver (2 cpu) whose PodGroup was admitted for 8 cpu: 6 more stay reserved.
    running = make_pg("spark", 1, min_resources={"cpu": 8}, phase="Running")
    driver = make_pod("driver", "spark", cpu=2, node="n1", phase="Running")
    ssn = open_session(_oc_cache(running, extra_pods=[driver]), only("overcommit"))
    enq = fn(ssn, "JobEnqueueable", "overcommit")
    # limit = 12 - used 2 = 10; reserved 6.
    assert enq(ssn.jobs["default/c5"]) == REJECT
    assert enq(ssn.jobs["default/c4"]) == PERMIT


def test_overcommit_ignores_running_podgroups_below_min_member():
    running = make_pg("spark", 2, min_resources={"cpu": 8}, phase="Running")
    driver = make_pod("driver", "spark", cpu=2, node="n1", phase="Running")
    ssn = open_session(_oc_cache(running, extra_pods=[driver]), only("overcommit"))
    # Only the used 2 cpu count: 12 - 2 = 10 >= 5.
    assert fn(ssn, "JobEnqueueable", "overcommit")(ssn.jobs["default/c5"]) == PERMIT


# ---------------------------------------------------------------------------- drf


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


# ---------------------------------------------------------------------------- predicates


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


# ---------------------------------------------------------------------------- proportion


def _prop_cache(queues, demands, nodes=None, running=()):
    """demands: queue -> list of pending cpu requests (one job per queue)."""
    pgs, pods = [], []
    for q, cpus in demands.items():
        pgs.append(make_pg(f"job-{q}", 1, queue=q))
        for i, c in enumerate(cpus):
            pods.append(make_pod(f"{q}-{i}", f"job-{q}", cpu=c, mem="1Mi"))
    for q, c, node in running:
        pods.append(make_pod(f"{q}-run-{node}-{c}", f"job-{q}", cpu=c, mem="1Mi", node=node, phase="Running"))
    return make_cache(nodes or [make_node("n1", 8, "64Gi")], queues=queues, pgs=pgs, pods=pods)


def _deserved(ssn, q):
    return ssn.plugins["proportion"].attrs[q].deserved[0]


def test_proportion_water_fills_by_weight():
    cache = _prop_cache([make_queue("q1", weight=1), make_queue("q3", weight=3)], {"q1": [8], "q3": [8]})
    ssn = open_session(cache, only("proportion"))
    assert _deserved(ssn, "q1") == pytest.approx(2)
    assert _deserved(ssn, "q3") == pytest.approx(6)


def test_proportion_keeps_deserved_shares_only_for_the_same_inputs():
    from lavaflow.scheduler.plugins import proportion

    cache = _prop_cache([make_queue("q1", weight=1), make_queue("q3", weight=3)], {"q1": [8], "q3": [8]})
    calls = []
    real = proportion.water_fill
    proportion.water_fill = lambda attrs, total: (calls.append(1), real(attrs, total))[1]
    try:
        first = open_session(cache, only("proportion"))
        again = open_session(cache, only("proportion"))  # nothing changed: the kept shares
        assert len(calls) == 1
        assert _deserved(again, "q1") == _deserved(first, "q1") and _deserved(again, "q3") == _deserved(first, "q3")
        again.plugins["proportion"].attrs["q1"].deserved[0] = -1.0  # a session's copy, not the kept one
        cache.queues["q1"].weight = 3  # a weight changed: worked out again
        third = open_session(cache, only("proportion"))
        assert len(calls) == 2
        assert _deserved(third, "q1") == pytest.approx(4) and _deserved(third, "q3") == pytest.approx(4)
    finally:
        proportion.water_fill = real


def test_proportion_capability_caps_deserved():
    cache = _prop_cache(
        [make_queue("q1", weight=3, capability={"cpu": 1}), make_queue("q2", weight=1)], {"q1": [8], "q2": [8]}
    )
    ssn = open_session(cache, only("proportion"))
    assert _deserved(ssn, "q1") == pytest.approx(1)
    assert _deserved(ssn, "q2") == pytest.approx(7)


def test_proportion_request_caps_deserved():
    cache = _prop_cache([make_queue("q1", weight=1), make_queue("q2", weight=1)], {"q1": [1], "q2": [8, 8]})
    ssn = open_session(cache, only("proportion"))
    assert _deserved(ssn, "q1") == pytest.approx(1)
    assert _deserved(ssn, "q2") == pytest.approx(7)


def test_proportion_guarantee_floor():
    cache = _prop_cache(
        [make_queue("q1", weight=1, guarantee={"cpu": 6}), make_queue("q2", weight=1)], {"q1": [8], "q2": [8]}
    )
    ssn = open_session(cache, only("proportion"))
    assert _deserved(ssn, "q1") == pytest.approx(6)
    assert _deserved(ssn, "q2") == pytest.approx(2)  # realCapability = total - others' guarantee
    attrs = ssn.plugins["proportion"].attrs
    assert attrs["q2"].real_capability[0] == pytest.approx(2)
    assert attrs["q1"].real_capability[0] == pytest.approx(8)


def test_proportion_overused_and_allocatable():
    cache = _prop_cache(
        [make_queue("q1", weight=1), make_queue("q2", weight=1)],
        {"q1": [1], "q2": [2, 2]},
        running=[("q1", 4, "n1")],
    )
    ssn = open_session(cache, only("proportion"))
    q1, q2 = ssn.queues["q1"], ssn.queues["q2"]
    # q1 requests 5 (4 running + 1), q2 4: 9 > 8, so the weights split cpu evenly.
    d1, d2 = _deserved(ssn, "q1"), _deserved(ssn, "q2")
    assert d1 + d2 == pytest.approx(8)
    assert d1 == pytest.approx(4) and d2 == pytest.approx(4)
    assert fn(ssn, "Overused", "proportion")(q1) is False  # memory/pods not yet at deserved
    t1 = ssn.jobs["default/job-q1"].tasks["default/q1-0"]
    assert fn(ssn, "Allocatable", "proportion")(q1, t1) is False  # 4 + 1 > 4
    assert "would exceed its deserved share" in ssn.jobs["default/job-q1"].job_fit_errors
    t2 = ssn.jobs["default/job-q2"].tasks["default/q2-0"]
    assert fn(ssn, "Allocatable", "proportion")(q2, t2) is True
    stmt = Statement(ssn)
    stmt.allocate(t2, 0)
    stmt.allocate(ssn.jobs["default/job-q2"].tasks["default/q2-1"], 0)
    assert ssn.plugins["proportion"].attrs["q2"].allocated[0] == 4
    assert fn(ssn, "Overused", "proportion")(q2) is True  # every resource at its deserved share
    assert ssn.overused(q2)
    stmt.discard()
    assert fn(ssn, "Overused", "proportion")(q2) is False


def test_proportion_queue_order_priority_then_share():
    cache = _prop_cache(
        [make_queue("q1"), make_queue("q2"), make_queue("vip", priority=10)],
        {"q1": [4], "q2": [4], "vip": [4]},
        running=[("q1", 2, "n1")],
        nodes=[make_node("n1", 16, "64Gi")],
    )
    ssn = open_session(cache, only("proportion"))
    order = sorted(ssn.queues.values(), key=ssn.queue_key)
    names = [q.name for q in order if q.name != "default"]
    assert names == ["vip", "q2", "q1"]


def _enq_cache(state="Open"):
    return make_cache(
        [make_node("n1", 16, "64Gi")],
        queues=[make_queue("q", capability={"cpu": 4}, state=state), make_queue("other")],
        pgs=[
            make_pg("adm", 1, queue="q", min_resources={"cpu": 3}, phase="Inqueue"),
            make_pg("two", 1, queue="q", min_resources={"cpu": 2}, phase="Pending"),
            make_pg("one", 1, queue="q", min_resources={"cpu": 1}, phase="Pending"),
            make_pg("none", 1, queue="q", phase="Pending"),
        ],
        pods=[make_pod("adm-0", "adm", cpu=1, mem="1Mi")],
    )


def test_proportion_enqueueable_against_real_capability():
    ssn = open_session(_enq_cache(), only("proportion"))
    enq = fn(ssn, "JobEnqueueable", "proportion")
    two = ssn.jobs["default/two"]
    assert enq(two) == REJECT  # 3 admitted + 2 > 4
    assert "cannot admit" in two.job_fit_errors
    assert enq(ssn.jobs["default/one"]) == PERMIT
    fn(ssn, "JobEnqueued", "proportion")(ssn.jobs["default/one"])
    assert enq(ssn.jobs["default/one"]) == REJECT  # now full
    assert enq(ssn.jobs["default/none"]) == PERMIT


def test_proportion_closed_queue_rejects():
    ssn = open_session(_enq_cache(state="Closed"), only("proportion"))
    job = ssn.jobs["default/one"]
    assert fn(ssn, "JobEnqueueable", "proportion")(job) == REJECT
    assert "closed" in job.job_fit_errors


# ---------------------------------------------------------------------------- nodeorder / binpack


def _scoring_cache(pods=()):
    return make_cache(
        [make_node("empty", 8, "16Gi"), make_node("half", 8, "16Gi", labels={"zone": "b"})],
        pgs=[make_pg("bg", 1), make_pg("j", 1)],
        pods=[make_pod("bg-0", "bg", cpu=4, mem="8Gi", node="half", phase="Running"), *pods],
    )


def test_nodeorder_least_requested_prefers_emptier_node():
    cache = _scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    ssn = open_session(cache, only("predicates", "nodeorder"))
    scores = fn(ssn, "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert scores[0] > scores[1]
    _, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    assert d.binds == [("default/p", "empty")]


def test_nodeorder_preferred_node_affinity():
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}
            ]
        }
    }
    cache = _scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi", affinity=pref)])
    _, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    assert d.binds == [("default/p", "half")]


def test_nodeorder_prefer_no_schedule_taint():
    cache = make_cache(
        [make_node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), make_node("clean")],
        pgs=[make_pg("j", 1)],
        pods=[make_pod("p", "j")],
    )
    ssn = open_session(cache, only("nodeorder"))
    scores = fn(ssn, "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] > scores[0]


def test_nodeorder_sees_a_prefer_no_schedule_taint_added_between_sessions():
    # whether any node has such a taint is kept across sessions, under the nodes' version
    cache = make_cache([make_node("a"), make_node("b")], pgs=[make_pg("j", 1)], pods=[make_pod("p", "j")])
    first = fn(open_session(cache, only("nodeorder")), "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert first[0] == first[1]
    cache.on_node(make_node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}]))
    then = fn(open_session(cache, only("nodeorder")), "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert then[1] > then[0]


def test_binpack_prefers_fuller_node():
    cache = _scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    ssn = open_session(cache, only("predicates", "binpack"))
    scores = fn(ssn, "NodeOrder", "binpack")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] > scores[0]
    # half: cpu (4+1)/8, memory (8+1)/16 → mean × 100
    assert scores[1] == pytest.approx(((5 / 8) + (9 / 16)) / 2 * 100)
    _, d = run_cycle(cache, only("gang", "predicates", "binpack"))
    assert d.binds == [("default/p", "half")]


def test_binpack_weight_argument():
    cache = _scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.weight: 3\n      binpack.memory: 0\n'
    ssn = open_session(cache, text)
    scores = fn(ssn, "NodeOrder", "binpack")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] == pytest.approx(5 / 8 * 100 * 3)


def test_default_conf_packs_with_binpack_and_spreads_without():
    cache = _scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    _, d = run_cycle(cache)  # shipped default includes binpack
    assert d.binds[0][0] == "default/p"


def test_job_vectors_keep_their_identity_while_their_bits_stay_the_same():
    """A job's allocation and pending vectors, its admission reservation and its proportion rows
    are worked out again after every change of the job, but keep the very array (and rows) they
    replace when the bits are the same, so that sums kept under their identities still hold; a
    change of value gives new ones."""
    from lavaflow.scheduler.plugins._shares import reserved_or_none
    from lavaflow.scheduler.plugins.proportion import job_rows

    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("a", 1)],
        pods=[
            make_pod("a-0", "a", cpu=1, mem="1Gi", node="n1", phase="Running"),
            make_pod("a-1", "a", cpu=2, mem="1Gi"),
        ],
    )
    job = cache.jobs["default/a"]
    job.sphase = "Running"
    width = len(cache.index)
    held, pending = job.allocated_view(width), job.pending_view(width)
    rows = job_rows(job, width)
    left = reserved_or_none(job, width)
    running = job.tasks["default/a-0"]
    job.set_status(running, TaskStatus.BINDING)  # still allocated: the same sums
    job.set_status(running, TaskStatus.RUNNING)
    assert job.allocated_view(width) is held and job.pending_view(width) is pending
    assert job_rows(job, width) is rows and reserved_or_none(job, width) is left
    waiting = job.tasks["default/a-1"]
    job.set_status(waiting, TaskStatus.ALLOCATED)  # the sums change
    assert job.allocated_view(width) is not held
    assert job.allocated_view(width)[0] == pytest.approx(held[0] + 2)
    assert job.pending_view(width) is not pending and job.pending_view(width)[0] == 0.0
    assert job_rows(job, width) is not rows
    assert not job.allocated_view(width).flags.writeable
