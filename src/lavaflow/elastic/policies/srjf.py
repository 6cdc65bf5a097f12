"""SRJF (Voda ``SRJF``): like FIFO but in order of estimated remaining time (remaining work at one
worker, Voda's estimate), shortest first; ties by submission."""

from __future__ import annotations

from collections.abc import Callable

from .base import JobView, per_pool
from .fifo import rigid_in_order


def srjf_key(gpu_type: str) -> Callable[[JobView], tuple[float, float, str]]:
    return lambda j: (j.remaining_time(gpu_type, 1), j.submit_time, j.name)


def srjf_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    return rigid_in_order(sorted(jobs, key=srjf_key(gpu_type)), gpus)


srjf = per_pool(srjf_pool)
