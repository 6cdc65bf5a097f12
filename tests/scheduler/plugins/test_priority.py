"""The priority plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

from lavaflow.scheduler.framework.session import PERMIT
from scheduler_helpers import (
    PCS,
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
    run_cycle,
)


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
