"""Controllers: Job, JobFlow, PodGroup, Queue and garbage collection, against the Store interface."""

from .gc import GarbageCollector
from .job import JobController
from .jobflow import JobFlowController
from .podgroup import PodGroupController
from .queue import QueueController

__all__ = ["GarbageCollector", "JobController", "JobFlowController", "PodGroupController", "QueueController"]
