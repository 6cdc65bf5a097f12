"""The overcommit plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

from lavaflow.scheduler.framework.session import ABSTAIN, PERMIT, REJECT
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
)


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
