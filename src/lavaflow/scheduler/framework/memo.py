"""The memo service: what plugins, actions and the scheduler keep between sessions, and under what.

Every session visits every job, yet most jobs do not change from one session to the next. What
is derived from them is kept under what it was made of and taken back while that still holds.
This module is the one place that says how:

- :class:`JobRecord`: a value derived from one job, kept in ``JobInfo.memo`` under a key (the
  job's ``version`` or ``tasks_version``, or a tuple of what the value is made of), optionally
  with a *basis*: a slower key that, when it still matches at a new key, lets the value be
  re-stamped under the new key instead of worked out again (a PodGroup status write moves the
  job's version and leaves its tasks as they were).
- :class:`JobsRecord`: a value derived from all the session's jobs, kept in the cache under the
  session's jobs token (:func:`session_jobs_token`) and an extra key; a lookup says whether it
  is the *same* (reuse it), kept *since* the previous session's token (reuse it and revisit the
  jobs in ``Session.jobs_changed``) or kept under neither (work it out from all the jobs).
- :class:`CacheRecord`: a value kept in the cache under a key, for what does not follow jobs
  (the resolved HyperNode tree under the nodes' version, the water-filled shares of the queues).
- :func:`state`: a plugin's own state object kept in the cache across sessions, by name.

Each record is declared once at module level by its user (``DRF_SHARE = JobRecord("drf_share")``)
and read by name. A per-job loop that runs every session for every job may read the record's
entry inline (``kept = job.memo.get(REC.name)``, then ``kept.key`` / ``kept.value``): the same
entry, without a call per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..model import JobInfo
    from .session import Session

__all__ = [
    "MISS",
    "Assigned",
    "CacheRecord",
    "Found",
    "HasMemo",
    "JobRecord",
    "JobsRecord",
    "Kept",
    "Miss",
    "Reuse",
    "SessionJobs",
    "session_jobs_token",
    "state",
]

V = TypeVar("V")
T = TypeVar("T")


class Miss(Enum):
    """What a lookup gives when nothing is kept under the key (values may be None)."""

    MISS = "miss"


MISS = Miss.MISS


class HasMemo(Protocol):
    """The scheduler cache as this module sees it: a dict of what is kept across sessions."""

    plugin_memo: dict[str, Any]


class Kept(Generic[V]):
    """One kept value: ``value`` made under ``key`` (and ``basis``, what it is made of beyond the
    key, when the record re-stamps)."""

    __slots__ = ("basis", "key", "value")

    def __init__(self, key: Any, value: V, basis: Any = None) -> None:
        self.key = key
        self.value = value
        self.basis = basis

    def __repr__(self) -> str:
        return f"Kept(key={self.key!r}, value={self.value!r}, basis={self.basis!r})"


class JobRecord(Generic[V]):
    """A value derived from one job, kept in ``job.memo[name]`` as a :class:`Kept`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def kept(self, job: JobInfo) -> Kept[V] | None:
        """The entry, whatever its key (None when nothing was kept)."""
        return job.memo.get(self.name)

    def get(self, job: JobInfo, key: Any) -> V | Miss:
        """The value kept under a key equal to ``key``, else :data:`MISS`."""
        kept: Kept[V] | None = job.memo.get(self.name)
        if kept is not None and kept.key == key:
            return kept.value
        return MISS

    def put(self, job: JobInfo, key: Any, value: V, basis: Any = None) -> V:
        """Keep ``value`` under ``key`` (and ``basis``); returns ``value``. The job's entry is
        changed in place (it is read, never held, by the record's users)."""
        kept: Kept[V] | None = job.memo.get(self.name)
        if kept is None:
            job.memo[self.name] = Kept(key, value, basis)
        else:
            kept.key = key
            kept.value = value
            kept.basis = basis
        return value

    @staticmethod
    def restamp(kept: Kept[V], key: Any) -> V:
        """Keep the entry's value (and basis) under ``key`` now: what it was made of still holds
        at the job's new version. Returns the value."""
        kept.key = key
        return kept.value

    def get_on_basis(self, job: JobInfo, key: Any, basis: Any) -> V | Miss:
        """The value kept under ``key``; else, when it was made of an equal ``basis``, the same
        value re-stamped under ``key``; else :data:`MISS`."""
        kept: Kept[V] | None = job.memo.get(self.name)
        if kept is None:
            return MISS
        if kept.key == key:
            return kept.value
        if kept.basis == basis:
            kept.key = key
            return kept.value
        return MISS

    def drop(self, job: JobInfo) -> None:
        job.memo.pop(self.name, None)


class CacheRecord(Generic[V]):
    """A value kept in the cache (``cache.plugin_memo[name]``) under a key, across sessions."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def kept(self, cache: HasMemo) -> Kept[V] | None:
        return cache.plugin_memo.get(self.name)

    def last(self, cache: HasMemo) -> V | None:
        """The value last kept, whatever its key, for a caller that compares what it was made of
        itself (by identity, say); None when nothing was kept."""
        kept: Kept[V] | None = cache.plugin_memo.get(self.name)
        return None if kept is None else kept.value

    def get(self, cache: HasMemo, key: Any) -> V | Miss:
        kept: Kept[V] | None = cache.plugin_memo.get(self.name)
        if kept is not None and kept.key == key:
            return kept.value
        return MISS

    def put(self, cache: HasMemo, key: Any, value: V) -> V:
        cache.plugin_memo[self.name] = Kept(key, value)
        return value


class Reuse(Enum):
    """What a :class:`JobsRecord` lookup found, against a session's jobs token."""

    SAME = "same"  # kept under the session's token: reuse it as it is
    SINCE = "since"  # kept under the previous session's token: reuse it, revisit the changed jobs
    NONE = "none"  # neither: work it out from all the jobs


class Found(NamedTuple, Generic[V]):
    """A :meth:`JobsRecord.lookup`: how the kept value may be used, the value (None with
    ``Reuse.NONE``) and the jobs to revisit (with ``Reuse.SINCE``)."""

    how: Reuse
    value: V | None
    changed: frozenset[str]


class _JobsKept(Generic[V]):
    __slots__ = ("extra", "token", "value")

    def __init__(self, token: int, extra: Any, value: V) -> None:
        self.token = token
        self.extra = extra
        self.value = value


_NOTHING: frozenset[str] = frozenset()
_NOT_FOUND: Found[Any] = Found(Reuse.NONE, None, _NOTHING)


class JobsRecord(Generic[V]):
    """A value derived from all the session's jobs, kept in the cache under the session's jobs
    token and an extra key (the resource width, the GPU column, the cluster's total, ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def same(self, ssn: Session, extra: Any = None) -> V | Miss:
        """The value kept under ``ssn.jobs_token`` and an equal ``extra``, else :data:`MISS`."""
        kept: _JobsKept[V] | None = ssn.cache.plugin_memo.get(self.name)
        if kept is not None and kept.token == ssn.jobs_token and kept.extra == extra:
            return kept.value
        return MISS

    def since(self, ssn: Session, extra: Any = None) -> V | Miss:
        """The value kept under ``ssn.jobs_previous_token`` and an equal ``extra``, else
        :data:`MISS`: the same jobs in the same order, those in ``ssn.jobs_changed`` at new
        versions."""
        kept: _JobsKept[V] | None = ssn.cache.plugin_memo.get(self.name)
        if kept is not None and kept.token == ssn.jobs_previous_token and kept.extra == extra:
            return kept.value
        return MISS

    def lookup(self, ssn: Session, extra: Any = None) -> Found[V]:
        """:meth:`same`, else :meth:`since` (with the jobs to revisit), else nothing."""
        kept: _JobsKept[V] | None = ssn.cache.plugin_memo.get(self.name)
        if kept is not None and kept.extra == extra:
            if kept.token == ssn.jobs_token:
                return Found(Reuse.SAME, kept.value, _NOTHING)
            if kept.token == ssn.jobs_previous_token:
                return Found(Reuse.SINCE, kept.value, ssn.jobs_changed)
        return _NOT_FOUND

    def last(self, ssn: Session) -> V | None:
        """The value last kept, whatever its token and extra key, for a caller that keeps parts
        of it under keys of its own (the identities of the vectors a sum was made of)."""
        kept: _JobsKept[V] | None = ssn.cache.plugin_memo.get(self.name)
        return None if kept is None else kept.value

    def put(self, ssn: Session, value: V, extra: Any = None) -> V:
        """Keep ``value`` under ``ssn.jobs_token`` and ``extra``; returns ``value``."""
        memo = ssn.cache.plugin_memo
        kept: _JobsKept[V] | None = memo.get(self.name)
        if kept is None:
            memo[self.name] = _JobsKept(ssn.jobs_token, extra, value)
        else:
            kept.token = ssn.jobs_token
            kept.extra = extra
            kept.value = value
        return value


class Assigned(NamedTuple):
    """What a plugin assigned to a placed task and keeps across sessions (deviceshare's GPU
    memory per card, numa_aware's CPUs per NUMA node), on the node it was placed on."""

    node: int
    amounts: np.ndarray


def state(cache: HasMemo, name: str, factory: Callable[[], T]) -> T:
    """A plugin's state kept in the cache across sessions (made by ``factory`` the first time)."""
    memo = cache.plugin_memo
    got: T | None = memo.get(name)
    if got is None:
        got = memo[name] = factory()
    return got


class SessionJobs(NamedTuple):
    """What :func:`session_jobs_token` keeps: the last session's jobs (held, so that the identity
    comparison never meets a new object at a freed one's address), their versions and token."""

    jobs: tuple[JobInfo, ...]
    versions: Sequence[int]
    token: int


_SESSION_JOBS = "session-jobs"


def session_jobs_token(
    cache: HasMemo, jobs: tuple[JobInfo, ...], versions: list[int]
) -> tuple[int, int | None, frozenset[str]]:
    """(token, previous token, changed) of a session's jobs, as it opens.

    The token stays the same while the session's jobs are the same JobInfo objects, in the same
    order, at the same versions as when the previous session opened (versions only grow, so
    nothing changed in between); any other change gives a new token. When only versions moved,
    the previous token and the uids of the jobs whose version moved come with it (else None and
    nothing): a :class:`JobsRecord` kept under the previous token then revisits those jobs alone.
    """
    kept: SessionJobs | None = cache.plugin_memo.get(_SESSION_JOBS)
    if kept is not None and kept.jobs == jobs:
        if kept.versions == versions:
            return kept.token, None, _NOTHING
        previous: int | None = kept.token
        changed = frozenset([job.uid for job, v0, v1 in zip(jobs, kept.versions, versions) if v0 != v1])
    else:
        previous, changed = None, _NOTHING
    token = kept.token + 1 if kept is not None else 0
    cache.plugin_memo[_SESSION_JOBS] = SessionJobs(jobs, versions, token)
    return token, previous, changed
