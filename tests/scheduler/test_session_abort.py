"""Scheduler.run_once when an action or plugin raises: the cache is left consistent.

The session is aborted: statements not committed are discarded and pipelined or undispatched
placements undone, so the cache is as after the session's last committed statement (before the
session when nothing was committed); no PodGroup or Queue status is written; the error is counted;
the next run_once schedules as if the failed session had never happened.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lavaflow.scheduler.framework.registry import PLUGINS, Plugin
from lavaflow.scheduler.model import TaskStatus
from lavaflow.scheduler.scheduler import Scheduler
from scheduler_helpers import conf_of, make_cache, make_node, make_pg, make_pod, make_priority_class, tiers_conf


class Boom(RuntimeError):
    pass


class Raiser(Plugin):
    """Raises at the point named by ``where``; ``armed`` switches it off for the next session."""

    name = "raiser"
    armed = True
    where = "open"
    after = 1  # raise at the after-th allocate event (where="allocate"/"pipeline")

    def on_session_open(self, ssn: Any) -> None:
        cls = type(self)
        if not cls.armed:
            return
        if cls.where == "open":
            raise Boom("on_session_open")
        if cls.where == "job_order":

            def job_order(left: Any, right: Any) -> int:
                raise Boom("job order")

            ssn.add_job_order_fn(self.name, job_order)
        if cls.where in ("allocate", "pipeline"):
            seen = [0]

            def on_allocate(task: Any) -> None:
                if cls.where == "pipeline" and task.status != TaskStatus.PIPELINED:
                    return
                seen[0] += 1
                if seen[0] == cls.after:
                    raise Boom(f"allocate event {seen[0]} ({task.uid})")

            ssn.add_event_handler(on_allocate, None)
        if cls.where == "close":
            pass

    def on_session_close(self, ssn: Any) -> None:
        if type(self).armed and type(self).where == "close":
            raise Boom("on_session_close")


@pytest.fixture
def raiser():
    old = PLUGINS.get("raiser")
    PLUGINS["raiser"] = Raiser
    Raiser.armed = True
    yield Raiser
    Raiser.armed = True
    if old is None:
        PLUGINS.pop("raiser")
    else:
        PLUGINS["raiser"] = old


CONF = tiers_conf(
    ["raiser", "priority", "gang", "conformance"], ["drf", "predicates", "proportion", "nodeorder", "binpack"]
)
PREEMPT_CONF = tiers_conf(
    ["raiser", "priority", "gang", "conformance"],
    ["predicates", "nodeorder"],
    actions="enqueue, allocate, preempt",
)


def _cluster():
    """Two 4-cpu nodes, one running job using 2 cpus, two pending gangs of 2 x 2 cpu and one
    PodGroup still Pending (enqueue would admit it)."""
    nodes = [make_node("n1", cpu=4), make_node("n2", cpu=4)]
    pgs = [
        make_pg("run", 1),
        make_pg("a", 2, creation=1),
        make_pg("b", 2, creation=2),
        make_pg("wait", 1, phase="Pending", creation=3),
    ]
    pods = [
        make_pod("run-0", "run", cpu=2, node="n1", phase="Running"),
        make_pod("a-0", "a", cpu=2, role="w", index=0, creation=1),
        make_pod("a-1", "a", cpu=2, role="w", index=1, creation=1),
        make_pod("b-0", "b", cpu=2, role="w", index=0, creation=2),
        make_pod("b-1", "b", cpu=2, role="w", index=1, creation=2),
        make_pod("wait-0", "wait", cpu=1, creation=3),
    ]
    return make_cache(nodes, pgs=pgs, pods=pods)


def _preempt_cluster():
    """One 4-cpu node full of low-priority running pods, and a high-priority pod that needs half of it."""
    pcs = [make_priority_class("low", 1), make_priority_class("high", 100)]
    pgs = [make_pg("low", 1, priority_class="low"), make_pg("high", 1, priority_class="high", creation=5)]
    pods = [
        make_pod("low-0", "low", cpu=2, node="n1", phase="Running", priority_class="low"),
        make_pod("low-1", "low", cpu=2, node="n1", phase="Running", priority_class="low"),
        make_pod("high-0", "high", cpu=2, role="w", index=0, priority_class="high", creation=5),
    ]
    return make_cache([make_node("n1", cpu=4)], pgs=pgs, pods=pods, priority_classes=pcs)


def _state(cache) -> dict[str, Any]:
    n = len(cache.nodes)
    return {
        "used": cache.nodes.used[:n].copy(),
        "releasing": cache.nodes.releasing[:n].copy(),
        "pipelined": cache.nodes.pipelined[:n].copy(),
        "node_tasks": [sorted(d) for d in cache.nodes.tasks],
        "tasks": {uid: (t.status, t.node) for uid, t in sorted(cache.tasks.items())},
        "counts": {uid: list(j.counts) for uid, j in sorted(cache.jobs.items())},
        "podgroups": {uid: j.pg.status.model_dump() for uid, j in sorted(cache.jobs.items()) if j.pg is not None},
        "queues": {name: q.queue.status.model_dump() for name, q in sorted(cache.queues.items()) if q.queue},
    }


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        if isinstance(want[key], np.ndarray):
            assert np.array_equal(got[key], want[key]), key
        else:
            assert got[key] == want[key], key


def _reference_decisions(build, conf: str):
    """What one session decides on a fresh cache when nothing raises."""
    Raiser.armed = False
    cache = build()
    Scheduler(cache, conf_of(conf), reraise=False).run_once(0.0)
    Raiser.armed = True
    return cache.take_decisions()


@pytest.mark.parametrize("where", ["open", "job_order", "allocate"])
def test_a_raising_plugin_leaves_the_cache_as_before_the_session(raiser, where):
    raiser.where, raiser.after = where, 2  # allocate: the second task of the first gang
    cache = _cluster()
    before = _state(cache)
    sched = Scheduler(cache, conf_of(CONF), reraise=False)
    ssn = sched.run_once(0.0)
    assert isinstance(ssn.error, Boom)
    assert sched.failed_cycles == 1 and isinstance(sched.last_error, Boom)
    _assert_same(_state(cache), before)
    cache.check_consistency()
    d = cache.take_decisions()
    assert not d.binds and not d.evictions and not d.podgroups and not d.queues
    # The next session schedules normally, as if the failed one had never run.
    want = _reference_decisions(_cluster, CONF)
    assert want.binds  # the scenario does schedule something
    raiser.armed = False
    sched.run_once(1.0)
    got = cache.take_decisions()
    assert got.binds == want.binds
    assert [k for k, _ in got.podgroups] == [k for k, _ in want.podgroups]
    assert sched.failed_cycles == 1
    cache.check_consistency()


@pytest.mark.parametrize("hook", [False, True], ids=["decisions", "on_bind"])
def test_what_was_committed_before_the_error_stands(raiser, hook):
    # The first gang commits (its binds are handed over), the second raises on its first task.
    raiser.where, raiser.after = "allocate", 3
    cache = _cluster()
    before = _state(cache)
    handed: list[tuple[str, str]] = []
    if hook:
        cache.on_bind = lambda key, node: handed.append((key, node))
    sched = Scheduler(cache, conf_of(CONF), reraise=False)
    sched.run_once(0.0)
    assert sched.failed_cycles == 1
    after = _state(cache)
    binds = handed if hook else cache.take_decisions().binds
    assert sorted(k for k, _ in binds) == ["default/a-0", "default/a-1"]
    for key, node in binds:
        status, idx = after["tasks"][key]
        assert status == TaskStatus.BINDING and cache.nodes.names[idx] == node
    # Everything else is as before the session.
    for key in ("default/b-0", "default/b-1", "default/wait-0", "default/run-0"):
        assert after["tasks"][key] == before["tasks"][key]
    assert after["counts"]["default/b"] == before["counts"]["default/b"]
    assert np.array_equal(after["pipelined"], before["pipelined"])
    assert np.array_equal(after["releasing"], before["releasing"])
    assert after["podgroups"] == before["podgroups"]
    cache.check_consistency()


def test_an_error_at_close_keeps_the_committed_binds_and_writes_no_status(raiser):
    raiser.where = "close"
    want = _reference_decisions(_cluster, CONF)
    cache = _cluster()
    before = _state(cache)
    sched = Scheduler(cache, conf_of(CONF), reraise=False)
    sched.run_once(0.0)
    assert sched.failed_cycles == 1
    d = cache.take_decisions()
    assert d.binds == want.binds and want.podgroups
    assert not d.podgroups and not d.queues
    assert _state(cache)["podgroups"] == before["podgroups"]
    assert not cache.nodes.pipelined.any()
    cache.check_consistency()
    raiser.armed = False
    sched.run_once(1.0)
    d = cache.take_decisions()
    assert not d.binds and d.podgroups  # nothing placed twice; the statuses are written now


def test_uncommitted_evictions_are_undone(raiser):
    # Preempt evicts both low-priority pods into a statement, then raises when pipelining the preemptor.
    raiser.where, raiser.after = "pipeline", 1
    cache = _preempt_cluster()
    before = _state(cache)
    sched = Scheduler(cache, conf_of(PREEMPT_CONF), reraise=False)
    ssn = sched.run_once(0.0)
    assert isinstance(ssn.error, Boom)
    _assert_same(_state(cache), before)
    assert not cache.take_decisions().evictions
    cache.check_consistency()
    want = _reference_decisions(_preempt_cluster, PREEMPT_CONF)
    assert want.evictions  # without the error, preempt evicts
    raiser.armed = False
    sched.run_once(1.0)
    assert cache.take_decisions().evictions == want.evictions


def test_reraise_restores_then_raises(raiser):
    raiser.where, raiser.after = "allocate", 2
    cache = _cluster()
    before = _state(cache)
    sched = Scheduler(cache, conf_of(CONF), reraise=True)
    with pytest.raises(Boom):
        sched.run_once(0.0)
    _assert_same(_state(cache), before)
    assert sched.failed_cycles == 1
