"""Tiresias-L (discretised 2D-LAS, Gu et al. NSDI'19), non-elastic, in two variants.

``Tiresias`` (:func:`tiresias_literature`) is the baseline the literature compares against, as the
Pollux artifact (OSDI'21) runs it: every job at its requested GPU count (and batch size), two
queues split at ``LITERATURE_THRESHOLD`` = 16 GPU-hours of attained service, no starvation
promotion, queue 0 in arrival order, queue 1 in the order jobs were demoted into it; in that order
each job gets its request if it fits, preempting the others.  Its scheduling tick is 60 s and every
(re)start pauses the job for the resize cost (30 s); both are properties of the run
(:class:`~.base.Policy` ``default_interval``), not of this function.

``Tiresias-Voda`` (:func:`tiresias`) is Voda's variant, documented below.

Voda's variant: jobs sit in priority queues by *attained service* (GPU-seconds) since their last promotion:
queue 0 below ``threshold`` (default 3600 GPU-s), queue 1 above; a job's JOB_PRIORITY is a floor
on its queue.  Within a queue jobs are ordered by first start time (never-started last), then
submission.  In that order each job gets its requested workers if they fit, preempting others.

Starvation: the simulator promotes a waiting job (resets its queue service to 0) once it has
waited ``promote_knob`` (8) times its last running time — with cumulative service, so, unlike
Voda, a promoted job is not demoted again on the next tick."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .base import JobView, per_pool
from .fifo import rigid_in_order

DEFAULT_THRESHOLDS = (3600.0,)
LITERATURE_THRESHOLD = 16 * 3600.0  # GPU-seconds (Pollux artifact: 3600 * 16)
LITERATURE_INTERVAL = 60.0  # seconds between scheduling rounds in the Pollux simulator


def queue_level(j: JobView, thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> int:
    level = sum(1 for th in thresholds if j.queue_service >= th)
    return max(level, min(j.priority, len(thresholds)))


def tiresias_order(jobs: list[JobView], thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> list[JobView]:
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
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, thresholds: Sequence[float] = DEFAULT_THRESHOLDS
) -> dict[str, int]:
    return rigid_in_order(tiresias_order(jobs, thresholds), gpus)


tiresias = per_pool(tiresias_pool)


def literature_order(jobs: list[JobView], threshold: float = LITERATURE_THRESHOLD) -> list[JobView]:
    """Queue 0 (attained service below ``threshold``) in arrival order, then queue 1 in demotion
    order (``queue_entered``; arrival order where unknown)."""

    def key(j: JobView) -> tuple[int, float, float, str]:
        if j.queue_service < threshold:
            return (0, j.submit_time, j.submit_time, j.name)
        entered = j.queue_entered if j.queue_entered is not None else j.submit_time
        return (1, entered, j.submit_time, j.name)

    return sorted(jobs, key=key)


def tiresias_literature_pool(
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, threshold: float = LITERATURE_THRESHOLD
) -> dict[str, int]:
    return rigid_in_order(literature_order(jobs, threshold), gpus)


tiresias_literature = per_pool(tiresias_literature_pool)
