"""Statement: tentative evictions, pipelines and allocations, committed or discarded as a whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import TaskInfo, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

EVICT, PIPELINE, ALLOCATE = "evict", "pipeline", "allocate"


class Statement:
    """Records operations against the session state; nothing reaches the cluster before commit."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        # (op, task, extra): extra is the pre-evict status or the eviction reason.
        self.operations: list[tuple[str, TaskInfo, object]] = []

    def __len__(self) -> int:
        return len(self.operations)

    def allocate(self, task: TaskInfo, node: int) -> None:
        job = self.ssn.jobs[task.job]
        self.ssn._place(job, task, node, TaskStatus.ALLOCATED)
        self.operations.append((ALLOCATE, task, None))

    def pipeline(self, task: TaskInfo, node: int) -> None:
        job = self.ssn.jobs[task.job]
        self.ssn._place(job, task, node, TaskStatus.PIPELINED)
        self.operations.append((PIPELINE, task, None))

    def evict(self, task: TaskInfo, reason: str) -> None:
        job = self.ssn.jobs[task.job]
        before = self.ssn._release(job, task)
        self.operations.append((EVICT, task, (before, reason)))

    def discard(self) -> None:
        """Undo every operation, newest first."""
        for op, task, extra in reversed(self.operations):
            job = self.ssn.jobs[task.job]
            if op == EVICT:
                before, _reason = extra  # type: ignore[misc]
                self.ssn._unrelease(job, task, before)
            else:
                if op == PIPELINE and task in self.ssn.pipelined:
                    self.ssn.pipelined.remove(task)
                self.ssn._unplace(job, task)
        self.operations.clear()

    def commit(self) -> None:
        """Evictions reach the cluster, allocations are bound; pipelines stay in the session."""
        for op, task, extra in self.operations:
            if op == EVICT:
                _before, reason = extra  # type: ignore[misc]
                self.ssn.cache.evict(task, reason)
            elif op == ALLOCATE:
                self.ssn.dispatch(self.ssn.jobs[task.job], task)
        self.operations.clear()

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations.clear()
