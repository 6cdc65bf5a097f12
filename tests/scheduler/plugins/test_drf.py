"""The drf plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

import pytest

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
