"""The nodeorder / binpack plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

import numpy as np
import pytest

from lavaflow.scheduler.model import TaskStatus
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
