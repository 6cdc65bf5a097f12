"""Priority queues ordered by the session's combined order functions."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any


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


def starving_jobs_by_queue(ssn) -> dict[str, OrderedQueue]:
    """Admitted, valid jobs with pending tasks that are starving, per queue in job order (preempt, reclaim)."""
    from ..api import TaskStatus

    per_queue: dict[str, OrderedQueue] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or not job.counts[TaskStatus.PENDING]:
            continue
        if not ssn.job_valid(job)[0] or not ssn.job_starving(job):
            continue
        per_queue.setdefault(job.queue, OrderedQueue(ssn.job_key)).push(job)
    return per_queue
