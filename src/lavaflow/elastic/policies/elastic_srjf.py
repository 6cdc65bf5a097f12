"""ElasticSRJF (Voda ``ElasticSRJF``), corrected: ElasticFIFO's two phases in shortest-remaining
order, with the same fixes D1–D4 (see :mod:`.elastic_fifo`).  Voda's version also let jobs already
at their maximum keep growing (n > max); not here."""

from __future__ import annotations

from .base import JobView, per_pool
from .elastic_fifo import elastic_in_order
from .srjf import srjf_key


def elastic_srjf_pool(
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, resize_cost: float = 30.0, sticky: bool = True
) -> dict[str, int]:
    return elastic_in_order(sorted(jobs, key=srjf_key(gpu_type)), gpus, gpu_type, resize_cost, sticky)


def elastic_srjf(jobs, capacity, now, resize_cost: float = 30.0, sticky: bool = True, **_):
    return per_pool(elastic_srjf_pool)(jobs, capacity, now, resize_cost=resize_cost, sticky=sticky)
