"""Priority queues ordered by the session's combined order functions."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session


class OrderedQueue:
    """A heap whose order is a session cmp function (first = smallest)."""

    def __init__(self, key: Callable[[Any], Any], items: Iterable[Any] = ()) -> None:
        self._key = key
        self._seq = itertools.count()
        self._heap: list[tuple[Any, int, Any]] = []
        for item in items:
            self.push(item)

    def push(self, item: Any) -> None:
        heapq.heappush(self._heap, (self._key(item), next(self._seq), item))

    def pop(self) -> Any:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)


class NamespacedJobs:
    """A queue's jobs when a plugin orders namespaces (drf enableNamespaceOrder): each pop takes
    the next job of the namespace that comes first now (Volcano before 1.8)."""

    def __init__(self, ssn: Session) -> None:
        self._ssn = ssn
        self._by_ns: dict[str, OrderedQueue] = {}

    def push(self, job: Any) -> None:
        q = self._by_ns.get(job.namespace)
        if q is None:
            q = self._by_ns[job.namespace] = OrderedQueue(self._ssn.job_key)
        q.push(job)

    def pop(self) -> Any:
        order = self._ssn.namespace_order
        best: str | None = None
        for ns, q in self._by_ns.items():
            if q and (best is None or order(ns, best) < 0):
                best = ns
        assert best is not None, "pop from an empty queue"
        return self._by_ns[best].pop()

    def __len__(self) -> int:
        return sum(len(q) for q in self._by_ns.values())

    def __bool__(self) -> bool:
        return any(self._by_ns.values())


# A queue's jobs, ordered.
JobQueue = OrderedQueue | NamespacedJobs


def job_queue(ssn: Session) -> JobQueue:
    """A queue's jobs in job order (per namespace when a plugin orders namespaces)."""
    return NamespacedJobs(ssn) if ssn.fns.get("NamespaceOrder") else OrderedQueue(ssn.job_key)


def starving_jobs_by_queue(ssn: Session) -> dict[str, OrderedQueue]:
    """Admitted, valid jobs with pending tasks that are starving, per queue in job order (preempt, reclaim)."""
    from ..model import TaskStatus

    per_queue: dict[str, OrderedQueue] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or not job.counts[TaskStatus.PENDING]:
            continue
        if not ssn.job_valid(job)[0] or not ssn.job_starving(job):
            continue
        per_queue.setdefault(job.queue, OrderedQueue(ssn.job_key)).push(job)
    return per_queue
