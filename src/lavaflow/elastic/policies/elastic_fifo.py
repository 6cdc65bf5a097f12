"""ElasticFIFO (Voda's default), corrected.

Phase 1: in FIFO order each job gets its minimum if it fits (misfits do not block later jobs).
Phase 2: while GPUs remain, walk the started jobs in FIFO order giving +1 to each below its
maximum (round robin).  Voda also handed +1s to jobs that never got their minimum (producing
0 < n < min); here only started jobs grow."""

from __future__ import annotations

from .base import JobView, fifo_key, per_pool


def elastic_in_order(order: list[JobView], gpus: int, gpu_type: str | None = None) -> dict[str, int]:
    """Phase 1 + phase 2 over ``order``.  With ``gpu_type`` (policies that have job info) a job only
    grows while one more worker still speeds it up — the fix Voda's own TODO asks for."""
    free = gpus
    out: dict[str, int] = {}
    for j in order:
        if j.min_workers <= free:
            out[j.name] = j.min_workers
            free -= j.min_workers
    started = [j for j in order if j.name in out]
    while free > 0:
        grew = False
        for j in started:
            if free == 0:
                break
            n = out[j.name]
            if n < j.max_workers and (
                gpu_type is None or j.rate(gpu_type, n + 1) > j.rate(gpu_type, n)
            ):
                out[j.name] += 1
                free -= 1
                grew = True
        if not grew:
            break
    return out


def elastic_fifo_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    return elastic_in_order(sorted(jobs, key=fifo_key), gpus)


elastic_fifo = per_pool(elastic_fifo_pool)
