"""Statement: tentative evictions, pipelines and allocations, committed or discarded as a whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import Eviction, TaskInfo, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

EVICT, PIPELINE, ALLOCATE = "evict", "pipeline", "allocate"

# (op, task, extra): extra is (status before the eviction, reason) for EVICT, None otherwise.
Operation = tuple[str, TaskInfo, "tuple[TaskStatus, Eviction] | None"]
_ALLOCATED, _PIPELINED = TaskStatus.ALLOCATED, TaskStatus.PIPELINED  # (globals: read per task placed)


class Statement:
    """Records operations against the session state; nothing reaches the cluster before commit.

    It uses only the session's state operations (``place``, ``unplace``, ``release``,
    ``unrelease``, ``bind``, ``evict``, ``notify_allocated``/``notify_deallocated``, ``track``).
    Each operation is recorded as soon as the state has changed and before the plugins' event
    handlers run, so that a discard (or the abort of a session that raised) undoes it.
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []
        ssn.track(self)

    def __len__(self) -> int:
        return len(self.operations)

    def allocate(self, task: TaskInfo, node: int) -> None:
        self.ssn.place(task, node, _ALLOCATED)
        self.operations.append((ALLOCATE, task, None))
        self.ssn.notify_allocated(task)

    def pipeline(self, task: TaskInfo, node: int) -> None:
        self.ssn.place(task, node, _PIPELINED)
        self.operations.append((PIPELINE, task, None))
        self.ssn.notify_allocated(task)

    def evict(self, task: TaskInfo, reason: Eviction) -> None:
        before = self.ssn.release(task)
        self.operations.append((EVICT, task, (before, reason)))
        self.ssn.notify_deallocated(task)

    def undo_evictions(self, mark: int) -> None:
        """Undo the evictions recorded since ``len(self) == mark`` (newest first) and forget them."""
        for op, task, extra in reversed(self.operations[mark:]):
            if op == EVICT and extra is not None:
                self.ssn.unrelease(task, extra[0])
                self.ssn.notify_allocated(task)
        del self.operations[mark:]

    def discard(self) -> None:
        """Undo every operation, newest first."""
        ssn = self.ssn
        for op, task, extra in reversed(self.operations):
            if op == EVICT:
                assert extra is not None
                ssn.unrelease(task, extra[0])
                ssn.notify_allocated(task)
            else:
                ssn.unplace(task)
                ssn.notify_deallocated(task)
        self.operations.clear()

    def commit(self) -> None:
        """Evictions reach the cluster, allocations are bound; pipelines stay in the session."""
        for op, task, extra in self.operations:
            if op == EVICT:
                assert extra is not None
                self.ssn.evict(task, extra[1])
            elif op == ALLOCATE:
                self.ssn.bind(task)
        self.operations.clear()

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations.clear()
