"""Shared by preempt and reclaim: make room for one task on one node by evicting victims."""

from __future__ import annotations

import numpy as np

from ..api import TaskStatus
from ..resources import EPS

EVICTABLE = (TaskStatus.RUNNING, TaskStatus.BOUND)


def future_idle(ssn, node: int) -> np.ndarray:
    n = ssn.nodes
    return n.allocatable[node] - n.used[node] + n.releasing[node] - n.pipelined[node]


def fits(vec: np.ndarray, req: np.ndarray) -> bool:
    return bool(np.all(vec + EPS >= req))


def candidate_nodes(ssn, task) -> list[int]:
    """Nodes that pass the non-resource predicates, best-scored first."""
    mask = ssn.predicate_mask(task)
    cand = np.flatnonzero(mask)
    if len(cand) == 0:
        return []
    scores = ssn.node_scores(task, cand)
    order = np.lexsort((cand, -scores))
    return cand[order].tolist()


def make_room(ssn, stmt, actor, node: int, victims: list, reason: str, count_idle: bool = True) -> bool:
    """Evict victims (lowest priority first) until ``actor`` fits ``node``; pipeline it there.

    Nothing is evicted when even all the victims would not make enough room.
    With ``count_idle=False`` the victims must free the actor's whole request
    themselves (Volcano's reclaim): idle room on the node does not help a task
    whose queue (or an ancestor queue) has no room left for it.
    """
    req = actor.resreq
    freed = sum((v.resreq for v in victims), np.zeros_like(req))
    if not fits(future_idle(ssn, node) + freed, req):
        return False
    if not count_idle and not fits(freed, req):
        return False
    # Victims in reverse task/job order: the least important go first.
    ordered = sorted(
        victims,
        key=lambda v: (ssn.jobs[v.job].priority, v.priority, -(ssn.jobs[v.job].creation), v.uid),
    )
    evicted = np.zeros_like(req)
    for v in ordered:
        if fits(future_idle(ssn, node), req) and (count_idle or fits(evicted, req)):
            break
        stmt.evict(v, reason)
        evicted = evicted + v.resreq
    if not fits(future_idle(ssn, node), req) or not (count_idle or fits(evicted, req)):
        return False
    stmt.pipeline(actor, node)
    return True


def commit(ssn, stmt) -> None:
    """Commit a preemptor's statement, recording its evictions (a discarded statement evicted nothing)."""
    for op, task, extra in stmt.operations:
        if op == "evict":
            ssn.record(task.job, "evicted", f"{task.name} evicted: {extra[1]}")
    stmt.commit()
