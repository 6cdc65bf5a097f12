"""The one place that builds the controllers, for both backends.

The simulator (``sim/engine.py``) and ``lavaflow controller`` on a cluster
(``kube/controller_process.py``) run the same controllers, built here with the same arguments
and kept in the same order (the order they reconcile in). The simulator adds what it stands in
for besides (kube-controller-manager's workload controllers); the cluster has its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import Controller
from .gc import GarbageCollector
from .job import JobController
from .jobflow import JobFlowController
from .podgroup import PodGroupController
from .queue import QueueController


@dataclass(frozen=True)
class Controllers:
    jobflow: JobFlowController
    podgroup: PodGroupController
    job: JobController
    queue: QueueController
    gc: GarbageCollector

    def all(self) -> list[Controller]:
        """Every controller, in the order they reconcile."""
        return [self.jobflow, self.podgroup, self.job, self.queue, self.gc]


def priority_from_store(store: Any) -> Callable[[str | None], int]:
    """A PriorityClass's value looked up in the store (the global default for no name, else 0)."""

    def priority_of(name: str | None) -> int:
        if not name:
            for pc in store.list("PriorityClass"):
                if pc.global_default:
                    return int(pc.value)
            return 0
        pc = store.get("PriorityClass", name)
        return int(pc.value) if pc is not None else 0

    return priority_of


def build_controllers(
    store: Any,
    clock: Callable[[], float],
    scheduler_names: tuple[str, ...],
    priority_of: Callable[[str | None], int] | None = None,
) -> Controllers:
    """The controllers of both backends, against ``store`` on ``clock``.

    ``scheduler_names`` are the schedulerNames whose bare pods and native workloads get
    PodGroups; ``priority_of`` gives a PriorityClass's value (default: looked up in the store).
    """
    return Controllers(
        jobflow=JobFlowController(store, clock),
        podgroup=PodGroupController(store, clock, scheduler_names),
        job=JobController(store, clock, priority_of=priority_of or priority_from_store(store)),
        queue=QueueController(store, clock),
        gc=GarbageCollector(store, clock),
    )
