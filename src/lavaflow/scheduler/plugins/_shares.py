"""Helpers shared by the plugins that account for admitted (Inqueue/Running) PodGroups."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ...api.volcano import PodGroupPhase
from ..framework.memo import JobRecord, Kept
from ..model import ALLOCATED
from ..resources import EPS, PODS

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo

# The phases of an admitted PodGroup (plain strs: see model.NOT_ADMITTED).
_INQUEUE, _RUNNING = PodGroupPhase.INQUEUE.value, PodGroupPhase.RUNNING.value


def same_bits(new: np.ndarray | None, old: np.ndarray | None) -> np.ndarray | None:
    """``old`` when it holds exactly the bits of ``new``, else ``new``: a vector worked out again
    for a job's new version keeps the identity of the equal one it replaces, so that sums kept
    under the identities of the vectors they were made of (overcommit, proportion) still hold."""
    if (
        new is not None
        and old is not None
        and new.dtype == old.dtype
        and new.shape == old.shape
        and new.tobytes() == old.tobytes()
    ):
        return old
    return new


# A job's admission vectors, kept under (version, the PodGroup phase the session sees, width) and
# (version, width), each on the basis of its admission_key.
RESERVED: JobRecord[np.ndarray | None] = JobRecord("reserved")
HEADROOM: JobRecord[np.ndarray] = JobRecord("headroom")


def admission_key(job: JobInfo, width: int) -> tuple[Any, ...]:
    """What a job's admission vectors (:func:`reserved_or_none`, :func:`elastic_of`, proportion's
    rows) are made of: its tasks (``tasks_version``), the PodGroup phase the session sees, minMember
    and the bits of minResources. Each is kept under the job's version and this key: a new version
    with the same key (a PodGroup status write, its counters and conditions: about half of a job's
    versions in an elastic run) keeps the vector instead of working it out again (the records'
    basis: :meth:`JobRecord.restamp`)."""
    m = job.min_resources
    return (job.tasks_version, job.sphase or job.phase, width, job.min_available, None if m is None else m.tobytes())


def reserved_by_admission(job: JobInfo, width: int) -> np.ndarray:
    """The part of an admitted PodGroup's minResources not yet allocated.

    Counted for Inqueue PodGroups and for Running ones with at least minMember
    tasks allocated, so that pods a running driver creates later (Spark
    executors) still find the room the PodGroup was admitted for.
    """
    left = reserved_or_none(job, width)
    return left if left is not None else np.zeros(width)


def reserved_or_none(job: JobInfo, width: int) -> np.ndarray | None:
    """:func:`reserved_by_admission`, None where that is nothing (no minResources, a PodGroup
    neither Inqueue nor Running with its minimum allocated, or one that holds all of its
    minResources, as most running gangs do): callers summing many jobs skip those. Skipping is
    exact: the vector's entries are +0.0 or positive, and a sum that starts at +0.0 is unchanged
    by adding +0.0."""
    if job.min_resources is None:
        return None
    # Read by several plugins in every session: kept under the job's version and admission_key
    # (a read-only array).
    key = (job.version, job.sphase, width)
    kept: Kept[np.ndarray | None] | None = job.memo.get(RESERVED.name)
    if kept is not None and kept.key == key:
        return kept.value
    akey = admission_key(job, width)
    if kept is not None and kept.basis == akey:
        return RESERVED.restamp(kept, key)
    phase = job.sphase or job.phase
    left: np.ndarray | None = None
    if phase == _INQUEUE or (phase == _RUNNING and job.allocated_num >= job.min_available):
        left = np.maximum(job.min_resources - job.allocated_view(width), 0.0)
        if left.any():
            left.flags.writeable = False
            left = same_bits(left, kept.value if kept is not None else None)
        else:
            left = None
    return RESERVED.put(job, key, left, akey)


def elastic_of(job: JobInfo, width: int) -> np.ndarray:
    """Resources a job holds beyond its minResources (preemptible headroom)."""
    if job.min_resources is None:
        return np.zeros(width)
    key = (job.version, width)
    kept: Kept[np.ndarray] | None = job.memo.get(HEADROOM.name)
    if kept is not None and kept.key == key:
        return kept.value
    akey = admission_key(job, width)
    if kept is not None and kept.basis == akey:
        return HEADROOM.restamp(kept, key)
    extra: np.ndarray = np.maximum(job.allocated_view(width) - job.min_resources, 0.0)
    extra.flags.writeable = False  # kept under the job's version and admission_key: callers only read it
    same = same_bits(extra, kept.value if kept is not None else None)
    assert same is not None
    return HEADROOM.put(job, key, same, akey)


@dataclass(slots=True)
class _Todo:
    """A vector :func:`prepare_admission_vectors` works out: the key it is kept under, and the
    vector kept before (whose identity an equal new one keeps)."""

    key: tuple[Any, ...]
    old: np.ndarray | None


def prepare_admission_vectors(jobs: Sequence[JobInfo], width: int) -> None:
    """:func:`reserved_or_none` and (for jobs holding resources) :func:`elastic_of` of many jobs
    at once, kept as each would keep them: the same elementwise operations, on the rows of one
    stack of the jobs' minResources and allocations, so the same bits (a row is a read-only view
    of the stack; a vector with the bits of the one kept before keeps that one, as same_bits
    does). Jobs whose vectors are kept at their versions are passed over; so are those whose
    minResources is not of ``width`` (the per-job functions handle them when asked)."""
    batch: list[tuple[JobInfo, np.ndarray, tuple[Any, ...], _Todo | None, _Todo | None]] = []
    for job in jobs:
        m = job.min_resources
        if m is None or m.shape != (width,):
            continue
        memo = job.memo
        akey = admission_key(job, width)
        rkey: tuple[Any, ...] = (job.version, job.sphase, width)
        rtodo: _Todo | None = None
        rkept: Kept[np.ndarray | None] | None = memo.get(RESERVED.name)
        if rkept is not None and (rkept.key == rkey or rkept.basis == akey):
            RESERVED.put(job, rkey, rkept.value, akey)  # kept
        else:
            phase = job.sphase or job.phase
            if not (phase == _INQUEUE or (phase == _RUNNING and job.allocated_num >= job.min_available)):
                RESERVED.put(job, rkey, None, akey)
            else:
                rtodo = _Todo(rkey, rkept.value if rkept is not None else None)
        ekey = (job.version, width)
        etodo: _Todo | None = None
        ekept: Kept[np.ndarray] | None = memo.get(HEADROOM.name)
        if job.allocated_num == 0:
            pass  # not asked for (job_rows asks for jobs holding resources)
        elif ekept is not None and (ekept.key == ekey or ekept.basis == akey):
            HEADROOM.put(job, ekey, ekept.value, akey)  # kept
        else:
            etodo = _Todo(ekey, ekept.value if ekept is not None else None)
        if rtodo is not None or etodo is not None:
            batch.append((job, m, akey, rtodo, etodo))
    if not batch:
        return
    mins = np.array([b[1] for b in batch])
    held = np.array([b[0].allocated_view(width) for b in batch])
    left = np.maximum(mins - held, 0.0)
    left.flags.writeable = False
    nonzero = left.any(axis=1).tolist()
    beyond = np.maximum(held - mins, 0.0)
    beyond.flags.writeable = False
    for i, (job, _m, akey, rtodo, etodo) in enumerate(batch):
        if rtodo is not None:
            RESERVED.put(job, rtodo.key, same_bits(left[i], rtodo.old) if nonzero[i] else None, akey)
        if etodo is not None:
            eleft = same_bits(beyond[i], etodo.old)
            assert eleft is not None
            HEADROOM.put(job, etodo.key, eleft, akey)


def admission_dims(req: np.ndarray) -> np.ndarray:
    """The dimensions a PodGroup's minResources are admitted in: those it asks for, but pods.
    Volcano's job controller puts ``pods`` in minResources (the quota evaluator's usage), and its
    enqueue checks (LessEqualWithDimensionAndResourcesName, in overcommit, proportion and capacity)
    skip it (IsIgnoredScalarResource): pod slots are the predicates' business."""
    dims: np.ndarray = req > 0
    if len(dims) > PODS:
        dims[PODS] = False
    return dims


def within_share(a: Any, job: JobInfo) -> bool:
    """Would the queue whose accounting is ``a`` (allocated, inqueue, deserved) stay within its
    deserved share after admitting ``job`` (its minResources; pods is not a share dimension)?"""
    req = job.min_resources
    assert req is not None  # asked only for jobs with minResources
    dims = admission_dims(req)
    after = a.allocated + a.inqueue + req
    return bool(np.all(after[dims] <= a.deserved[dims] + EPS))


def within_deserved_fn(plugin: Any) -> Callable[[JobInfo], bool | None]:
    """The WithinDeserved callback of a plugin that keeps queue accounting in ``plugin.attrs``
    (proportion, capacity): :func:`within_share` for queues it knows, None for the others."""

    def within(job: JobInfo) -> bool | None:
        a = plugin.attrs.get(job.queue)
        return None if a is None else within_share(a, job)

    return within


def preemptable_below(ssn: Session, job: JobInfo, width: int) -> np.ndarray:
    """Resources held in ``job``'s queue by running jobs of strictly lower priority.

    Only counted when the ``preempt`` action is configured: those resources can
    be taken for ``job``, so admission should not refuse it for a full queue
    (Volcano refuses it, and its users then find that "preemption doesn't work").
    Best-effort and non-preemptable tasks and kube-system/critical pods are left out.
    """
    out = np.zeros(width)
    if "preempt" not in ssn.conf.action_names:
        return out
    for other in ssn.jobs.values():
        if other.uid == job.uid or other.queue != job.queue or other.priority >= job.priority:
            continue
        for t in other.tasks.values():
            if t.status in ALLOCATED and t.preemptable and not t.critical and not t.best_effort:
                out[: len(t.resreq)] += t.resreq
    return out


class _HasShare(Protocol):
    @property
    def share(self) -> float: ...


def share_queue_order(attrs: Mapping[str, _HasShare]) -> Callable[[QueueInfo, QueueInfo], int]:
    """Queue order of proportion and capacity: higher spec.priority first, then the smaller share."""

    def order(l: QueueInfo, r: QueueInfo) -> int:
        if l.priority != r.priority:
            return -1 if l.priority > r.priority else 1
        ls = attrs[l.name].share if l.name in attrs else 0.0
        rs = attrs[r.name].share if r.name in attrs else 0.0
        if abs(ls - rs) <= 1e-9:
            return 0
        return -1 if ls < rs else 1

    return order
