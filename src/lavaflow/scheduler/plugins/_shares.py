"""Helpers shared by the plugins that account for admitted (Inqueue/Running) PodGroups."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..model import ALLOCATED

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo


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
    # Read by several plugins in every session: kept under the job's version (a read-only array).
    key = (job.version, job.sphase, width)
    known = job.memo.get("reserved")
    if known is not None and known[0] == key:
        return known[1]  # type: ignore[no-any-return]
    phase = job.sphase or job.phase
    left: np.ndarray | None = None
    if phase == "Inqueue" or (phase == "Running" and job.allocated_num >= job.min_available):
        left = np.maximum(job.min_resources - job.allocated_view(width), 0.0)
        if left.any():
            left.flags.writeable = False
            left = same_bits(left, known[1] if known is not None else None)
        else:
            left = None
    job.memo["reserved"] = (key, left)
    return left


def elastic_of(job: JobInfo, width: int) -> np.ndarray:
    """Resources a job holds beyond its minResources (preemptible headroom)."""
    if job.min_resources is None:
        return np.zeros(width)
    key = (job.version, width)
    known = job.memo.get("elastic")
    if known is not None and known[0] == key:
        return known[1]  # type: ignore[no-any-return]
    extra: np.ndarray = np.maximum(job.allocated_view(width) - job.min_resources, 0.0)
    extra.flags.writeable = False  # kept under the job's version: callers only read it
    kept = same_bits(extra, known[1] if known is not None else None)
    assert kept is not None
    job.memo["elastic"] = (key, kept)
    return kept


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
