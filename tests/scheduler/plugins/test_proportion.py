"""The proportion plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

import pytest

from lavaflow.scheduler.framework.session import PERMIT, REJECT
from lavaflow.scheduler.framework.statement import Statement
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    make_queue,
    only,
    open_session,
)


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
