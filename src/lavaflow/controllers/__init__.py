"""Controllers: Job, PodGroup, Queue (and, in later issues, gc), against the Store interface."""

from .job import JobController
from .podgroup import PodGroupController
from .queue import QueueController

__all__ = ["JobController", "PodGroupController", "QueueController"]
