"""ElasticSRJF (Voda ``ElasticSRJF``), corrected: ElasticFIFO's two phases in shortest-remaining
order, growing a job only while a
worker more still speeds it up.  Voda's version let jobs already at their maximum keep growing (n > max); not here."""

from __future__ import annotations

from .base import JobView, per_pool
from .elastic_fifo import elastic_in_order
from .srjf import srjf_key


def elastic_srjf_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    return elastic_in_order(sorted(jobs, key=srjf_key(gpu_type)), gpus, gpu_type)


elastic_srjf = per_pool(elastic_srjf_pool)
