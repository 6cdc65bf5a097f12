"""FIFO (Voda ``FIFO``), non-elastic: in submission order, each job gets its requested workers
(NUM_PROC, clamped to [min, max]) if they fit, else waits.  A job that does not fit does not block
later, smaller jobs.  Voda hands out MIN_NUM_PROC; we give the request, which equals Voda's
behaviour for rigid jobs (min = max) and is what the user asked for otherwise."""

from __future__ import annotations

from .base import JobView, fifo_key, per_pool


def fifo_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    return rigid_in_order(sorted(jobs, key=fifo_key), gpus)


def rigid_in_order(order: list[JobView], gpus: int) -> dict[str, int]:
    free = gpus
    out: dict[str, int] = {}
    for j in order:
        n = j.clamp(j.requested)
        if n <= free:
            out[j.name] = n
            free -= n
    return out


fifo = per_pool(fifo_pool)
