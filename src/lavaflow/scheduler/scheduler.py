"""The scheduler loop: one session per period, then PodGroup and Queue status write-back."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..api.volcano import PodGroupPhase
from .cache import SchedulerCache
from .framework.conf import SchedulerConfiguration, load_scheduler_conf
from .framework.memo import CacheRecord, JobRecord, state
from .framework.node_choice import NodeChoice, NodeSampler
from .framework.registry import ACTIONS, PLUGINS, Plugin
from .framework.session import Session
from .model import _ALLOCATED, _BINDING, _BOUND, _FAILED, _RUNNING, _SUCCEEDED, JobInfo

if TYPE_CHECKING:  # pragma: no cover
    from ..api.volcano import PodGroupCondition, PodGroupStatus
    from .framework.memo import Kept

KUBE_DEFAULT_CONF = """\
actions: "kube-default"
tiers:
- plugins:
  - name: priority
  - name: predicates
  - name: nodeorder
"""

log = logging.getLogger(__name__)

# The PodGroup phases a write-back sets, as plain strings (.value): the status dict is a document
# the backends send to the API server and keep as it is. Module constants: this runs for every job.
_PG_PENDING, _PG_INQUEUE, _PG_RUNNING, _PG_COMPLETED, _PG_UNKNOWN = (
    PodGroupPhase.PENDING.value,
    PodGroupPhase.INQUEUE.value,
    PodGroupPhase.RUNNING.value,
    PodGroupPhase.COMPLETED.value,
    PodGroupPhase.UNKNOWN.value,
)
_PG_WAITING = (_PG_PENDING, _PG_INQUEUE)

# What the scheduler keeps between sessions (framework/memo.py):
# the (width, total) the configured plugins last prepared a job for, under the job's version;
PREPARED: JobRecord[tuple[int, bytes]] = JobRecord("prepared")
# that a PodGroup's status already says what a session decided, under (the job's version, the
# PodGroup object and its resourceVersion, the phase and conditions decided);
PG_STATUS_KEPT: JobRecord[bool] = JobRecord("pg_status_kept")


@dataclass(slots=True)
class QueueAllocated:
    """The queues' allocated sums at the last write-back, and what they were made of: the jobs
    holding resources (the objects, held) at their versions, and each (queue, allocation vector)
    summed, held so that the vectors' ids stay theirs."""

    width: int
    names: tuple[str, ...]
    held: list[tuple[str, np.ndarray]]
    allocated: dict[str, np.ndarray]
    jobs: tuple[JobInfo, ...]
    versions: list[int]


QUEUE_ALLOCATED: CacheRecord[QueueAllocated] = CacheRecord("queue-allocated")


class Scheduler:
    #: Raise a failed session's exception from run_once once the cache is restored (tests set it
    #: so that a failing plugin fails them); otherwise it is logged and counted in failed_cycles.
    reraise: bool = False

    def __init__(
        self,
        cache: SchedulerCache,
        conf: SchedulerConfiguration | None = None,
        *,
        reraise: bool | None = None,
        node_choice: NodeChoice | None = None,
    ) -> None:
        self.cache = cache
        self.conf = conf or load_scheduler_conf()
        self.node_choice = node_choice or NodeChoice()
        problems = self.node_choice.problems()
        if problems:
            raise ValueError("; ".join(f"{name}: {msg}" for name, msg in problems))
        # Volcano's sampling state lives as long as the scheduler (its start index, like
        # vc-scheduler's, carries over from one session to the next).
        self.sampler = NodeSampler(self.node_choice) if self.node_choice.volcano else None
        self.actions = [ACTIONS[name](self.conf.action_arguments(name)) for name in self.conf.action_names]
        self.cycles = 0
        self.failed_cycles = 0  # sessions an action or plugin raised in
        self.last_error: BaseException | None = None
        self._previous: Session | None = None  # the last session, disposed of when the next opens
        if reraise is not None:
            self.reraise = reraise
        # The configured plugins that keep something per job (see prepare_jobs).
        self._preparers = [
            cls
            for cls in dict.fromkeys(
                PLUGINS[o.name] for tier in self.conf.tiers for o in tier.plugins if o.name in PLUGINS
            )
            if cls.prepare_jobs.__func__ is not Plugin.prepare_jobs.__func__  # type: ignore[attr-defined]
        ]

    def prepare_jobs(self, jobs: Iterable[JobInfo]) -> None:
        """Work out ahead of the next session what the configured plugins keep per job
        (``Plugin.prepare_jobs``) for ``jobs`` with a PodGroup, as the session will see them: jobs
        already prepared at their current version are passed over. A backend calls it in its idle
        time, between sessions (never during one); the Kubernetes scheduler does while its
        informers sync, for each job soon after its objects came, so that its first session over
        a large cluster finds every running job's vectors kept instead of working them out."""
        if not self._preparers:
            return
        width = len(self.cache.index)
        nodes = self.cache.nodes
        total = nodes.view("allocatable").sum(axis=0) if len(nodes) else np.zeros(width)
        stamp = (width, total.tobytes())
        batch = []
        for job in jobs:
            if job.pg is None:
                continue
            if PREPARED.get(job, job.version) != stamp:
                batch.append(job)
        if not batch:
            return
        # Each as the next session will see it: its PodGroup's phase as it opens (Session.__init__).
        phases = [job.sphase for job in batch]
        for job in batch:
            job.sphase = job.phase
        try:
            for cls in self._preparers:
                cls.prepare_jobs(batch, width, total, self.cache)
        finally:
            for job, phase in zip(batch, phases):
                job.sphase = phase
        for job in batch:
            PREPARED.put(job, job.version, stamp)

    def run_once(self, now: float = 0.0) -> Session:
        """One session: open, the actions in order, close, then the status write-back.

        When an action or plugin raises, the session is aborted (``Session.abort``): statements
        not committed are discarded and pipelined or undispatched placements undone, so the cache
        is as after the session's last committed statement (whose binds and evictions were already
        handed over, as they are on success); no PodGroup or Queue status is written. The error is
        logged and counted in ``failed_cycles`` (and re-raised when ``reraise`` is set); the next
        run_once starts from that consistent state.
        """
        self.cache.settle_usage()  # (a backend that filled the cache deferring node usage)
        previous, self._previous = self._previous, None
        if previous is not None:
            previous.dispose()  # its callbacks and plugins' session state are freed with it, not by the collector
        ssn = self._previous = Session(self.cache, self.conf, now, self.sampler)
        try:
            ssn.open()
            for action in self.actions:
                action.execute(ssn)
            ssn.close()
        except Exception as exc:
            ssn.abort(exc)
            self.cycles += 1
            self.failed_cycles += 1
            self.last_error = exc
            log.error("scheduling session at %s failed; its uncommitted work was undone", now, exc_info=exc)
            if self.reraise:
                raise
            return ssn
        self._write_podgroups(ssn, now)
        self._write_queues(ssn)
        self.cycles += 1
        return ssn

    # ------------------------------------------------------------------ status write-back
    def _write_podgroups(self, ssn: Session, now: float) -> None:
        for job in ssn.jobs.values():
            pg = job.pg
            if pg is None:
                continue
            # Nothing to write when neither the job, its PodGroup nor what this session decided
            # for it changed since a session found the PodGroup already saying it.
            key = (job.version, id(pg), pg.metadata.resource_version, job.sphase, job.condition, job.extra_conditions)
            kept: Kept[bool] | None = job.memo.get(PG_STATUS_KEPT.name)
            if kept is not None and kept.key == key:
                continue
            status = pg_status(job, pg.status.phase, job.sphase or pg.status.phase)
            # Unknown: running tasks but the gang is broken this session — first, as Volcano's
            # getPodGroupPhase decides it, also where its placed and ended pods reach minMember (a
            # gang whose failed pod leaves too few running and nothing to place).
            if job.counts[_RUNNING] and job.condition is not None and job.condition[0] == "Unschedulable":
                status["phase"] = _PG_UNKNOWN
            wanted = ([job.condition] if job.condition is not None else []) + job.extra_conditions
            if _same_counts(pg.status, status) and _conditions_kept(pg.status.conditions, wanted):
                # What this session decided is what the PodGroup already says.
                PG_STATUS_KEPT.put(job, (*key[:5], list(job.extra_conditions)), True)
                continue
            conditions = [c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in pg.status.conditions]
            for ctype, reason, message in wanted:
                conditions = upsert_condition(conditions, ctype, reason, message, now)
            status["conditions"] = conditions
            if _changed(pg.status, status):
                self.cache.decisions.podgroups.append((pg.key, status))

    def _write_queues(self, ssn: Session) -> None:
        width = len(ssn.index)
        queues = ssn.queues
        names = tuple(queues)
        # The same jobs (objects, held here) at the same versions as at the last write-back: the
        # same queues, counts and allocation vectors, so the same sums, without visiting a job.
        jobs = tuple(self.cache.holding_jobs())
        versions = [job.version for job in jobs]
        kept = QUEUE_ALLOCATED.last(self.cache)
        if (
            kept is not None
            and kept.width == width
            and kept.names == names
            and kept.jobs == jobs
            and kept.versions == versions
        ):
            allocated: dict[str, np.ndarray] = kept.allocated  # only read below
        else:
            held: list[tuple[str, np.ndarray]] = []
            for job in jobs:
                # Jobs holding nothing (finished ones keep their tasks) add nothing: skip their tasks.
                c = job.counts
                if job.queue in queues and c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING]:
                    held.append((job.queue, job.allocated_view(width)))
            # The jobs' allocation vectors are kept under their versions (a new array when a job
            # changes): the same arrays, held here so that their ids stay theirs, in the same order
            # and queues give the same sums as last session.
            if (
                kept is not None
                and kept.width == width
                and kept.names == names
                and len(kept.held) == len(held)
                and all(q0 == q1 and v0 is v1 for (q0, v0), (q1, v1) in zip(kept.held, held))
            ):
                allocated = kept.allocated
            else:
                allocated = {name: np.zeros(width) for name in queues}
                for queue, vec in held:
                    allocated[queue] += vec
            QUEUE_ALLOCATED.put(self.cache, None, QueueAllocated(width, names, held, allocated, jobs, versions))
        # Roll allocations up to ancestors (hierarchical queues).
        rolled = {name: vec.copy() for name, vec in allocated.items()}
        for name, vec in allocated.items():
            seen = {name}
            parent = ssn.queues[name].parent
            while parent and parent in rolled and parent not in seen:
                rolled[parent] += vec
                seen.add(parent)
                parent = ssn.queues[parent].parent
        shown: dict[str, tuple[bytes, str | None, int]] = state(self.cache, "queue-write-back", dict)
        for name, vec in rolled.items():
            q = ssn.queues[name].queue
            if q is None:
                continue
            # The same allocation as when this version of the Queue last showed it: nothing to write.
            stamp = (vec.tobytes(), q.metadata.resource_version, id(q))
            if shown.get(name) == stamp:
                continue
            alloc = {k: _fmt(v) for k, v in ssn.index.to_dict(vec).items()}
            current = {k: _fmt(float(v)) for k, v in q.status.allocated.items()}
            if alloc != current:
                self.cache.decisions.queues.append((name, {"allocated": alloc}))
                shown.pop(name, None)  # compared again until the Queue shows it
            else:
                shown[name] = stamp


def pg_status(job: JobInfo, old_phase: str, session_phase: str) -> dict[str, Any]:
    """Volcano's jobStatus: the PodGroup phase and counters after a session.

    As Volcano's getPodGroupPhase (v1.16) in what ended pods count for: the gang counts as placed
    when its tasks allocated, on a node or ended (Succeeded *and* Failed) reach minMember, and is
    Completed once every one of them has ended; a gang one of whose pods failed is Completed, not
    sent back to Pending to be admitted again (v1.13 counted only Succeeded among the ended). Two
    differences, documented in docs/volcano-examples.md: tasks allocated or binding in this
    session count already, so Running is written with the bindings, where Volcano writes it one
    period later; and Releasing pods that were on a node are not counted (Volcano v1.16 counts
    them, which would hold an elastic job's PodGroup Running through a halt)."""
    c = job.counts
    ended = c[_SUCCEEDED] + c[_FAILED]
    scheduled = job.scheduled_num
    if scheduled > 0 and scheduled >= job.min_available:
        phase = _PG_COMPLETED if ended == scheduled else _PG_RUNNING
    elif session_phase != _PG_INQUEUE:
        phase = _PG_PENDING
    else:
        phase = _PG_INQUEUE
    return {
        "phase": phase,
        "running": c[_RUNNING],
        "succeeded": c[_SUCCEEDED],
        "failed": c[_FAILED],
    }


def upsert_condition(
    conditions: list[dict[str, Any]], ctype: str, reason: str, message: str, now: float
) -> list[dict[str, Any]]:
    """``conditions`` with the condition of type ``ctype`` set True with ``reason`` and
    ``message``, as Volcano's Session.UpdatePodGroupCondition sets it: in the place of the
    condition of that type, or appended; conditions of other types are left as they are (a gang
    placed after a wait keeps Unschedulable True beside Scheduled True, as on Volcano)."""
    out = [dict(c) for c in conditions]
    at = next((i for i, c in enumerate(conditions) if c.get("type") == ctype), None)
    prev = conditions[at] if at is not None else None
    same = prev is not None and prev.get("reason") == reason and prev.get("message", "") == message
    cond: dict[str, Any] = {
        "type": ctype,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": prev.get("lastTransitionTime") if same and prev is not None else now,
    }
    if not message:
        cond.pop("message")
    if at is None:
        out.append(cond)
    else:
        out[at] = cond
    return out


def _same_counts(old: PodGroupStatus, new: dict[str, Any]) -> bool:
    return bool(
        old.phase == new["phase"]
        and old.running == new["running"]
        and old.succeeded == new["succeeded"]
        and old.failed == new["failed"]
    )


def _conditions_kept(old: list[PodGroupCondition], wanted: list[tuple[str, str, str]]) -> bool:
    """Whether upserting ``wanted`` (type, reason, message) into the conditions ``old`` leaves them
    as ``_changed`` compares them (type, status, reason, message, in order): the rules of
    :func:`upsert_condition`, on tuples."""
    before = [(c.type, c.status, c.reason, c.message or "") for c in old]
    cur = list(before)
    for ctype, reason, message in wanted:
        want = (ctype, "True", reason, message or "")
        at = next((i for i, c in enumerate(cur) if c[0] == ctype), None)
        if at is None:
            cur.append(want)
        else:
            cur[at] = want
    return cur == before


def _changed(old: PodGroupStatus, new: dict[str, Any]) -> bool:
    if old.phase != new["phase"] or old.running != new["running"]:
        return True
    if old.succeeded != new["succeeded"] or old.failed != new["failed"]:
        return True
    olds = [(c.type, c.status, c.reason, c.message or "") for c in old.conditions]
    news = [(c["type"], c["status"], c.get("reason"), c.get("message", "")) for c in new["conditions"]]
    return olds != news


def _fmt(v: float) -> str:
    return f"{v:.6g}"
