"""Controllers: Job, JobFlow, PodGroup, Queue and garbage collection, against the Store interface.

:func:`build_controllers` builds them for both backends (the simulator and the cluster)."""

from .build import Controllers, build_controllers
from .gc import GarbageCollector
from .job import JobController
from .jobflow import JobFlowController
from .podgroup import PodGroupController
from .queue import QueueController

__all__ = [
    "Controllers",
    "build_controllers",
    "GarbageCollector",
    "JobController",
    "JobFlowController",
    "PodGroupController",
    "QueueController",
]
