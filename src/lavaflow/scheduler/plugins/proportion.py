"""proportion: queues share the cluster by weight.

Each queue's ``deserved`` share comes from water-filling the cluster's resources
by weight, capped by the queue's capability (realCapability) and by what its jobs
request, and floored by its guarantee. A queue is overused once its allocation
reaches its deserved share in every resource; a task may be allocated while the
queue's allocation plus the task stays within deserved; a PodGroup is admitted
while its minResources fit the queue's realCapability beside what is already
allocated and admitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..framework.memo import MISS, CacheRecord, JobRecord, JobsRecord, Reuse, state
from ..framework.registry import Plugin, register_plugin
from ..framework.session import ABSTAIN, PERMIT, REJECT
from ..model import _ALLOCATED, _BINDING, _BOUND, _PENDING, _RUNNING, NOT_ADMITTED
from ..resources import EPS, PODS, amounts, describe, short_in
from ._shares import (
    admission_dims,
    admission_key,
    elastic_of,
    preemptable_below,
    prepare_admission_vectors,
    reserved_or_none,
    same_bits,
    share_queue_order,
    within_deserved_fn,
)

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..cache import SchedulerCache
    from ..framework.memo import HasMemo, Kept
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo, TaskInfo


@dataclass
class QueueAttr:
    name: str
    weight: float
    allocated: np.ndarray
    request: np.ndarray
    inqueue: np.ndarray
    elastic: np.ndarray
    guarantee: np.ndarray
    capability: np.ndarray
    # Both set as the session opens, before any use (None only while the attributes are built).
    real_capability: np.ndarray = field(default=None)  # type: ignore[arg-type]
    deserved: np.ndarray = field(default=None)  # type: ignore[arg-type]
    # The dominant share of ``allocated`` in ``deserved``; worked out again when read after the
    # allocation changed (``stale``), not at every task allocated or released: a function of the
    # two vectors alone, so the same value.
    _share: float = 0.0
    stale: bool = False

    @property
    def share(self) -> float:
        if self.stale:
            ProportionPlugin._update_share(self)
        return self._share


class JobRows(NamedTuple):
    """A job's vectors for its queue's sums, each None where it adds nothing."""

    allocated: np.ndarray | None  # held by its tasks
    pending: np.ndarray | None  # asked by its pending tasks
    wanted: np.ndarray | None  # minResources beyond its pending tasks while its PodGroup waits for admission
    reserved: np.ndarray | None  # admitted but not yet allocated (reserved_or_none)
    headroom: np.ndarray | None  # held beyond minResources (elastic_of)


@dataclass(slots=True)
class QueueSums:
    """:func:`_kept_sums`' value: the sums under the very sequence of the entries they were made
    of (``ident``, the entries held so that their ids stay theirs), and the queues' slots and
    each job's entry as the session that kept them saw them."""

    ident: tuple[tuple[int, int], ...]
    width: int
    entries: list[tuple[int, JobRows]]  # (queue slot, rows) of each job, in job order
    sums: list[np.ndarray | None]
    names: list[str]  # queue names by slot
    at: dict[str, int]  # job uid -> its entry
    versions: dict[str, int]  # job uid -> the job's version when its entry was last made or checked
    exact: bool = False  # every row and sum a multiple of 2**-10 below EXACT_BELOW (see _updated_sums)
    counts: list[int] | None = None  # rows added into each kind of sums (None: not counted)


@dataclass(slots=True)
class OpenedAttrs:
    """The queues' attributes as the last session to make them opened (read-only copies), and
    what they were made of: the kept sums (by identity), their slots, the total and the queues."""

    sums: list[np.ndarray | None]
    total: bytes
    queues: list[tuple[Any, ...]]  # _queue_key of each queue
    attrs: list[QueueAttr]
    names: list[str]


# A job's rows, kept under (version, PodGroup phase seen, width) on the basis of its admission_key.
JOB_ROWS: JobRecord[JobRows] = JobRecord("proportion")
# The queues' sums of all the jobs' rows, under the jobs' token and the width.
QUEUE_SUMS: JobsRecord[QueueSums] = JobsRecord("proportion.sums")
OPENED_ATTRS: CacheRecord[OpenedAttrs] = CacheRecord("proportion.attrs")
# The water-filled deserved shares, under the total and every queue's inputs.
WATER_FILL: CacheRecord[list[np.ndarray]] = CacheRecord("proportion.water_fill")


def water_fill(attrs: list[QueueAttr], total: np.ndarray) -> None:
    """Volcano's proportion loop: hand out the remaining resources by weight until
    every queue is satisfied or nothing changes."""
    shape = total.shape
    if (
        total.dtype == np.float64
        and len(shape) == 1
        and all(
            v.dtype == np.float64 and v.shape == shape
            for a in attrs
            for v in (a.real_capability, a.request, a.guarantee)
        )
    ):
        _water_fill_floats(attrs, total)
    else:
        _water_fill_arrays(attrs, total)


def _minimum(x: float, y: float) -> float:
    """``np.minimum`` of two floats: a NaN wins, and of two equal values (0.0 and -0.0) the second."""
    return x if x < y or x != x else y


def _maximum(x: float, y: float) -> float:
    """``np.maximum`` of two floats: a NaN wins, and of two equal values (0.0 and -0.0) the second."""
    return x if x > y or x != x else y


def _water_fill_floats(attrs: list[QueueAttr], total: np.ndarray) -> None:
    """:func:`_water_fill_arrays` on lists of Python floats: element by element the very IEEE
    operations of the array form (np.minimum and np.maximum spelled out with their NaN and signed
    zero rules), so the same bits, without numpy's overhead per call on these short vectors (it
    runs whenever the queues' requests change, in about half the sessions of a busy cluster)."""
    remaining = total.tolist()
    width = len(remaining)
    deserved = [[0.0] * width for _ in attrs]
    caps = [a.real_capability.tolist() for a in attrs]
    requests = [a.request.tolist() for a in attrs]
    guarantees = [a.guarantee.tolist() for a in attrs]
    met: set[str] = set()
    for _ in range(64):
        active = [i for i, a in enumerate(attrs) if a.name not in met]
        weight_sum = sum(attrs[i].weight for i in active)
        if weight_sum <= 0:
            break
        old_remaining = remaining
        increased = [0.0] * width
        decreased = [0.0] * width
        for i in active:
            a = attrs[i]
            old = deserved[i]
            share = a.weight / weight_sum
            d = [x + r * share for x, r in zip(old, remaining)]
            d = [_minimum(x, c) for x, c in zip(d, caps[i])]
            d = [_minimum(x, q) for x, q in zip(d, requests[i])]
            d = [_maximum(x, g) for x, g in zip(d, guarantees[i])]
            deserved[i] = d
            if all(q <= x + EPS for q, x in zip(requests[i], d)) or _close_floats(d, old):
                met.add(a.name)
            diffs = [x - o for x, o in zip(d, old)]
            increased = [s + _maximum(v, 0.0) for s, v in zip(increased, diffs)]
            decreased = [s + _maximum(-v, 0.0) for s, v in zip(decreased, diffs)]
        remaining = [r - i + d for r, i, d in zip(remaining, increased, decreased)]
        if all(r <= EPS for r in remaining) or _close_floats(remaining, old_remaining):
            break
    for a, d in zip(attrs, deserved):
        a.deserved = np.array(d, dtype=np.float64)


def _water_fill_arrays(attrs: list[QueueAttr], total: np.ndarray) -> None:
    """:func:`water_fill` on numpy arrays (whatever their dtypes)."""
    for a in attrs:
        a.deserved = np.zeros_like(total)
    remaining = total.copy()
    met: set[str] = set()
    for _ in range(64):
        active = [a for a in attrs if a.name not in met]
        weight_sum = sum(a.weight for a in active)
        if weight_sum <= 0:
            break
        old_remaining = remaining.copy()
        increased = np.zeros_like(total)
        decreased = np.zeros_like(total)
        for a in active:
            old = a.deserved.copy()
            a.deserved = a.deserved + remaining * (a.weight / weight_sum)
            a.deserved = np.minimum(a.deserved, a.real_capability)
            a.deserved = np.minimum(a.deserved, a.request)
            a.deserved = np.maximum(a.deserved, a.guarantee)
            if np.all(a.request <= a.deserved + EPS) or _close(a.deserved, old):
                met.add(a.name)
            diff = a.deserved - old
            increased += np.maximum(diff, 0.0)
            decreased += np.maximum(-diff, 0.0)
        remaining = remaining - increased + decreased
        if np.all(remaining <= EPS) or _close(remaining, old_remaining):
            break


def water_fill_kept(attrs: list[QueueAttr], total: np.ndarray, cache: HasMemo) -> None:
    """:func:`water_fill`, or the deserved shares it gave last time for the very same inputs
    (most sessions see the same totals, weights, capabilities and requests as the one before)."""
    key = (
        total.tobytes(),
        tuple(
            (a.name, a.weight, a.real_capability.tobytes(), a.request.tobytes(), a.guarantee.tobytes()) for a in attrs
        ),
    )
    hit = WATER_FILL.get(cache, key)
    if hit is not MISS:
        for a, deserved in zip(attrs, hit):
            a.deserved = deserved.copy()
        return
    water_fill(attrs, total)
    WATER_FILL.put(cache, key, [a.deserved.copy() for a in attrs])


def job_rows(job: JobInfo, width: int) -> JobRows:
    """A job's vectors for its queue's sums (:class:`JobRows`), kept under its version and on the
    basis of its admission_key (what they are made of)."""
    key = (job.version, job.sphase, width)
    kept: Kept[JobRows] | None = job.memo.get(JOB_ROWS.name)
    if kept is not None and kept.key == key:
        return kept.value
    akey = admission_key(job, width)
    if kept is not None and kept.basis == akey:
        return JOB_ROWS.restamp(kept, key)
    c = job.counts
    holds = c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING]
    held = job.allocated_view(width) if holds else None
    pending = job.pending_view(width) if c[_PENDING] else None
    wanted = left = extra = None
    if job.min_resources is not None:
        if (job.sphase or job.phase) in NOT_ADMITTED:
            # A PodGroup waiting for admission asks for at least its minResources,
            # even before its pods exist (Volcano Jobs create them only once admitted).
            wanted = np.maximum(job.min_resources - (pending if pending is not None else 0.0), 0.0)
            wanted.flags.writeable = False
        left = reserved_or_none(job, width)
        if holds:
            extra = elastic_of(job, width)
    if kept is not None:
        # The same vectors as for the job's last version (a PodGroup status write, a task whose
        # change left them as they were): the same rows, so the queue sums kept under the
        # rows' identities still hold.
        old = kept.value
        wanted = same_bits(wanted, old.wanted)
        if (
            held is old.allocated
            and pending is old.pending
            and wanted is old.wanted
            and left is old.reserved
            and extra is old.headroom
        ):
            return JOB_ROWS.put(job, key, old, akey)
    return JOB_ROWS.put(job, key, JobRows(held, pending, wanted, left, extra), akey)


def _queue_sums(
    entries: list[tuple[int, JobRows]], queues: int, width: int
) -> tuple[list[np.ndarray | None], list[int]]:
    """Per queue slot, the sums of its jobs' allocated, requested, admitted-but-unallocated and
    elastic vectors (None for a kind no job has), each added in job order by np.add.at; and how
    many rows each kind's sums hold."""
    alloc_at: list[int] = []
    alloc_rows: list[np.ndarray] = []
    request_at: list[int] = []
    request_rows: list[np.ndarray] = []
    inqueue_at: list[int] = []
    inqueue_rows: list[np.ndarray] = []
    elastic_at: list[int] = []
    elastic_rows: list[np.ndarray] = []
    for i, (held, pending, wanted, left, extra) in entries:
        if held is not None:
            alloc_at.append(i)
            alloc_rows.append(held)
            request_at.append(i)
            request_rows.append(held)
        if pending is not None:
            request_at.append(i)
            request_rows.append(pending)
        if wanted is not None:
            request_at.append(i)
            request_rows.append(wanted)
        if left is not None:
            inqueue_at.append(i)
            inqueue_rows.append(left)
        if extra is not None:
            elastic_at.append(i)
            elastic_rows.append(extra)
    out: list[np.ndarray | None] = []
    for at, rows in (
        (alloc_at, alloc_rows),
        (request_at, request_rows),
        (inqueue_at, inqueue_rows),
        (elastic_at, elastic_rows),
    ):
        if rows:
            sums = np.zeros((queues, width))
            np.add.at(sums, np.array(at, dtype=np.intp), np.array(rows))
            out.append(sums)
        else:
            out.append(None)
    return out, [len(alloc_rows), len(request_rows), len(inqueue_rows), len(elastic_rows)]


def _kept_sums(ssn: Session, width: int) -> tuple[list[str], list[np.ndarray | None]]:
    """(the queues' names by slot, in the order their first jobs come; the :func:`_queue_sums` of
    the session's jobs), kept in :data:`QUEUE_SUMS`: with the jobs as the last session saw them
    (Reuse.SAME) no job is visited; with the same jobs, some at new versions (Reuse.SINCE), only
    those (all jobs when one of them moved to another queue)."""
    found = QUEUE_SUMS.lookup(ssn, width)
    kept = found.value
    if found.how is Reuse.SAME:
        assert kept is not None
        return kept.names, kept.sums
    entries: list[tuple[int, JobRows]] | None = None
    if found.how is Reuse.SINCE:
        assert kept is not None
        names, at = kept.names, kept.at
        entries = kept.entries
        copied = False
        for uid in found.changed:
            job = ssn.jobs[uid]
            i = at.get(uid)
            if i is None:
                entries = None
                break
            queue_slot, was = entries[i]
            if names[queue_slot] != job.queue:
                entries = None
                break
            rows = job_rows(job, width)
            if rows is not was:
                if not copied:
                    entries, copied = list(entries), True
                entries[i] = (queue_slot, rows)
        if entries is not None:
            versions = kept.versions if not copied else dict(kept.versions)
            for uid in found.changed:
                versions[uid] = ssn.jobs[uid].version
        if entries is not None and not copied:
            # Every changed job kept its vectors (a status write, a task between two states that
            # hold the same): the same entries, so the same sums.
            QUEUE_SUMS.put(ssn, kept, width)
            return names, kept.sums
    # Jobs came, went or changed their vectors: the kept sums updated by what changed, where exact
    # (for a few jobs the sums from scratch cost less than finding what changed).
    if len(ssn.jobs) >= UPDATE_FROM:
        updated = _updated_sums(ssn, width)
        if updated is not None:
            QUEUE_SUMS.put(ssn, updated, width)
            return updated.names, updated.sums
    if entries is None:
        slot: dict[str, int] = {}
        names = []
        entries = []
        at = {}  # job uid -> its entry
        versions = {}
        queues = ssn.queues
        for uid, job in ssn.jobs.items():
            q = queues.get(job.queue)
            if q is None:
                continue
            i = slot.get(q.name)
            if i is None:
                i = slot[q.name] = len(names)
                names.append(q.name)
            at[uid] = len(entries)
            versions[uid] = job.version
            entries.append((i, job_rows(job, width)))
    # The sums under the very sequence of the entries (the same objects in the same order give
    # the same sums), which most sessions share with the last; the entries are kept with them, so
    # that their ids are not reused.
    ident = tuple((i, id(e)) for i, e in entries)
    last = QUEUE_SUMS.last(ssn)
    if last is None or last.ident != ident or last.width != width:
        sums, counts = _queue_sums(entries, len(names), width)
        exact = len(entries) >= UPDATE_FROM and _sums_exact(ssn, entries, sums)
        made = QueueSums(ident, width, entries, sums, names, at, versions, exact, counts)
    else:
        made = QueueSums(last.ident, last.width, last.entries, last.sums, names, at, versions, last.exact, last.counts)
    QUEUE_SUMS.put(ssn, made, width)
    return names, made.sums


# An ``ident`` no sequence of entries has (slots are never negative): sums made by
# :func:`_updated_sums` are never taken for those of another sequence by identity.
_UPDATED: tuple[tuple[int, int], ...] = ((-1, -1),)
# Below this, float sums of multiples of 2**-10 are exact (53 bits of mantissa: 43 + 10).
EXACT_BELOW = float(2**43)
# Sessions of at least this many jobs update the kept sums (fewer: summed from scratch, cheaper).
UPDATE_FROM = 64
_EXACT_ROWS = "proportion.exact_rows"  # cache state: id(rows) -> (rows, exact)


def _exact_vec(v: np.ndarray) -> bool:
    """Whether ``v``'s elements are non-negative multiples of 2**-10 below EXACT_BELOW (sums of such
    numbers below it are exact, so in any order the same)."""
    w = v * 1024.0
    return bool(np.all(w == np.floor(w)) and np.all(v < EXACT_BELOW) and not np.any(np.signbit(v)))


def _exact_rows(kept: dict[int, tuple[JobRows, bool]], rows: JobRows, jobs: int) -> bool:
    """Whether every vector of ``rows`` is exact (:func:`_exact_vec`), kept by the rows' identity.
    What is kept holds the rows: it is cleared beyond a few times the session's ``jobs``, so that
    it never holds much more than the jobs' own rows do."""
    hit = kept.get(id(rows))
    if hit is not None and hit[0] is rows:
        return hit[1]
    ok = all(v is None or _exact_vec(v) for v in rows)
    if len(kept) >= 4 * jobs + 1024:
        kept.clear()
    kept[id(rows)] = (rows, ok)
    return ok


def _sums_exact(ssn: Session, entries: list[tuple[int, JobRows]], sums: list[np.ndarray | None]) -> bool:
    """Whether sums made from ``entries`` may be updated in place of being made again."""
    kept: dict[int, tuple[JobRows, bool]] = state(ssn.cache, _EXACT_ROWS, dict)
    return all(a is None or bool(np.all(a < EXACT_BELOW)) for a in sums) and all(
        _exact_rows(kept, rows, len(entries)) for _, rows in entries
    )


def _updated_sums(ssn: Session, width: int) -> QueueSums | None:
    """The last session's sums updated to this session's jobs by what changed — jobs added, gone,
    or with new rows — else None (the sums worked out from all the jobs again).

    :func:`_queue_sums` adds each queue's rows in job order, and floating-point sums depend on the
    order; but sums of non-negative multiples of 2**-10 that stay below 2**43 are exact, so any
    order gives the same bits. While every row is such a number (whole GPUs, pods, bytes of memory,
    cpu in multiples of 1/1024 of a core: 100m is not one) and every sum stays below, the kept sums
    less the rows gone plus the rows come are exactly the sums from scratch: what a stream of
    arrivals and completions changes between two sessions costs what changed, not all the jobs.
    The queues' slots follow their first jobs, as from scratch: a queue whose first job went moves
    (its row with it), one with no job left goes (its sums are zero then), a new one comes."""
    last = QUEUE_SUMS.last(ssn)
    if last is None or last.width != width or not last.exact or last.counts is None:
        return None
    exact: dict[int, tuple[JobRows, bool]] = state(ssn.cache, _EXACT_ROWS, dict)
    at, old_entries, old_versions = last.at, last.entries, last.versions
    names = list(last.names)  # old slots, then new queues' (temporary slots)
    slot_of = {name: k for k, name in enumerate(names)}
    queues = ssn.queues
    jobs = len(ssn.jobs)
    entries: list[tuple[int, JobRows]] = []
    new_at: dict[str, int] = {}
    versions: dict[str, int] = {}
    gone: list[tuple[int, JobRows]] = []
    come: list[tuple[int, JobRows]] = []
    first: list[int] = []  # slots in the order their first jobs come
    seen: set[int] = set()
    for uid, job in ssn.jobs.items():
        q = queues.get(job.queue)
        if q is None:
            continue  # no entry (as in the full count); one it had goes below
        i = at.get(uid)
        if i is None:
            k = slot_of.get(q.name)
            if k is None:
                k = slot_of[q.name] = len(names)
                names.append(q.name)
            rows = job_rows(job, width)
            if not _exact_rows(exact, rows, jobs):
                return None
            come.append((k, rows))
        else:
            k, rows = old_entries[i]
            if old_versions.get(uid) != job.version:
                if names[k] != q.name:
                    return None
                new = job_rows(job, width)
                if new is not rows:
                    if not _exact_rows(exact, new, jobs):
                        return None
                    gone.append((k, rows))
                    come.append((k, new))
                    rows = new
        if k not in seen:
            seen.add(k)
            first.append(k)
        new_at[uid] = len(entries)
        versions[uid] = job.version
        entries.append((k, rows))
    if len(at) != len(new_at) or any(uid not in new_at for uid in at):
        gone.extend(old_entries[i] for uid, i in at.items() if uid not in new_at)
    old_slots, all_slots = len(last.names), len(names)
    sums = list(last.sums)
    counts = list(last.counts)
    fresh = [False] * len(sums)
    # What went first, then what came: no partial sum exceeds the larger of the old and new sums.
    for sign, changes in ((-1, gone), (1, come)):
        for k, (held, pending, wanted, left, extra) in changes:
            for kind, vec in ((0, held), (1, held), (1, pending), (1, wanted), (2, left), (3, extra)):
                if vec is None:
                    continue
                counts[kind] += sign
                acc = sums[kind]
                if not fresh[kind]:
                    if acc is None:
                        acc = np.zeros((all_slots, width))
                    elif all_slots > old_slots:
                        acc = np.concatenate([acc, np.zeros((all_slots - old_slots, width))])
                    else:
                        acc = acc.copy()
                    sums[kind] = acc
                    fresh[kind] = True
                assert acc is not None
                if sign > 0:
                    acc[k] += vec
                else:
                    acc[k] -= vec
    moved = first != list(range(all_slots))
    for kind, n in enumerate(counts):
        acc = sums[kind]
        if n == 0:
            sums[kind] = None  # no job adds to this kind any more (as the full count gives)
            continue
        if acc is None:
            continue
        if fresh[kind] and not bool(np.all(acc < EXACT_BELOW)):
            return None
        if moved or len(acc) != len(first):
            if len(acc) < all_slots:  # (unchanged, with no row for a new queue: it adds nothing here)
                acc = np.concatenate([acc, np.zeros((all_slots - len(acc), width))])
            dropped = [k for k in range(all_slots) if k not in seen]
            if dropped and np.any(acc[dropped]):
                return None  # a queue with no job left holds something: not exact after all
            sums[kind] = acc[first]  # the queues' rows in the order of their first jobs
    if moved or len(first) != all_slots:
        new_slot = {k: p for p, k in enumerate(first)}
        entries = [(new_slot[k], rows) for k, rows in entries]
        names = [names[k] for k in first]
    return QueueSums(_UPDATED, width, entries, sums, names, new_at, versions, True, counts)


def _own_copy(a: QueueAttr) -> QueueAttr:
    """A copy of ``a`` with its own copies of the vectors the session's handlers change
    (allocated, inqueue, deserved), sharing the read-only others."""
    return QueueAttr(
        name=a.name,
        weight=a.weight,
        allocated=a.allocated.copy(),
        request=a.request,
        inqueue=a.inqueue.copy(),
        elastic=a.elastic,
        guarantee=a.guarantee,
        capability=a.capability,
        real_capability=a.real_capability,
        deserved=a.deserved.copy(),
        _share=a.share,
    )


def _queue_key(q: QueueInfo) -> tuple[Any, ...]:
    """What a queue's attributes are made of, compared between sessions (a Queue status write
    gives the QueueInfo new vectors with the same bits); the QueueInfo compares by identity."""
    return (
        q,
        None if q.guarantee is None else q.guarantee.tobytes(),
        None if q.capability is None else q.capability.tobytes(),
        q.weight,
    )


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.allclose(a, b)`` (rtol 1e-5, atol 1e-8; equal infinities are close), without its
    overhead on these short vectors: element by element on Python floats (the same IEEE
    operations, so the same answer, NaN included), with no ``np.errstate`` per call."""
    return _close_floats(a.tolist(), b.tolist())


def _close_floats(a: list[float], b: list[float]) -> bool:
    """:func:`_close` of two lists of floats."""
    isfinite = math.isfinite
    for x, y in zip(a, b):
        if x != y and not (isfinite(y) and abs(x - y) <= 1e-8 + 1e-5 * abs(y)):
            return False
    return True


@register_plugin
class ProportionPlugin(Plugin):
    name = "proportion"

    @classmethod
    def prepare_jobs(cls, jobs: Sequence[JobInfo], width: int, total: np.ndarray, cache: SchedulerCache) -> None:
        prepare_admission_vectors(jobs, width)  # (the reserved and headroom vectors of all at once)
        for job in jobs:
            job_rows(job, width)  # kept under the job's version

    def on_session_open(self, ssn: Session) -> None:
        width = len(ssn.index)
        total = ssn.total.copy()
        self.attrs: dict[str, QueueAttr] = {}
        # Each job's vectors are gathered first and summed per queue at the end with np.add.at,
        # which adds them one by one in this order: the same sums, to the bit, as adding them
        # here, without a numpy call per job and vector.  A job's vectors are kept under its
        # version (job_rows); the sums under the very sequence of those kept entries (the same
        # objects in the same order give the same sums), which most sessions share with the last.
        names, sums = _kept_sums(ssn, width)
        # The queues' attributes as they open follow from those sums (by slot, ``names``), the total
        # and the queues (their objects, vectors' bits and weights): with all the same as last session,
        # the same, made again from what was kept (the vectors no handler changes are shared,
        # read-only).
        kept = OPENED_ATTRS.last(ssn.cache)
        queues = ssn.queues
        if (
            kept is not None
            and kept.sums is sums
            and kept.names == names
            and kept.total == total.tobytes()
            and len(kept.queues) == len(queues)
            and all(k == _queue_key(q) for k, q in zip(kept.queues, queues.values()))
        ):
            for f in kept.attrs:
                self.attrs[f.name] = _own_copy(f)
        else:
            self._make_attrs(ssn, names, sums, total)
            frozen = []
            for a in self.attrs.values():
                for v in (a.request, a.elastic, a.guarantee, a.capability, a.real_capability):
                    v.flags.writeable = False  # shared with later sessions: only the handlers' two change
                frozen.append(_own_copy(a))
            OPENED_ATTRS.put(
                ssn.cache,
                None,
                OpenedAttrs(
                    sums=sums,
                    total=total.tobytes(),
                    queues=[_queue_key(q) for q in queues.values()],
                    attrs=frozen,
                    names=list(names),
                ),
            )

        def overused(queue: QueueInfo) -> bool:
            a = self.attrs.get(queue.name)
            if a is None:
                return False
            # pods is not a share dimension (Volcano's Resource.LessEqual ignores MaxTaskNum): a queue
            # with pending pods would otherwise never count as overused.
            dims = np.ones(len(a.deserved), dtype=bool)
            if len(dims) > PODS:
                dims[PODS] = False
            return bool(np.all(a.deserved[dims] <= a.allocated[dims] + EPS))

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            a = self.attrs.get(queue.name)
            if a is None:
                return True
            # Every requested resource but pods must stay within deserved (scalar form of
            # np.all(allocated[dims] + req[dims] <= deserved[dims] + EPS)).
            req = task.resreq.tolist()
            alloc = a.allocated.tolist()
            des = a.deserved.tolist()
            ok = True
            for i, r in enumerate(req):
                if r > 0 and i != 2 and not alloc[i] + r <= des[i] + EPS:
                    ok = False
                    break
            if not ok:
                job = ssn.jobs.get(task.job)
                if job is not None:
                    dims = task.resreq > 0
                    if len(dims) > PODS:
                        dims[PODS] = False
                    short = short_in(ssn.index, a.allocated + task.resreq, a.deserved, dims)
                    at_cap = [ssn.index.names.index(n) for n in short.split(", ") if n in ssn.index.names]
                    if at_cap and all(a.deserved[i] >= a.capability[i] - EPS for i in at_cap):
                        # Its deserved share is its capability there: say so, with the capability.
                        job.job_fit_errors = (
                            f"queue {queue.name} would exceed its capability in {short} "
                            f"(capability {amounts(ssn.index, a.capability, short)}; "
                            f"allocated {amounts(ssn.index, a.allocated, short)})"
                        )
                    else:
                        job.job_fit_errors = (
                            f"queue {queue.name} would exceed its deserved share in {short} "
                            f"({describe(ssn.index, a.deserved)}; allocated {describe(ssn.index, a.allocated)})"
                        )
            return ok

        def enqueueable(job: JobInfo) -> int:
            q = ssn.queues.get(job.queue)
            a = self.attrs.get(job.queue)
            if q is not None and not q.is_open:
                job.job_fit_errors = f"queue {q.name} is {q.state.lower()}"
                return REJECT
            if a is None or job.min_resources is None:
                return PERMIT if job.min_resources is None else ABSTAIN
            req = job.min_resources
            dims = admission_dims(req)
            need = req + a.allocated + a.inqueue - a.elastic
            if np.all(need[dims] <= a.real_capability[dims] + EPS):
                return PERMIT
            if np.all((need - preemptable_below(ssn, job, width))[dims] <= a.real_capability[dims] + EPS):
                ssn.record(job, "enqueue", "queue is full, but lower-priority work in it can be preempted")
                return PERMIT
            short = short_in(ssn.index, need, a.real_capability, dims)
            job.job_fit_errors = (
                f"queue {job.queue} cannot admit minResources ({describe(ssn.index, req)}) in {short}: "
                f"allocated {describe(ssn.index, a.allocated)}, admitted {describe(ssn.index, a.inqueue)}, "
                f"capacity {describe(ssn.index, np.where(np.isfinite(a.real_capability), a.real_capability, 0))}"
            )
            return REJECT

        def enqueued(job: JobInfo) -> None:
            a = self.attrs.get(job.queue)
            if a is not None and job.min_resources is not None:
                a.inqueue += job.min_resources

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            a = self.attrs.get(job.queue) if job is not None else None
            if a is not None:
                a.allocated += task.resreq
                a.stale = True

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            a = self.attrs.get(job.queue) if job is not None else None
            if a is not None:
                a.allocated -= task.resreq
                a.stale = True

        def preemptive(queue: QueueInfo, task: TaskInfo) -> bool:
            """May this queue take resources back for ``task``? Only while it stays within its deserved share."""
            a = self.attrs.get(queue.name)
            if a is None:
                return False
            dims = task.resreq > 0
            dims[PODS] = False
            return bool(np.all(a.allocated[dims] + task.resreq[dims] <= a.deserved[dims] + EPS))

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            """Victims only from queues above their deserved share, and only while they stay above it."""
            victims: list[TaskInfo] = []
            left: dict[str, np.ndarray] = {}
            for t in reclaimees:
                job = ssn.jobs.get(t.job)
                a = self.attrs.get(job.queue) if job is not None else None
                if a is None:
                    continue
                alloc = left.setdefault(a.name, a.allocated.copy())
                if not np.all(alloc <= a.deserved + EPS):  # allocated exceeds deserved somewhere
                    alloc -= t.resreq
                    victims.append(t)
            return victims, PERMIT

        ssn.add_queue_order_fn(self.name, share_queue_order(self.attrs))
        ssn.add_overused_fn(self.name, overused)
        ssn.add_preemptive_fn(self.name, preemptive)
        ssn.add_reclaimable_fn(self.name, reclaimable)
        ssn.add_allocatable_fn(self.name, allocatable)
        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)
        ssn.add_event_handler(on_allocate, on_deallocate)
        ssn.add_overused_reason_fn(self.name, lambda queue: self.overused_reason(queue.name))
        ssn.add_within_deserved_fn(self.name, within_deserved_fn(self))
        ssn.add_deserved_shares_fn(self.name, lambda: {q: a.deserved for q, a in self.attrs.items()})
        self._index = ssn.index

    def _make_attrs(
        self,
        ssn: Session,
        names: list[str],
        sums: list[np.ndarray | None],
        total: np.ndarray,
    ) -> None:
        """Each queue's attributes (``self.attrs``) from its jobs' sums (``names`` gives the slots),
        with its deserved share (water-filling) and dominant share."""
        width = len(ssn.index)
        guarantee_sum = np.zeros(width)
        for qi in ssn.queues.values():
            guarantee_sum += qi.guarantee if qi.guarantee is not None else 0.0
        made: list[QueueAttr] = []
        for name in names:
            q = ssn.queues[name]
            guarantee = q.guarantee if q.guarantee is not None else np.zeros(width)
            capability = q.capability if q.capability is not None else np.full(width, np.inf)
            a = QueueAttr(
                name=q.name,
                weight=float(q.weight or 1),
                allocated=np.zeros(width),
                request=np.zeros(width),
                inqueue=np.zeros(width),
                elastic=np.zeros(width),
                guarantee=guarantee.copy(),
                capability=capability.copy(),
            )
            a.real_capability = np.minimum(capability, total - guarantee_sum + guarantee)
            self.attrs[q.name] = a
            made.append(a)
        for name, rows in zip(("allocated", "request", "inqueue", "elastic"), sums):
            if rows is not None:
                for a, row in zip(made, rows, strict=True):
                    setattr(a, name, row.copy())
        attrs = sorted(self.attrs.values(), key=lambda a: a.name)
        water_fill_kept(attrs, total, ssn.cache)
        for a in attrs:
            self._update_share(a)

    @staticmethod
    def _update_share(a: QueueAttr) -> None:
        # Scalar form of the vector computation below (same IEEE divisions); falls back
        # to numpy for the corner cases (NaN) where max() would differ from np.max.
        alloc = a.allocated.tolist()
        des = a.deserved.tolist()
        if len(alloc) == len(des) and len(alloc) >= 3:
            share = None
            for i in range(len(alloc)):
                if i == 2:
                    continue
                d, x = des[i], alloc[i]
                r = x / d if d > 0 else (1.0 if x > 0 else 0.0)
                if r != r:
                    share = None
                    break
                if share is None or r > share:
                    share = r
            if share is not None:
                a._share = share
                a.stale = False
                return
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(a.deserved > 0, a.allocated / a.deserved, np.where(a.allocated > 0, 1.0, 0.0))
        a._share = float(np.max(ratios[[0, 1] + list(range(3, len(ratios)))])) if len(ratios) else 0.0
        a.stale = False

    def overused_reason(self, queue: str) -> str | None:
        """Why allocate skips an overused queue, naming its capability when that is its limit."""
        a = self.attrs.get(queue)
        if a is None:
            return None
        dims = np.ones(len(a.deserved), dtype=bool)
        if len(dims) > PODS:
            dims[PODS] = False
        full = [
            i
            for i in range(len(a.deserved))
            if dims[i] and a.deserved[i] <= a.allocated[i] + EPS and a.allocated[i] > 0
        ]
        if full and all(np.isfinite(a.capability[i]) and a.deserved[i] >= a.capability[i] - EPS for i in full):
            names = ", ".join(self._index.names[i] for i in full)
            return (
                f"queue {queue} has reached its capability in {names} "
                f"(capability {amounts(self._index, a.capability, names)})"
            )
        return None
