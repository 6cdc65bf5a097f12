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
