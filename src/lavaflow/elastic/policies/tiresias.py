"""Tiresias-L (discretised 2D-LAS, Gu et al. NSDI'19), non-elastic.

Jobs sit in priority queues by *attained service* (GPU-seconds) since their last promotion:
queue 0 below ``threshold`` (default 3600 GPU-s), queue 1 above; a job's JOB_PRIORITY is a floor
on its queue.  Within a queue jobs are ordered by first start time (never-started last), then
submission.  In that order each job gets its requested workers if they fit, preempting others.

Starvation: the simulator promotes a waiting job (resets its queue service to 0) once it has
waited ``promote_knob`` (8) times its last running time — with cumulative service, so, unlike
Voda, a promoted job is not demoted again on the next tick."""

from __future__ import annotations

import math

from .base import JobView, per_pool
from .fifo import rigid_in_order

DEFAULT_THRESHOLDS = (3600.0,)


def queue_level(j: JobView, thresholds=DEFAULT_THRESHOLDS) -> int:
    level = sum(1 for th in thresholds if j.queue_service >= th)
    return max(level, min(j.priority, len(thresholds)))


def tiresias_order(jobs: list[JobView], thresholds=DEFAULT_THRESHOLDS) -> list[JobView]:
    return sorted(
        jobs,
        key=lambda j: (
            queue_level(j, thresholds),
            j.first_start if j.first_start is not None else math.inf,
            j.submit_time,
            j.name,
        ),
    )


def tiresias_pool(
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, thresholds=DEFAULT_THRESHOLDS
) -> dict[str, int]:
    return rigid_in_order(tiresias_order(jobs, thresholds), gpus)


tiresias = per_pool(tiresias_pool)
