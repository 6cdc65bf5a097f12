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
    return [int(cand[i]) for i in order]


def make_room(ssn, stmt, actor, node: int, victims: list, reason: str) -> bool:
    """Evict victims (lowest priority first) until ``actor`` fits ``node``; pipeline it there.

    Nothing is evicted when even all the victims would not make enough room.
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
    for v in ordered:
        if fits(future_idle(ssn, node), req):
            break
        stmt.evict(v, reason)
        ssn.record(v.job, "evicted", f"{v.name} evicted: {reason}")
    if not fits(future_idle(ssn, node), req):
        return False
    stmt.pipeline(actor, node)
    return True
