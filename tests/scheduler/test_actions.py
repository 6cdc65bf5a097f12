"""Scheduler actions (enqueue, allocate, backfill, kube-default) and PodGroup status rules."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.scheduler.actions.allocate import AllocateAction
from lavaflow.scheduler.model import JobInfo, TaskInfo, TaskStatus
from lavaflow.scheduler.scheduler import KUBE_DEFAULT_CONF, pg_status
from scheduler_helpers import (
    bound,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    make_priority_class,
    make_queue,
    open_session,
    phases,
    run_cycle,
    tiers_conf,
)

GANG = ["priority", "gang", "conformance"]
REST = ["overcommit", "drf", "predicates", "proportion", "nodeorder"]


def conf(actions: str) -> str:
    return tiers_conf(GANG, REST, actions=actions)


# ---------------------------------------------------------------------------- enqueue


def test_enqueue_admits_in_order_until_min_resources_no_longer_fit():
    cache = make_cache(
        [make_node("n1", 5, "100Gi"), make_node("n2", 5, "100Gi")],
        pgs=[
            make_pg("j0", 1, min_resources={"cpu": 5}, phase="Pending", creation=0),
            make_pg("j1", 1, min_resources={"cpu": 5}, phase="Pending", creation=1),
            make_pg("j2", 1, min_resources={"cpu": 5}, phase="Pending", creation=2),
            make_pg("hi", 1, min_resources={"cpu": 5}, phase="Pending", creation=3, priority_class="high"),
        ],
        priority_classes=[make_priority_class("high", 100)],
    )
    ssn, d = run_cycle(cache)
    ph = phases(d)
    # Priority first, then creation; 10 cpu admit two jobs of 5.
    assert ph["default/hi"] == "Inqueue"
    assert ph["default/j0"] == "Inqueue"
    assert ph.get("default/j1", "Pending") == "Pending"
    assert ph.get("default/j2", "Pending") == "Pending"
    assert ssn.enqueued == {"default/hi", "default/j0"}
    assert ssn.jobs["default/j1"].job_fit_errors
    assert ssn.jobs["default/j1"].condition[0] == "Unschedulable"


def test_enqueue_without_min_resources_admits():
    cache = make_cache(
        [make_node("n1", 1, "1Gi")],
        pgs=[make_pg(f"j{i}", 1, phase="Pending") for i in range(5)],
    )
    _, d = run_cycle(cache, conf("enqueue"))
    assert phases(d) == {f"default/j{i}": "Inqueue" for i in range(5)}


def test_enqueue_skips_closed_queue_and_round_robins_queues():
    cache = make_cache(
        [make_node("n1", 10, "100Gi")],
        queues=[make_queue("closed", state="Closed"), make_queue("a"), make_queue("b")],
        pgs=[
            make_pg("c", 1, queue="closed", phase="Pending"),
            make_pg("a1", 1, queue="a", min_resources={"cpu": 4}, phase="Pending", creation=0),
            make_pg("a2", 1, queue="a", min_resources={"cpu": 4}, phase="Pending", creation=1),
            make_pg("b1", 1, queue="b", min_resources={"cpu": 4}, phase="Pending", creation=2),
        ],
    )
    ssn, d = run_cycle(cache, tiers_conf(GANG, ["overcommit"], actions="enqueue"))
    ph = phases(d)
    assert ph.get("default/c", "Pending") == "Pending"
    assert "closed" in ssn.jobs["default/c"].job_fit_errors
    # 12 cpu admit three jobs of 4: both queues get served.
    assert ph["default/a1"] == ph["default/a2"] == ph["default/b1"] == "Inqueue"


def test_enqueue_then_allocate_in_one_cycle():
    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        pgs=[make_pg("j", 2, min_resources={"cpu": 2}, phase="Pending")],
        pods=[make_pod("a", "j"), make_pod("b", "j")],
    )
    _, d = run_cycle(cache)
    assert set(bound(d)) == {"default/a", "default/b"}
    assert phases(d)["default/j"] == "Running"


# ---------------------------------------------------------------------------- allocate


def test_allocate_gang_is_all_or_nothing():
    # 6 cpu in total (the queue deserves all of it) but only one 2-cpu pod fits per node.
    cache = make_cache(
        [make_node("n1", 3, "8Gi"), make_node("n2", 3, "8Gi")],
        pgs=[make_pg("j", 3)],
        pods=[make_pod(f"j-{i}", "j", cpu=2) for i in range(3)],
    )
    ssn, d = run_cycle(cache)
    assert d.binds == []
    job = ssn.jobs["default/j"]
    assert job.counts[TaskStatus.PENDING] == 3
    assert job.condition[2] == "1/3 tasks in gang unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    errors = list(job.fit_errors.values())
    assert errors == ["0/2 nodes are available: 2 Insufficient cpu."]
    assert not cache.nodes.view("used").any()
    assert not cache.nodes.view("pipelined").any()
    cache.check_consistency()
    assert phases(d)["default/j"] == "Inqueue"


def test_allocate_elastic_job_places_what_fits():
    cache = make_cache(
        [make_node("n1", 3, "8Gi")],
        pgs=[make_pg("j", 2)],
        pods=[make_pod(f"j-{i}", "j", cpu=1) for i in range(5)],
    )
    ssn, d = run_cycle(cache)
    assert len(d.binds) == 3
    assert phases(d)["default/j"] == "Running"
    job = ssn.jobs["default/j"]
    assert job.counts[TaskStatus.BINDING] == 3 and job.counts[TaskStatus.PENDING] == 2


def test_allocate_two_gangs_do_not_deadlock():
    # kube-default would place one pod of each and deadlock; gangs place one whole job.
    cache = make_cache(
        [make_node("n1", 2, "8Gi"), make_node("n2", 2, "8Gi")],
        pgs=[make_pg("a", 2, creation=0), make_pg("b", 2, creation=1)],
        pods=[make_pod(f"{j}-{i}", j, cpu=2) for j in "ab" for i in range(2)],
    )
    _, d = run_cycle(cache)
    assert sorted(bound(d)) == ["default/a-0", "default/a-1"]
    _, d = run_cycle(
        make_cache(
            [make_node("n1", 2, "8Gi"), make_node("n2", 2, "8Gi")],
            pgs=[make_pg("a", 2, creation=0), make_pg("b", 2, creation=1)],
            pods=[make_pod(f"{j}-{i}", j, cpu=2, creation=i) for j in "ab" for i in range(2)],
        ),
        KUBE_DEFAULT_CONF,
    )
    assert sorted(bound(d)) == ["default/a-0", "default/b-0"]


def test_allocate_pipelines_onto_releasing_resources_without_binding():
    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        pgs=[make_pg("old", 1), make_pg("new", 1)],
        pods=[
            make_pod("old-0", "old", cpu=4, node="n1", phase="Running", deleting=True),
            make_pod("new-0", "new", cpu=2),
        ],
    )
    assert cache.nodes.releasing[0, 0] == 4
    ssn = open_session(cache, conf("enqueue, allocate, backfill"))
    AllocateAction().execute(ssn)
    task = cache.tasks["default/new-0"]
    assert task.status == TaskStatus.PIPELINED and task.node == 0
    assert cache.nodes.pipelined[0, 0] == 2
    assert cache.decisions.binds == []
    ssn.close()
    assert task.status == TaskStatus.PENDING and task.node == -1
    assert not cache.nodes.view("pipelined").any()
    cache.check_consistency()
    # Through a whole cycle: nothing bound.
    _, d = run_cycle(cache)
    assert d.binds == []


def test_allocate_skips_pending_podgroups_when_enqueue_is_configured():
    def fresh():
        return make_cache(
            [make_node("n1", 4, "8Gi")],
            pgs=[make_pg("j", 1, phase="Pending")],
            pods=[make_pod("a", "j")],
        )

    # enqueue configured (after allocate): allocate leaves the Pending job alone.
    ssn, d = run_cycle(fresh(), conf("allocate, enqueue"))
    assert d.binds == []
    assert ssn.enqueued == {"default/j"}
    assert phases(d)["default/j"] == "Inqueue"
    # Without enqueue, allocate admits and places it.
    _, d = run_cycle(fresh(), conf("allocate, backfill"))
    assert bound(d) == {"default/a": "n1"}
    assert phases(d)["default/j"] == "Running"


def test_allocate_skips_invalid_jobs():
    cache = make_cache(
        [make_node("n1", 8, "8Gi")], pgs=[make_pg("j", 3)], pods=[make_pod("a", "j"), make_pod("b", "j")]
    )
    ssn, d = run_cycle(cache)
    assert d.binds == []
    assert "not enough valid tasks" in ssn.jobs["default/j"].condition[2]


def test_allocate_respects_queue_deserved_share():
    cache = make_cache(
        [make_node("n1", 4, "64Gi")],
        queues=[make_queue("a"), make_queue("b")],
        pgs=[make_pg("ja", 1, queue="a"), make_pg("jb", 1, queue="b")],
        pods=[make_pod(f"a-{i}", "ja", cpu=1, mem="1Mi") for i in range(4)]
        + [make_pod(f"b-{i}", "jb", cpu=1, mem="1Mi") for i in range(4)],
    )
    _, d = run_cycle(cache)
    placed = bound(d)
    assert sum(k.startswith("default/a-") for k in placed) == 2
    assert sum(k.startswith("default/b-") for k in placed) == 2


def test_allocate_respects_node_selector_and_reports_it():
    cache = make_cache(
        [make_node("n1", 4, "8Gi"), make_node("n2", 4, "8Gi", labels={"gpu": "yes"})],
        pgs=[make_pg("j", 1)],
        pods=[make_pod("a", "j", node_selector={"gpu": "yes"}), make_pod("b", "j", node_selector={"gpu": "no"})],
    )
    ssn, d = run_cycle(cache)
    assert bound(d) == {"default/a": "n2"}
    assert ssn.jobs["default/j"].fit_errors["default/b"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )


# ---------------------------------------------------------------------------- backfill


def test_backfill_places_best_effort_pods():
    def fresh():
        return make_cache(
            [make_node("n1", 2, "8Gi")],
            pgs=[make_pg("full", 1), make_pg("be", 1)],
            pods=[
                make_pod("full-0", "full", cpu=2, node="n1", phase="Running"),
                make_pod("be-0", "be", cpu=None, mem=None),
            ],
        )

    _, d = run_cycle(fresh(), conf("enqueue, allocate"))
    assert d.binds == []  # allocate leaves best-effort tasks to backfill
    ssn, d = run_cycle(fresh())
    assert bound(d) == {"default/be-0": "n1"}
    assert ssn.jobs["default/be"].counts[TaskStatus.BINDING] == 1


def test_backfill_needs_a_pod_slot():
    cache = make_cache(
        [make_node("n1", 2, "8Gi", pods=1)],
        pgs=[make_pg("full", 1), make_pg("be", 1)],
        pods=[
            make_pod("full-0", "full", cpu=1, node="n1", phase="Running"),
            make_pod("be-0", "be", cpu=None, mem=None),
        ],
    )
    ssn, d = run_cycle(cache)
    assert d.binds == []
    assert "Insufficient pods" in ssn.jobs["default/be"].fit_errors["default/be-0"]


def test_a_node_served_without_pod_slots_takes_no_pod_unless_it_stands_for_a_kubelet():
    """kube-scheduler and Volcano read a Node's pod slots from its allocatable: a Node the API
    server serves without ``pods`` takes none (seen beside Volcano, issue 34). The simulator's nodes
    stand for kubelets, which report 110 by default."""
    from lavaflow.scheduler.cache import DEFAULT_MAX_PODS, SchedulerCache

    def cache_with(kubelet_max_pods):
        cache = SchedulerCache(kubelet_max_pods=kubelet_max_pods)
        cache.on_node(make_node("n1", 4, "8Gi"))  # no pods in its allocatable
        cache.on_queue(make_queue("default"))
        cache.on_podgroup(make_pg("j", 1))
        cache.on_pod(make_pod("j-0", "j", cpu=1))
        return cache

    ssn, d = run_cycle(cache_with(None))  # the Kubernetes backend's cache
    assert d.binds == []
    assert "Insufficient pods" in ssn.jobs["default/j"].fit_errors["default/j-0"]
    _, d = run_cycle(cache_with(DEFAULT_MAX_PODS))  # the simulator's
    assert d.binds == [("default/j-0", "n1")]


def test_backfill_allocation_of_unready_gang_does_not_outlive_the_session():
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("j", 3)],
        pods=[make_pod("be", "j", cpu=None, mem=None), make_pod("a", "j", cpu=2), make_pod("b", "j", cpu=2)],
    )
    _, d = run_cycle(cache)
    assert d.binds == []
    task = cache.tasks["default/be"]
    assert task.status == TaskStatus.PENDING and task.node == -1
    assert not cache.nodes.view("used").any()


# ---------------------------------------------------------------------------- kube-default


def test_kube_default_places_pods_one_at_a_time_without_gang():
    cache = make_cache(
        [make_node("n1", 2, "8Gi"), make_node("n2", 2, "8Gi")],
        pgs=[make_pg("j", 3, phase="Pending")],
        pods=[make_pod(f"j-{i}", "j", cpu=2, creation=i) for i in range(3)],
    )
    ssn, d = run_cycle(cache, KUBE_DEFAULT_CONF)
    assert sorted(bound(d)) == ["default/j-0", "default/j-1"]
    assert "Insufficient cpu" in ssn.jobs["default/j"].fit_errors["default/j-2"]
    assert phases(d)["default/j"] == "Inqueue"  # 2 < minMember 3
    cache.check_consistency()


def test_kube_default_orders_by_priority_then_creation():
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("j", 1)],
        pods=[make_pod("old", "j", cpu=2, creation=0), make_pod("vip", "j", cpu=2, creation=5, priority=10)],
    )
    _, d = run_cycle(cache, KUBE_DEFAULT_CONF)
    assert d.binds == [("default/vip", "n1")]


# ---------------------------------------------------------------------------- PodGroup status


def _job(min_available: int, statuses: list[TaskStatus]) -> JobInfo:
    import numpy as np

    job = JobInfo(uid="ns/j", name="j", namespace="ns", min_available=min_available)
    for i, s in enumerate(statuses):
        job.add(
            TaskInfo(
                uid=f"ns/t{i}", name=f"t{i}", namespace="ns", job="ns/j", role="", index=i, resreq=np.zeros(3), status=s
            )
        )
    return job


R, S, P, B, F = TaskStatus.RUNNING, TaskStatus.SUCCEEDED, TaskStatus.PENDING, TaskStatus.BINDING, TaskStatus.FAILED


@pytest.mark.parametrize(
    "min_available,statuses,session_phase,expected",
    [
        (2, [R, R], "Inqueue", "Running"),
        (2, [R, B, P], "Inqueue", "Running"),  # binding counts as allocated
        (2, [R, S], "Running", "Running"),
        (2, [S, S], "Running", "Completed"),
        (1, [S, F], "Running", "Completed"),
        (3, [R, P, P], "Inqueue", "Inqueue"),
        (3, [R, P, P], "Pending", "Pending"),
        (1, [P], "Pending", "Pending"),
        # Volcano v1.16's getPodGroupPhase: a failed pod was scheduled and has ended (v1.13 sent
        # this gang back to Pending, to be admitted again)
        (1, [F], "Running", "Completed"),
        (2, [R, F], "Running", "Running"),
        (2, [F, S], "Running", "Completed"),
        (3, [R, F, P], "Inqueue", "Inqueue"),
        (3, [R, F, P], "Running", "Pending"),
    ],
)
def test_pg_status_phase_rules(min_available, statuses, session_phase, expected):
    job = _job(min_available, statuses)
    status = pg_status(job, "Pending", session_phase)
    assert status["phase"] == expected
    assert status["running"] == statuses.count(R)
    assert status["succeeded"] == statuses.count(S)
    assert status["failed"] == statuses.count(F)


def test_pg_status_unknown_when_running_gang_is_broken():
    # One task still running, the others cannot be placed: Volcano reports Unknown.
    cache = make_cache(
        [make_node("n1", 2, "8Gi")],
        pgs=[make_pg("j", 3, phase="Running")],
        pods=[
            make_pod("j-0", "j", cpu=2, node="n1", phase="Running"),
            make_pod("j-1", "j", cpu=2),
            make_pod("j-2", "j", cpu=2),
        ],
    )
    ssn, d = run_cycle(cache)
    assert d.binds == []
    assert phases(d)["default/j"] == "Unknown"


def test_pg_status_not_rewritten_when_unchanged():
    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        pgs=[make_pg("j", 1, phase="Inqueue")],
        pods=[make_pod("a", "j")],
    )
    from lavaflow.api.volcano import PodGroup

    _, d = run_cycle(cache)
    assert phases(d)["default/j"] == "Running"
    # The backend binds and starts the pod; the next cycle updates the running count.
    cache.on_pod(make_pod("a", "j", node="n1", phase="Running"))
    _, d = run_cycle(cache)
    status = dict(d.podgroups)["default/j"]
    assert status["phase"] == "Running" and status["running"] == 1
    # Once that status is applied, nothing more is written.
    pg = cache.jobs["default/j"].pg.model_copy(deep=True)
    pg.status = PodGroup.model_validate({"status": status}).status
    cache.on_podgroup(pg)
    _, d = run_cycle(cache)
    assert "default/j" not in phases(d)
    cache.check_consistency()


def test_queue_status_allocated_written():
    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        queues=[make_queue("default"), make_queue("q")],
        pgs=[make_pg("j", 1, queue="q")],
        pods=[make_pod("a", "j", cpu=2, mem="1Gi")],
    )
    _, d = run_cycle(cache)
    qs = dict(d.queues)
    assert qs["q"]["allocated"]["cpu"] == "2"
    assert qs["q"]["allocated"]["pods"] == "1"


# ---------------------------------------------------------------------------- whole cycles (property)

JOBS = st.lists(
    st.tuples(
        st.integers(1, 4),  # replicas
        st.integers(1, 4),  # minMember (clamped to replicas)
        st.sampled_from([1, 2, 3]),  # cpu per pod
        st.sampled_from(["q1", "q2"]),
        st.sampled_from(["Pending", "Inqueue"]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=JOBS, node_cpus=st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=3))
def test_cycles_keep_invariants(jobs, node_cpus):
    nodes = [make_node(f"n{i}", c, "64Gi") for i, c in enumerate(node_cpus)]
    pgs, pods = [], []
    for j, (replicas, min_member, cpu, queue, phase) in enumerate(jobs):
        pgs.append(make_pg(f"j{j}", min(min_member, replicas), queue=queue, phase=phase, creation=j))
        pods += [make_pod(f"j{j}-{i}", f"j{j}", cpu=cpu, mem="1Gi", creation=j) for i in range(replicas)]
    cache = make_cache(nodes, queues=[make_queue("q1"), make_queue("q2", weight=2)], pgs=pgs, pods=pods)
    by_key = {p.key: p for p in pods}
    for _ in range(3):
        ssn, d = run_cycle(cache)
        cache.check_consistency()
        n = len(cache.nodes)
        assert (cache.nodes.used[:n] <= cache.nodes.allocatable[:n] + 1e-6).all()
        assert not cache.nodes.view("pipelined").any()
        for job in cache.jobs.values():
            assert job.counts[TaskStatus.ALLOCATED] == 0 and job.counts[TaskStatus.PIPELINED] == 0
            newly = sum(1 for k, _ in d.binds if k in job.tasks)
            if newly:
                # Gangs are bound whole: together with what already runs, at least minMember.
                assert job.count([TaskStatus.BINDING, TaskStatus.RUNNING]) >= job.min_available
        # The backend applies the decisions: pods start, PodGroup phases are written.
        for key, node in d.binds:
            p = by_key[key]
            group = p.metadata.annotations["scheduling.k8s.io/group-name"]
            cpu = p.spec.containers[0].resources.requests["cpu"]
            by_key[key] = make_pod(p.name, group, cpu=cpu, mem="1Gi", node=node, phase="Running")
            cache.on_pod(by_key[key])
        for key, status in d.podgroups:
            job = cache.jobs[key]
            pg = job.pg.model_copy(deep=True)
            pg.status.phase = status["phase"]
            cache.on_podgroup(pg)
        cache.check_consistency()


def test_queue_allocation_is_written_until_the_queue_shows_it_then_left_alone():
    from lavaflow.scheduler.scheduler import Scheduler
    from scheduler_helpers import conf_of, make_cache, make_node, make_pg, make_pod, make_queue

    q = make_queue("default")
    q.metadata.resource_version = "1"
    running = make_pod("p", group="g", cpu=1, node="n1", phase="Running")
    cache = make_cache([make_node("n1", 4)], queues=[q], pgs=[make_pg("g", phase="Running")], pods=[running])
    sched = Scheduler(cache, conf_of(None))
    sched.run_once(0.0)
    written = cache.take_decisions().queues
    assert [(name, status["allocated"]["cpu"]) for name, status in written] == [("default", "1")]
    sched.run_once(1.0)  # the write was lost: the queue still shows nothing, so it is written again
    assert cache.take_decisions().queues == written
    q.status.allocated = written[0][1]["allocated"]  # the write lands: a new version
    q.metadata.resource_version = "2"
    cache.on_queue(q)
    sched.run_once(2.0)
    sched.run_once(3.0)
    assert cache.take_decisions().queues == []
