"""preempt: a starving job takes room from lower-priority jobs of the same queue.

Phase 1 evicts tasks of other jobs in the preemptor's queue; the job's statement
is committed only if the job is then pipelined (it can run once the victims are
gone), otherwise nothing is evicted. Phase 2 lets a job's higher-priority tasks
displace its own lower-priority tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..framework.registry import Action, register_action
from ..framework.statement import Statement
from ..model import Eviction, EvictionCause, TaskStatus
from ._evict import EVICTABLE, candidate_nodes, commit, make_room, may_evict_for, try_in_domains
from ._queues import starving_jobs_by_queue

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, TaskInfo


def _lower_in_job(task: TaskInfo, victim: TaskInfo) -> bool:
    """Victims of a task inside its own job: its lower-priority tasks."""
    return victim.job == task.job and victim.priority < task.priority


def _pending(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    tasks = [t for t in job.tasks.values() if t.status == TaskStatus.PENDING and not t.best_effort]
    tasks.sort(key=ssn.task_key)
    return tasks


@register_action
class PreemptAction(Action):
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        per_queue = starving_jobs_by_queue(ssn)
        for qname in sorted(per_queue, key=lambda q: ssn.queue_key(ssn.queues[q])):
            jobs = per_queue[qname]
            while jobs:
                job = jobs.pop()
                if not may_evict_for(ssn, job):
                    continue

                def attempt(job: JobInfo = job) -> Statement:
                    stmt = Statement(ssn)
                    for task in _pending(ssn, job):
                        if not ssn.job_starving(job):
                            break
                        self._preempt(ssn, stmt, task, functools.partial(self._same_queue, ssn, job))
                    return stmt

                stmt = try_in_domains(ssn, job, attempt)
                if stmt is not None:
                    commit(ssn, stmt)
                    ssn.record(job, "preempt", "preempted lower-priority tasks; waiting for them to terminate")
        # Phase 2: within a job, higher-priority tasks displace lower-priority ones.
        for job in sorted(ssn.jobs.values(), key=ssn.job_key):
            if job.is_pending() or not job.counts[TaskStatus.PENDING] or not ssn.job_starving(job):
                continue
            if not may_evict_for(ssn, job):
                continue
            for task in _pending(ssn, job):
                stmt = Statement(ssn)
                if self._preempt(ssn, stmt, task, functools.partial(_lower_in_job, task)):
                    commit(ssn, stmt)
                else:
                    stmt.discard()

    @staticmethod
    def _same_queue(ssn: Session, job: JobInfo, victim: TaskInfo) -> bool:
        vjob = ssn.jobs.get(victim.job)
        return vjob is not None and vjob.queue == job.queue and victim.job != job.uid

    def _preempt(self, ssn: Session, stmt: Statement, task: TaskInfo, accept: Callable[[TaskInfo], bool]) -> bool:
        for node in candidate_nodes(ssn, task):
            cands = [
                t
                for t in ssn.nodes.tasks[node].values()
                if t.status in EVICTABLE and t.preemptable and not t.best_effort and t.job in ssn.jobs and accept(t)
            ]
            if not cands:
                continue
            victims = ssn.preemptable(task, cands)
            if not victims:
                continue
            if make_room(
                ssn,
                stmt,
                task,
                node,
                victims,
                Eviction(EvictionCause.PREEMPT, f"preempted by {task.namespace}/{task.name}"),
            ):
                return True
        return False
