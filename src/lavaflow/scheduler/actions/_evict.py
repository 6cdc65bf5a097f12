"""Shared by preempt and reclaim: make room for one task on one node by evicting victims."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..model import Eviction, TaskStatus
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..framework.statement import Statement
    from ..model import JobInfo, TaskInfo

EVICTABLE = (TaskStatus.RUNNING, TaskStatus.BOUND)


def future_idle(ssn: Session, node: int) -> np.ndarray:
    n = ssn.nodes
    idle: np.ndarray = n.allocatable[node] - n.used[node] + n.releasing[node] - n.pipelined[node]
    return idle


def fits(vec: np.ndarray, req: np.ndarray) -> bool:
    return bool(np.all(vec + EPS >= req))


def candidate_nodes(ssn: Session, task: TaskInfo) -> list[int]:
    """Nodes that pass the non-resource predicates, best-scored first."""
    mask = ssn.predicate_mask(task)
    cand = np.flatnonzero(mask)
    if len(cand) == 0:
        return []
    scores = ssn.node_scores(task, cand)
    order = np.lexsort((cand, -scores))
    best: list[int] = cand[order].tolist()
    return best


def _queue_takes(ssn: Session, actor: TaskInfo) -> bool:
    """Would the actor's queue (and its ancestors) take the actor now, victims' release counted?"""
    job = ssn.jobs.get(actor.job)
    queue = ssn.queues.get(job.queue) if job is not None else None
    if job is None or queue is None:
        return True
    saved = job.job_fit_errors
    ok = ssn.allocatable(queue, actor)
    job.job_fit_errors = saved  # a tentative check, not an explanation
    return ok


def make_room(
    ssn: Session, stmt: Statement, actor: TaskInfo, node: int, victims: list[TaskInfo], reason: Eviction
) -> bool:
    """Evict victims (lowest priority first) until ``actor`` fits ``node``; pipeline it there.

    Nothing is evicted when even all the victims would not make enough room.

    The actor's queue (and, with the capacity plugin's hierarchy, its ancestors)
    must also be able to take it once the victims are gone (their release is
    deducted from the queues' allocation as they are evicted): idle room on a
    node does not help a task whose queue has no room left. Otherwise the actor
    would be pipelined, fail allocation in the next cycle, the victims'
    replacements would take the room back and the same victims would be
    evicted again, cycle after cycle (a preemption loop).
    """
    req = actor.resreq
    freed = sum((v.resreq for v in victims), np.zeros_like(req))
    if not fits(future_idle(ssn, node) + freed, req):
        return False
    # Victims in reverse task/job order: the least important go first.
    ordered = sorted(
        victims,
        key=lambda v: (ssn.jobs[v.job].priority, v.priority, -(ssn.jobs[v.job].creation), v.uid),
    )
    mark = len(stmt.operations)

    def enough() -> bool:
        return fits(future_idle(ssn, node), req) and _queue_takes(ssn, actor)

    for v in ordered:
        if enough():
            break
        stmt.evict(v, reason)
    if not enough():
        # Undo this task's evictions only; earlier tasks of the statement keep theirs.
        stmt.undo_evictions(mark)
        return False
    stmt.pipeline(actor, node)
    return True


#: A preemptor that evicted this many times without then starting evicts no more (no livelock).
MAX_FUTILE_EVICTIONS = 2


def may_evict_for(ssn: Session, job: JobInfo, action: str = "preempt") -> bool:
    """False once evicting for ``job`` has already failed to get it started MAX_FUTILE_EVICTIONS times.

    A preemptor whose earlier evictions were committed and that is again short of room
    evicted in vain: something other than the victims keeps it from starting (a predicate
    on the only node where eviction helps, its queue's limits, resources that do not add
    up on one node, ...). Evicting again would restart the victims every cycle, forever.
    """
    futile = ssn.cache.nominated.get(job.uid)
    if futile is None:
        return True
    if futile >= MAX_FUTILE_EVICTIONS:
        reason = (
            f"preemption stopped: evicting for this job {futile + 1} times did not let it start "
            f"(waiting for resources to free up)"
        )
        if not job.job_fit_errors:
            job.job_fit_errors = reason
        ssn.record(job, action, reason)
        return False
    return True


def commit(ssn: Session, stmt: Statement) -> None:
    """Commit a preemptor's statement, recording its evictions (a discarded statement evicted nothing).

    The preemptors whose tasks were pipelined onto the room the evictions free are
    nominated: the next allocate serves them before any other job (as kube-scheduler's
    nominated node), so the room goes to them and not back to the victims' replacements.
    """
    evicted = False
    for op, task, extra in stmt.operations:
        if op == "evict":
            evicted = True
            assert extra is not None
            ssn.record(task.job, "evicted", f"{task.name} evicted: {extra[1].message}")
    if evicted:
        nominated = ssn.cache.nominated
        for op, task, _extra in stmt.operations:
            if op == "pipeline" and task.job not in ssn.session_nominated:
                ssn.session_nominated.add(task.job)
                nominated[task.job] = nominated[task.job] + 1 if task.job in nominated else 0
    stmt.commit()


def try_in_domains(ssn: Session, job: JobInfo, attempt: Callable[[], Statement]) -> Statement | None:
    """Run ``attempt()`` (a new Statement of evictions and pipelines for ``job``) inside each node
    set the job may use (a HyperNode, with network topology), or once over all nodes; return the
    first statement after which the job is pipelined, discarding the others (None if none works)."""
    domains = ssn.job_domains(job, "evict")
    for _label, mask in domains[0] if domains is not None else [("", None)]:
        ssn.node_limit = mask
        try:
            stmt = attempt()
        finally:
            ssn.node_limit = None
        if ssn.job_pipelined(job):
            return stmt
        stmt.discard()
    return None
