"""The proportion plugin: the callbacks it registers and what they decide, what it keeps across
sessions, and its water-filling on Python floats, which gives the very bits of its numpy form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import simulate
from lavaflow.scheduler.framework.session import PERMIT, REJECT
from lavaflow.scheduler.framework.statement import Statement
from lavaflow.scheduler.model import TaskStatus
from lavaflow.scheduler.plugins import proportion as P
from lavaflow.scheduler.plugins.proportion import QueueAttr, _water_fill_arrays, _water_fill_floats
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


# ---------------------------------------------------------------- kept across sessions
def test_proportion_kept_queue_attributes_follow_a_queue_change_with_the_same_jobs():
    """Proportion's queue attributes are kept while the jobs' sums, the total and the queues stand;
    a Queue whose capability or weight changes (the jobs unchanged) gets them worked out again."""
    cache = make_cache(
        [make_node("n1", cpu=8)],
        queues=[make_queue("a"), make_queue("b")],
        pgs=[make_pg("x", 1, queue="a"), make_pg("y", 1, queue="b")],
        pods=[make_pod("x0", "x", cpu=6), make_pod("y0", "y", cpu=6)],
    )
    first = open_session(cache)
    assert "proportion" in first.plugins
    assert (
        first.plugins["proportion"].attrs["a"].deserved[0] == 4.0
        and first.plugins["proportion"].attrs["a"].capability[0] == np.inf
    )
    # a Queue status write: new vectors with the same bits, the same attributes
    cache.on_queue(make_queue("a"))
    second = open_session(cache)
    assert second.jobs_token == first.jobs_token and "proportion" in second.plugins
    assert (
        second.plugins["proportion"].attrs["a"].deserved.tolist()
        == first.plugins["proportion"].attrs["a"].deserved.tolist()
    )
    cache.on_queue(make_queue("a", capability={"cpu": 2}))
    third = open_session(cache)
    assert third.jobs_token == first.jobs_token and "proportion" in third.plugins
    assert (
        third.plugins["proportion"].attrs["a"].capability[0] == 2.0
        and third.plugins["proportion"].attrs["a"].deserved[0] == 2.0
    )
    cache.on_queue(make_queue("b", weight=3))
    fourth = open_session(cache)
    assert "proportion" in fourth.plugins and fourth.plugins["proportion"].attrs["b"].weight == 3.0
    # what handlers change is each session's own
    fourth.plugins["proportion"].attrs["a"].allocated += 1.0
    assert open_session(cache).plugins["proportion"].attrs["a"].allocated[0] == 0.0  # type: ignore[attr-defined]


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


# ---------------------------------------------------------------- water-filling on floats
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# Amounts as clusters have them (whole units, fractions of a core, bytes), with the corner
# cases the rules for np.minimum / np.maximum must get right: signed zeros, infinities, NaN.
AMOUNTS = st.one_of(
    st.integers(0, 64).map(float),
    st.sampled_from([0.0, -0.0, 0.5, 0.1, 1e-9, 2.5e10, float("inf"), float("nan")]),
    st.floats(0, 1e12, allow_nan=False),
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[np.ndarray, list[dict[str, object]]]:
    width = draw(st.integers(1, 5))
    vec = st.lists(AMOUNTS, min_size=width, max_size=width).map(np.array)
    total = draw(vec)
    out = []
    for i in range(draw(st.integers(1, 4))):
        out.append(
            {
                "name": f"q{i}",
                "weight": draw(st.sampled_from([1.0, 2.0, 3.0, 0.5, 0.0, 7.0])),
                "request": draw(vec),
                "guarantee": draw(st.one_of(st.just(np.zeros(width)), vec)),
                "real_capability": draw(st.one_of(st.just(np.full(width, np.inf)), vec)),
            }
        )
    return total, out


def _attrs(spec: list[dict[str, object]]) -> list[QueueAttr]:
    out = []
    for q in spec:
        width = len(q["request"])  # type: ignore[arg-type]
        a = QueueAttr(
            name=q["name"],  # type: ignore[arg-type]
            weight=q["weight"],  # type: ignore[arg-type]
            allocated=np.zeros(width),
            request=q["request"].copy(),  # type: ignore[attr-defined]
            inqueue=np.zeros(width),
            elastic=np.zeros(width),
            guarantee=q["guarantee"].copy(),  # type: ignore[attr-defined]
            capability=np.full(width, np.inf),
        )
        a.real_capability = q["real_capability"].copy()  # type: ignore[attr-defined]
        out.append(a)
    return out


@SETTINGS
@given(queues())
def test_water_fill_on_floats_gives_the_bits_of_the_array_form(
    case: tuple[np.ndarray, list[dict[str, object]]],
) -> None:
    total, spec = case
    arrays, floats = _attrs(spec), _attrs(spec)
    with np.errstate(all="ignore"):  # (infinities times a zero weight)
        _water_fill_arrays(arrays, total.copy())
    _water_fill_floats(floats, total.copy())
    for a, f in zip(arrays, floats):
        assert f.deserved.dtype == a.deserved.dtype
        assert f.deserved.tobytes() == a.deserved.tobytes()


# ------------------------------------------------------------------ sums updated by what changed
# proportion's queue sums updated between sessions (_updated_sums) are, bit for bit, the sums worked
# out from all the jobs, and a run gives the same result either way.
REAL = P._updated_sums
CPUS = {"whole": ["1", "2", "4"], "halves": ["500m", "1500m", "250m"], "tenths": ["100m", "300m", "1"]}


def _scenario(rng_jobs: list[tuple[int, int, str, str, int, int]], queues: int) -> str:
    docs = [
        """apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {name: n}
spec: {count: 4, capacity: {cpu: "8", memory: 32Gi, pods: "110"}}"""
    ]
    for q in range(queues):
        docs.append(
            f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: q{q}}}
spec: {{weight: {q + 1}}}"""
        )
    for i, (at, q, cpu, mem, replicas, duration) in enumerate(rng_jobs):
        docs.append(
            f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: j{i}
  annotations: {{sim.lavaflow.io/submit-at: "{at}"}}
spec:
  minAvailable: {replicas}
  schedulerName: volcano
  queue: q{q % queues}
  tasks:
  - name: t
    replicas: {replicas}
    template:
      metadata: {{annotations: {{sim.lavaflow.io/duration: "{duration}"}}}}
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "{cpu}", memory: {mem}}}}}"""
        )
    return "\n---\n".join(docs) + "\n"


def _checked(monkeypatch) -> dict[str, int]:
    """Compare every updated sum with the sums from all the jobs; count how often each path ran and
    how often they differed (counted, not raised: a session's error is caught by the scheduler)."""
    seen = {"updated": 0, "full": 0, "differ": 0}
    real = REAL
    monkeypatch.setattr(P, "UPDATE_FROM", 1)  # (these scenarios are small: update from the first job)

    def checked(ssn, width):
        got = real(ssn, width)
        if got is None:
            seen["full"] += 1
            return None
        seen["updated"] += 1
        slot: dict[str, int] = {}
        names: list[str] = []
        entries = []
        for job in ssn.jobs.values():
            q = ssn.queues.get(job.queue)
            if q is None:
                continue
            if q.name not in slot:
                slot[q.name] = len(names)
                names.append(q.name)
            entries.append((slot[q.name], P.job_rows(job, width)))
        sums, counts = P._queue_sums(entries, len(names), width)
        same = got.names == names and got.counts == counts
        for mine, theirs in zip(got.sums, sums, strict=True):
            if (mine is None) != (theirs is None) or (
                mine is not None and (mine.shape != theirs.shape or mine.tobytes() != theirs.tobytes())
            ):
                same = False
        seen["differ"] += not same
        return got

    monkeypatch.setattr(P, "_updated_sums", checked)
    return seen


job = st.tuples(
    st.integers(0, 600),  # arrival
    st.integers(0, 2),  # queue
    st.integers(0, 2),  # which of the cpu amounts
    st.sampled_from(["1Gi", "2Gi", "512Mi", "3Gi"]),
    st.integers(1, 3),  # replicas
    st.integers(30, 400),  # duration
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(job, min_size=5, max_size=40), queues=st.integers(1, 3), cpus=st.sampled_from(sorted(CPUS)))
def test_updated_sums_are_the_sums_from_all_the_jobs(monkeypatch, jobs, queues, cpus):
    text = _scenario([(a, q, CPUS[cpus][k], m, r, d) for a, q, k, m, r, d in jobs], queues)
    seen = _checked(monkeypatch)  # (each example replaces what the one before set)
    fast = simulate(text)
    monkeypatch.setattr(P, "_updated_sums", lambda ssn, width: None)
    slow = simulate(text)
    assert json.dumps(fast, sort_keys=True, default=str) == json.dumps(slow, sort_keys=True, default=str)
    assert seen["differ"] == 0 and seen["updated"] + seen["full"] > 0, seen
    if cpus != "tenths" and len({a for a, *_ in jobs}) > 3:
        assert seen["updated"] > 0, seen


def test_a_stream_of_jobs_is_summed_by_what_changed(monkeypatch):
    """Whole cores and memory in bytes: every session after the first updates the kept sums."""
    jobs = [(10 * i, i % 2, "whole", "2Gi", 1 + i % 2, 60 + 7 * i) for i in range(40)]
    text = _scenario([(a, q, CPUS[c][i % 3], m, r, d) for i, (a, q, c, m, r, d) in enumerate(jobs)], 2)
    seen = _checked(monkeypatch)
    simulate(text)
    assert seen["differ"] == 0 and seen["updated"] > 10 * seen["full"], seen


def test_cpu_in_tenths_is_summed_from_all_the_jobs(monkeypatch):
    """100m is no multiple of 2**-10: its sums depend on their order, so they are worked out again."""
    jobs = [(10 * i, 0, "tenths", "1Gi", 1, 60) for i in range(20)]
    text = _scenario([(a, q, "100m", m, r, d) for a, q, _c, m, r, d in jobs], 1)
    seen = _checked(monkeypatch)
    simulate(text)
    assert seen["updated"] == 0 and seen["full"] > 0, seen


def test_exactness_of_a_vector():
    assert P._exact_vec(np.array([1.0, 0.5, 2.0**31, 0.0]))
    assert not P._exact_vec(np.array([0.1]))
    assert not P._exact_vec(np.array([-1.0]))
    assert not P._exact_vec(np.array([-0.0]))
    assert not P._exact_vec(np.array([np.inf]))
    assert not P._exact_vec(np.array([2.0**44]))
