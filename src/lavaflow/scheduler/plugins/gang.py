"""gang: a job runs only when at least minAvailable of its tasks (and each task's
minimum) can run together; writes the PodGroup's Scheduled/Unschedulable condition."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..framework.memo import JobRecord, Kept
from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT, REJECT
from ..model import READY, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, TaskInfo

NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
SCHEDULED_REASON = "tasks in gang are ready to be scheduled"
_SCHEDULED = ("Scheduled", SCHEDULED_REASON, "")
# Task statuses read per task, per session, as globals (a member read off its class costs more).
_ALLOCATED = TaskStatus.ALLOCATED
_NOT_VALID = (TaskStatus.FAILED, TaskStatus.RELEASING, TaskStatus.UNKNOWN)


@dataclass(slots=True)
class GangBasis:
    """What the gang's answers for a job are made of: its tasks (``tasks_version``), minMember and
    the per-task minimums (a copy: the job's dict is compared, not trusted)."""

    tasks_version: int
    min_available: int
    min_task_member: dict[str, int]


def _gang_basis(job: JobInfo) -> GangBasis:
    return GangBasis(job.tasks_version, job.min_available, dict(job.min_task_member))


def _still_holds(job: JobInfo, kept: Kept[Any]) -> bool:
    """Whether ``kept``, an answer kept at an earlier version of ``job``, still holds: its
    :class:`GangBasis` is the job's (a PodGroup status write, its counters and conditions, moves
    the version and leaves the gang as it was). It is then re-stamped under the job's version."""
    b: GangBasis = kept.basis
    if (
        b.tasks_version == job.tasks_version
        and b.min_available == job.min_available
        and b.min_task_member == job.min_task_member
    ):
        JobRecord.restamp(kept, job.version)
        return True
    return False


@dataclass(slots=True)
class MinimumsMet:
    """:func:`task_minimums_met`'s answer for the statuses it counted as placed."""

    statuses: frozenset[TaskStatus]
    met: bool


@dataclass(slots=True)
class Unschedulable:
    """What the gang wrote on a waiting job at session close: its job-level error and condition."""

    job_fit_errors: str
    condition: tuple[str, str, str] | None


# Kept under the job's version, re-stamped while the GangBasis holds.
TASK_MINIMUMS_MET: JobRecord[MinimumsMet] = JobRecord("task_minimums_met")
GANG_VALID: JobRecord[tuple[bool, str]] = JobRecord("gang_valid")
# Kept under (tasks_version, minMember, the job-level error before the gang explained it).
GANG_UNSCHEDULABLE: JobRecord[Unschedulable] = JobRecord("gang_unschedulable")


def task_minimums_apply(job: JobInfo) -> bool:
    """Volcano's CheckTaskValid/Ready/Pipelined skip the per-task minimums when the job's
    minAvailable is less than the sum of its tasks' minAvailable (e.g. with dependsOn)."""
    return bool(job.min_task_member) and job.min_available >= sum(job.min_task_member.values())


def task_minimums_met(job: JobInfo, statuses: frozenset[TaskStatus] = READY) -> bool:
    """Every task (role) has its minimum placed; as in Volcano's CheckTaskReady/Pipelined, a
    pending best-effort pod counts as placed: it needs no room, and backfill places it."""
    # The answer only changes with the job's tasks or gang: kept under its version and gang key.
    kept: Kept[MinimumsMet] | None = job.memo.get(TASK_MINIMUMS_MET.name)
    if kept is not None and kept.value.statuses is statuses and (kept.key == job.version or _still_holds(job, kept)):
        return kept.value.met
    if not task_minimums_apply(job):
        TASK_MINIMUMS_MET.put(job, job.version, MinimumsMet(statuses, True), _gang_basis(job))
        return True
    counts: dict[str, int] = {}
    for t in job.tasks.values():
        if t.status in statuses or (t.best_effort and t.status == TaskStatus.PENDING):
            counts[t.role] = counts.get(t.role, 0) + 1
    met = all(counts.get(role, 0) >= m for role, m in job.min_task_member.items() if m > 0)
    TASK_MINIMUMS_MET.put(job, job.version, MinimumsMet(statuses, met), _gang_basis(job))
    return met


def _releasing_placed(job: JobInfo) -> bool:
    """Whether ``job``'s scheduled tasks (allocated, on a node or ended) and its Releasing tasks
    that were on a node make its minMember."""
    releasing = sum(1 for t in job.tasks.values() if t.status == TaskStatus.RELEASING and t.node >= 0)
    return releasing > 0 and job.scheduled_num + releasing >= job.min_available


def job_fit_error(job: JobInfo) -> str:
    """The most useful single explanation of why a job is not running."""
    if job.fit_errors:
        # Tasks of one role usually fail alike; report the distinct messages.
        seen: list[str] = []
        for msg in job.fit_errors.values():
            if msg not in seen:
                seen.append(msg)
        return " ".join(seen[:3])
    if job.job_fit_errors:
        return job.job_fit_errors
    c = job.counts
    parts = []
    for status in (
        TaskStatus.PENDING,
        TaskStatus.PIPELINED,
        TaskStatus.RELEASING,
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
    ):
        if c[status]:
            parts.append(f"{c[status]} {status.name.capitalize()}")
    parts.append(f"{job.min_available} minAvailable")
    return "pod group is not ready, " + ", ".join(parts)


@register_plugin
class GangPlugin(Plugin):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        def job_valid(job: JobInfo) -> tuple[bool, str]:
            # A function of the job's tasks and gang alone, asked every session for every job
            # with pending tasks: kept under its version and gang key.
            kept: Kept[tuple[bool, str]] | None = job.memo.get(GANG_VALID.name)
            if kept is not None and (kept.key == job.version or _still_holds(job, kept)):
                return kept.value
            return GANG_VALID.put(job, job.version, _job_valid(job), _gang_basis(job))

        def _job_valid(job: JobInfo) -> tuple[bool, str]:
            valid = job.valid_task_num()
            if valid < job.min_available:
                return False, (
                    f"not enough valid tasks for gang scheduling: {valid} valid, {job.min_available} minAvailable"
                )
            if task_minimums_apply(job):
                counts: dict[str, int] = {}
                for t in job.tasks.values():
                    if t.status not in _NOT_VALID:
                        counts[t.role] = counts.get(t.role, 0) + 1
                for role, m in sorted(job.min_task_member.items()):
                    if counts.get(role, 0) < m:
                        return False, f"not enough valid pods of task {role}: {counts.get(role, 0)} valid, {m} required"
            return True, ""

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lr, rr = l.is_ready(), r.is_ready()
            if lr != rr:
                return 1 if lr else -1
            if lr:
                return 0
            # Of two gangs not ready, one that already holds part of its room (pods bound by a
            # leader that died mid-gang, or a gang that lost members) goes first: completing it
            # frees the cluster of a half-placed gang, while a gang not yet started that took the
            # room first could leave the other holding its part for as long as both wait.
            ls, rs = l.allocated_num > 0, r.allocated_num > 0
            if ls == rs:
                return 0
            return -1 if ls else 1

        def job_ready(job: JobInfo) -> bool:
            return job.is_ready() and task_minimums_met(job)

        def job_pipelined(job: JobInfo) -> int:
            ok = job.is_pipelined() and task_minimums_met(job, READY | {TaskStatus.PIPELINED})
            return PERMIT if ok else REJECT

        def job_starving(job: JobInfo) -> bool:
            return job.is_starving()

        def victims(actor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            occupied: dict[str, int] = {}
            out = []
            for t in candidates:
                job = ssn.jobs.get(t.job)
                if job is None:
                    continue
                if t.job not in occupied:
                    occupied[t.job] = job.ready_num
                if occupied[t.job] > job.min_available:
                    occupied[t.job] -= 1
                    out.append(t)
            return out, PERMIT

        ssn.add_job_valid_fn(self.name, job_valid)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_ready_fn(self.name, job_ready)
        ssn.add_job_pipelined_fn(self.name, job_pipelined)
        ssn.add_job_starving_fn(self.name, job_starving)
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)

        # Tasks allocated at some point this session (Volcano's LastTransaction): a gang whose
        # statement was discarded still counts them as schedulable in its condition message.
        self.tentative: set[str] = set()

        def on_allocate(task: TaskInfo) -> None:
            if task.status == _ALLOCATED:
                self.tentative.add(task.uid)

        ssn.add_event_handler(on_allocate, None)

    def on_session_close(self, ssn: Session) -> None:
        tentative = getattr(self, "tentative", ())
        for job in ssn.jobs.values():
            if job.is_ready() and task_minimums_met(job):
                job.condition = _SCHEDULED
                continue
            c = job.counts
            if (
                not c[TaskStatus.PENDING]
                and not job.job_fit_errors
                and (
                    not job.tasks
                    or (c[TaskStatus.RELEASING] and not c[TaskStatus.PIPELINED] and _releasing_placed(job))
                )
            ):
                # No pods yet, or a gang whose placed pods are being deleted and were enough (Volcano's
                # shouldSkipUnschedulableForReleasing): nothing to explain. A gang short of its
                # minimum with nothing pending (a pod failed, or was deleted) is told Unschedulable,
                # as Volcano's gang plugin tells it.
                job.condition = None
                continue
            if not tentative and not job.fit_errors:
                # The message follows from the job's tasks, its minMember and the job-level error
                # alone: kept under them (not under the job's version, which PodGroup status writes
                # move too), as many waiting jobs are told the same thing session after session.
                key = (job.tasks_version, job.min_available, job.job_fit_errors)
                kept: Kept[Unschedulable] | None = job.memo.get(GANG_UNSCHEDULABLE.name)
                if kept is not None and kept.key == key:
                    job.job_fit_errors, job.condition = kept.value.job_fit_errors, kept.value.condition
                    continue
                self._unschedulable(job, tentative)
                GANG_UNSCHEDULABLE.put(job, key, Unschedulable(job.job_fit_errors, job.condition))
                continue
            self._unschedulable(job, tentative)

    @staticmethod
    def _unschedulable(job: JobInfo, tentative: Collection[str]) -> None:
        """Explain why ``job`` does not run: its Unschedulable condition and job-level error."""
        schedulable = job.ready_num
        if tentative:  # most sessions allocate nothing: no pending task to look up then
            # The job's pending tasks that are among the tentative ones, counted from the
            # smaller side (a few tentative tasks, often many pending workers).
            if len(tentative) < job.counts[TaskStatus.PENDING]:
                tasks = job.tasks
                schedulable += sum(
                    1 for uid in tentative if (t := tasks.get(uid)) is not None and t.status == TaskStatus.PENDING
                )
            else:
                schedulable += sum(1 for t in job.tasks_with(TaskStatus.PENDING) if t.uid in tentative)
        unready = max(job.min_available - schedulable, 0)
        total = len(job.tasks) or job.min_available  # before its pods exist: the gang it asks for
        msg = f"{unready}/{total} tasks in gang unschedulable: {job_fit_error(job)}"
        job.job_fit_errors = msg
        job.condition = ("Unschedulable", NOT_ENOUGH_RESOURCES, msg)
