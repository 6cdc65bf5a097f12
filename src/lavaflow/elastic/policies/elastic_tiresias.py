"""E-Tiresias (Voda ``ElasticTiresias``, after Wu et al., TPDS 2021), corrected.

1. In Tiresias order, each job gets its requested workers if they fit.
2. If more than ``compaction_trigger`` (10) jobs are still waiting, allocated jobs in the low
   priority queue shrink to their minimum.
3. The free GPUs then go greedily to the largest marginal speedup: a waiting job is worth
   ``speedup(min) / min`` per GPU (it needs its whole minimum), an allocated job
   ``speedup(n+1) - speedup(n)``; ties favour the higher-priority queue, then FIFO.  Stops when no
   positive gain fits.  Voda's version could hand a waiting job fewer than its minimum."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from .base import JobView, per_pool
from .tiresias import DEFAULT_THRESHOLDS, queue_level, tiresias_order


def elastic_tiresias_pool(
    jobs: list[JobView],
    gpus: int,
    now: float,
    gpu_type: str,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    compaction_trigger: int = 10,
) -> dict[str, int]:
    order = tiresias_order(jobs, thresholds)
    rank = {j.name: i for i, j in enumerate(order)}
    level = {j.name: queue_level(j, thresholds) for j in order}  # (a job's level is fixed here)
    free = gpus
    out: dict[str, int] = {}
    for j in order:
        n = j.clamp(j.requested)
        if n <= free:
            out[j.name] = n
            free -= n
    waiting = [j for j in order if j.name not in out]
    if len(waiting) > compaction_trigger:
        for j in order:
            if j.name in out and level[j.name] >= 1 and out[j.name] > j.min_workers:
                free += out[j.name] - j.min_workers
                out[j.name] = j.min_workers

    def gain(j: JobView) -> float:
        n = out.get(j.name, 0)
        if n == 0:
            return j.speedup(gpu_type, j.min_workers) / j.min_workers
        return j.speedup(gpu_type, n + 1) - j.speedup(gpu_type, n)

    heap = []
    for j in order:
        if out.get(j.name, 0) < j.max_workers:
            heap.append((-gain(j), level[j.name], rank[j.name], j))
    heapq.heapify(heap)
    while heap and free > 0:
        g, _, _, j = heapq.heappop(heap)
        if -g <= 0:
            break
        n = out.get(j.name, 0)
        step = j.min_workers if n == 0 else 1
        if step > free:
            continue  # cannot start this one; others may still fit
        out[j.name] = n + step
        free -= step
        if out[j.name] < j.max_workers:
            heapq.heappush(heap, (-gain(j), level[j.name], rank[j.name], j))
    return out


elastic_tiresias = per_pool(elastic_tiresias_pool)
