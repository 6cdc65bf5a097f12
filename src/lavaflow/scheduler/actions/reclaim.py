"""reclaim: a queue below its deserved share takes resources back from queues above theirs.

Only running tasks of other, reclaimable queues are candidates; the plugins
(proportion or capacity, gang, conformance) decide which may go. A job reclaims
for one pending task at a time while it is still starving, and its statement is
committed only if the job is then pipelined.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ..framework.registry import Action, register_action
from ..framework.statement import Statement
from ..model import Eviction, EvictionCause, TaskStatus
from ._evict import EVICTABLE, candidate_nodes, commit, make_room, may_evict_for, try_in_domains
from ._queues import OrderedQueue, starving_jobs_by_queue

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo


@register_action
class ReclaimAction(Action):
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        if not ssn.fns.get("Preemptive"):
            # No queue-share plugin (proportion, capacity) says what a queue deserves: reclaiming
            # would only move resources back and forth between queues, forever.
            return
        per_queue = starving_jobs_by_queue(ssn)
        queues = OrderedQueue(ssn.queue_key, (ssn.queues[q] for q in per_queue))
        while queues:
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = per_queue[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            if not may_evict_for(ssn, job, "reclaim"):
                queues.push(queue)
                continue
            stmt = try_in_domains(ssn, job, functools.partial(self._attempt, ssn, job, queue))
            if stmt is not None:
                commit(ssn, stmt)
                ssn.record(
                    job, "reclaim", f"reclaimed resources for queue {queue.name}; waiting for victims to terminate"
                )
            queues.push(queue)

    def _attempt(self, ssn: Session, job: JobInfo, queue: QueueInfo) -> Statement:
        stmt = Statement(ssn)
        tasks = [t for t in job.tasks.values() if t.status == TaskStatus.PENDING and not t.best_effort]
        tasks.sort(key=ssn.task_key)
        for task in tasks:
            # One task at a time, as Volcano does: a job stops reclaiming once it no longer
            # starves (gang: waiting + ready reach minAvailable, ANDed with priority's rule in
            # the first tier), so it never takes more than it needs to start.
            if not ssn.job_starving(job):
                break
            if task.preemption_policy == "Never" or not ssn.preemptive(queue, task):
                continue
            for node in candidate_nodes(ssn, task):
                cands = []
                for t in ssn.nodes.tasks[node].values():
                    if t.status not in EVICTABLE or not t.preemptable or t.best_effort:
                        continue
                    vjob = ssn.jobs.get(t.job)
                    if vjob is None or vjob.queue == queue.name:
                        continue
                    vq = ssn.queues.get(vjob.queue)
                    if vq is None or not vq.reclaimable:
                        continue
                    cands.append(t)
                if not cands:
                    continue
                victims = ssn.reclaimable(task, cands)
                if victims and make_room(
                    ssn, stmt, task, node, victims, Eviction(EvictionCause.RECLAIM, f"reclaimed by queue {queue.name}")
                ):
                    break
        return stmt
