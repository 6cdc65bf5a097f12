"""Helpers shared by the plugins that account for admitted (Inqueue/Running) PodGroups."""

from __future__ import annotations

import numpy as np

from ..api import ALLOCATED


def reserved_by_admission(job, width: int) -> np.ndarray:
    """The part of an admitted PodGroup's minResources not yet allocated.

    Counted for Inqueue PodGroups and for Running ones with at least minMember
    tasks allocated, so that pods a running driver creates later (Spark
    executors) still find the room the PodGroup was admitted for.
    """
    if job.min_resources is None:
        return np.zeros(width)
    phase = job.sphase or job.phase
    if phase == "Inqueue":
        return np.maximum(job.min_resources - job.allocated_vector(width), 0.0)
    if phase == "Running" and job.count(ALLOCATED) >= job.min_available:
        return np.maximum(job.min_resources - job.allocated_vector(width), 0.0)
    return np.zeros(width)


def elastic_of(job, width: int) -> np.ndarray:
    """Resources a job holds beyond its minResources (preemptible headroom)."""
    if job.min_resources is None:
        return np.zeros(width)
    return np.maximum(job.allocated_vector(width) - job.min_resources, 0.0)
