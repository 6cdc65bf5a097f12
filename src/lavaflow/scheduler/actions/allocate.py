"""allocate: place pending tasks of admitted jobs, queue by queue, job by job, as gangs.

A job's tasks are tentatively placed in a Statement. If the job is then ready
(minAvailable tasks placed) the statement is committed and the pods bound; if it
is only pipelined (some tasks wait for resources being released) the placements
are kept for this session only; otherwise everything is discarded, so no gang is
ever partly bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.volcano import PodGroupPhase
from ..framework.node_selection import RunPlan
from ..framework.registry import Action, register_action
from ..framework.statement import Statement
from ..model import TaskStatus
from ._queues import JobQueue, OrderedQueue, job_queue

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..framework.session_plugins import Domains
    from ..model import JobInfo, QueueInfo, TaskInfo

_INQUEUE = PodGroupPhase.INQUEUE.value  # (a plain str: see model.NOT_ADMITTED)
_PENDING = TaskStatus.PENDING  # (a global: read for every task of every job tried)


@register_action
class AllocateAction(Action):
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        has_enqueue = "enqueue" in ssn.conf.action_names
        per_queue: dict[str, JobQueue] = {}
        eligible: set[str] = set()
        job_valid = ssn.job_valid
        log = ssn.log  # (ssn.record, spelled out: every job the plugins hold back is recorded)
        pending = TaskStatus.PENDING
        for job in ssn.jobs.values():
            if job.is_pending():
                if has_enqueue:
                    continue
                job.sphase = _INQUEUE
            if not job.counts[pending]:
                continue
            valid, reason = job_valid(job)
            if not valid:
                job.job_fit_errors = reason
                log.append((job.uid, "allocate", reason))
                continue
            if job.queue not in ssn.queues:
                continue
            per_queue.setdefault(job.queue, job_queue(ssn)).push(job)
            eligible.add(job.uid)
        held: list[Statement] = []
        served = self._serve_nominated(ssn, per_queue, eligible, held)
        queues = OrderedQueue(ssn.queue_key, (ssn.queues[q] for q in per_queue))
        while queues:
            queue = queues.pop()
            jobs = per_queue[queue.name]
            if not jobs:
                continue
            if ssn.overused(queue):
                why = ssn.overused_reason(queue) or (
                    f"queue {queue.name} is overused (allocation has reached its deserved share)"
                )
                for job in _drain(jobs):
                    if job.uid in served:
                        continue  # already tried first this session
                    job.job_fit_errors = why
                    ssn.record(job, "allocate", job.job_fit_errors)
                continue
            job = jobs.pop()
            if job.uid in served:
                served.discard(job.uid)  # tried first this session; a ready elastic job comes back for more
                if not ssn.job_ready(job):
                    queues.push(queue)
                    continue
            self._serve(ssn, queue, job, jobs, held)
            queues.push(queue)
        ssn.held_statements.extend(held)

    def _serve_nominated(
        self, ssn: Session, per_queue: dict[str, JobQueue], eligible: set[str], held: list[Statement]
    ) -> set[str]:
        """Preemptors whose evictions were committed go first: the room freed for them is theirs
        (kube-scheduler's nominated node), not the victims' replacements'."""
        served: set[str] = set()
        nominated = ssn.cache.nominated
        for uid in sorted(nominated):
            job = ssn.jobs.get(uid)
            if job is None or ssn.job_ready(job):
                del nominated[uid]  # gone, or started (possibly through another action)
                continue
            queue = ssn.queues[job.queue]
            if uid not in eligible or ssn.overused(queue):
                continue
            served.add(uid)
            self._serve(ssn, queue, job, per_queue[job.queue], held)
        return served

    def _serve(self, ssn: Session, queue: QueueInfo, job: JobInfo, jobs: JobQueue, held: list[Statement]) -> None:
        domains = ssn.job_domains(job)
        if domains is None:
            stmt, more = self._allocate_job(ssn, queue, job)
        else:
            stmt, more = self._allocate_in_domains(ssn, queue, job, domains)
        if ssn.job_ready(job):
            placed = len(stmt)
            stmt.commit()
            ssn.cache.nominated.pop(job.uid, None)
            if placed:
                ssn.record(
                    job, "allocate", f"bound {placed} task(s); {job.ready_num} ready, minAvailable {job.min_available}"
                )
            if more:
                jobs.push(job)  # elastic: try for more tasks after others had their turn
        elif ssn.job_pipelined(job):
            held.append(stmt)  # reservation visible only inside this session
            ssn.record(job, "allocate", "pipelined: waiting for resources that are being released")
        else:
            stmt.discard()

    def _allocate_in_domains(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domains: Domains
    ) -> tuple[Statement, bool]:
        """Place the gang inside the first node set (HyperNode) where it becomes ready or pipelined."""
        candidates, reason = domains
        for label, mask in candidates:
            ssn.node_limit = mask
            try:
                stmt, more = self._allocate_job(ssn, queue, job)
            finally:
                ssn.node_limit = None
            if ssn.job_ready(job) or ssn.job_pipelined(job):
                job.fit_errors = {}
                if label:
                    ssn.record(job, "allocate", f"placed within {label}")
                return stmt, more
            stmt.discard()
        if reason:  # otherwise (soft mode) the last, unconstrained attempt's fit errors explain it
            job.fit_errors = {}
            job.job_fit_errors = reason
            ssn.record(job, "allocate", reason)
        return Statement(ssn), False

    def _allocate_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> tuple[Statement, bool]:
        stmt = Statement(ssn)
        pending = [t for t in job.tasks.values() if t.status == _PENDING and not t.best_effort]
        pending.sort(key=ssn.task_key)
        plan: RunPlan | None = None
        for i, task in enumerate(pending):
            if not ssn.allocatable(queue, task):
                # As Volcano's allocate: a task its queue refuses is skipped and the job's
                # other tasks are still tried (a smaller one may fit the queue's room).
                ssn.record(job, "allocate", job.job_fit_errors or f"queue {queue.name} cannot take task {task.name}")
                continue
            plan = _planned(ssn, job, pending, i, plan)
            if plan is not None:
                node, fits_idle = plan.nodes[plan.used], True
                plan.used += 1
            else:
                node, fits_idle = ssn.select_node(task, future=True)
            if node < 0:
                job.fit_errors[task.uid] = ssn.fit_error(task)
                ssn.record(job, "allocate", f"{task.name}: {job.fit_errors[task.uid]}")
                if _need_continue(job):
                    continue  # other roles may still make up the gang (Volcano's NeedContinueAllocating)
                return stmt, False
            if fits_idle:
                stmt.allocate(task, node)
            else:
                stmt.pipeline(task, node)
            # A ready job gives way to others; it is pushed back for its remaining tasks.
            if ssn.job_ready(job):
                return stmt, i + 1 < len(pending)
        return stmt, False


def _planned(ssn: Session, job: JobInfo, pending: list[TaskInfo], i: int, plan: RunPlan | None) -> RunPlan | None:
    """The run plan that places ``pending[i]`` (what select_node would choose, see
    :meth:`NodeSelection.plan_run`), or None to ask select_node. A plan made for the tasks that
    follow holds while each task has the plan's score class and predicate mask and every planned
    placement was made (the loop stops at the first task placed otherwise)."""
    task = pending[i]
    sel = ssn.selection
    if plan is not None and plan.used < len(plan.nodes):
        key, apart = sel._class_key(task)
        if key == plan.key and not apart and np.array_equal(sel.predicate_mask(task), plan.mask):
            return plan
        return None
    # A new run: the tasks from here with the same requests and pod signature, as many as the
    # gang still needs (more are placed one by one after it is ready).
    need = job.min_available - job.ready_num
    if need < 2 or task.best_effort:
        return None
    req = task.resreq.tobytes()
    run = 1
    for t in pending[i + 1 : i + need]:
        if t.signature != task.signature or t.resreq.tobytes() != req:
            break
        run += 1
    if run < 2:
        return None
    return sel.plan_run(task, run)


def _need_continue(job: JobInfo) -> bool:
    """After a task found no node: can the job's pending tasks of the roles that have not failed
    yet, with what is placed or pipelined, still reach minAvailable? (Volcano's rule: a job
    whose every task is needed stops at the first failure.) Preempt and reclaim place the tasks
    that fit in the same way, so what they evict for is what allocate then binds."""
    if job.min_available == len(job.tasks):
        return False
    failed = {job.tasks[uid].role for uid in job.fit_errors if uid in job.tasks}
    left = sum(1 for t in job.tasks.values() if t.status == TaskStatus.PENDING and t.role not in failed)
    return job.waiting_num + job.ready_num + left >= job.min_available


def _drain(q: JobQueue) -> Iterator[Any]:
    while q:
        yield q.pop()
