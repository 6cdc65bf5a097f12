"""The gang plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

from lavaflow.scheduler.framework.session import PERMIT, REJECT
from lavaflow.scheduler.framework.statement import Statement
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
