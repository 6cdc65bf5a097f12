"""ElasticSRJF (Voda ``ElasticSRJF``), corrected.

Voda's rule is ElasticFIFO's two phases (everyone at the minimum, then +1s) in shortest-remaining
order.  Under load that runs *every* job at its minimum — the shortest jobs too, which SRJF exists
to finish first — and re-derives sizes from the minimums on every reschedule, so running jobs
flap by ±1 (each move a checkpoint-restart).  With the ElasticFIFO fixes D1–D6 it still only tied
rigid SRJF (mean 0.847 h vs 0.846 h on the Pollux workloads).  Voda's version also let jobs at
their maximum keep growing (n > max); not here.

Here the elasticity is used only where rigid SRJF would leave value on the table (fixes E1–E4,
docs/elastic.md), in SRJF order (remaining work at one worker, shortest first):

* E1 sticky sizes: a running job's base size is its current size, a new job's its request; jobs
  get their base in SRJF order as rigid SRJF would (a running job is not re-derived from its
  minimum on every event, so it only changes size when a shorter job needs its GPUs or surplus
  pays for a resize);
* E2 shrink instead of halt: a running job whose base no longer fits next to shorter jobs keeps
  running on what is left if that is at least its minimum (rigid SRJF preempts it, Voda shrank it
  to its minimum even when nobody needed the GPUs);
* E3 elastic admission: waiting jobs whose request does not fit start, shortest first, on the
  GPUs left over (at least their minimum, at most their request) instead of leaving them idle;
* E4 surplus in SRJF order: GPUs still free go +1 at a time to the shortest jobs first while one
  more worker speeds a job up; growing a running job past its current size must save more
  remaining time than the resize pause (D3), so no resize is made for less gain than it costs.

``sticky=False`` keeps the previous rule (ElasticFIFO's phases with D1–D6 in SRJF order) for
comparison.
"""

from __future__ import annotations

from typing import Any

from .base import Assignment, JobView, per_pool
from .elastic_fifo import _speeds_up, elastic_in_order, worth_resizing
from .srjf import srjf_key


def elastic_by_priority(
    order: list[JobView], gpus: int, gpu_type: str | None = None, resize_cost: float = 30.0
) -> dict[str, int]:
    """Rules E1–E4 (module docstring) over ``order`` (highest priority first)."""
    free = gpus
    out: dict[str, int] = {}
    cur: dict[str, int] = {}
    deferred: list[JobView] = []
    for j in order:
        c = j.current_workers if (gpu_type is None or j.current_type in (None, gpu_type)) else 0
        c = c if j.min_workers <= c <= j.max_workers else 0
        cur[j.name] = c
        base = c or j.clamp(j.requested)  # E1
        if base <= free:
            out[j.name] = base
            free -= base
        elif c and free >= j.min_workers:  # E2
            out[j.name] = free
            free = 0
        else:
            deferred.append(j)
    for j in deferred:  # E3
        if free >= j.min_workers:
            n = min(free, j.clamp(j.requested))
            out[j.name] = n
            free -= n
    for j in order:  # E4
        n0 = out.get(j.name, 0)
        if not n0:
            continue
        n = n0
        while free > 0 and n < j.max_workers and _speeds_up(j, gpu_type, n):
            n += 1
            free -= 1
        c = cur[j.name]
        if c and n > c and not worth_resizing(j, gpu_type, c, n, resize_cost):
            free += n - max(n0, c)
            n = max(n0, c)
        out[j.name] = n
    return out


def elastic_srjf_pool(
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, resize_cost: float = 30.0, sticky: bool = True
) -> dict[str, int]:
    order = sorted(jobs, key=srjf_key(gpu_type))
    if not sticky:
        return elastic_in_order(order, gpus, gpu_type, resize_cost, True)
    return elastic_by_priority(order, gpus, gpu_type, resize_cost)


def elastic_srjf(
    jobs: list[JobView], capacity: dict[str, int], now: float, resize_cost: float = 30.0, sticky: bool = True, **_: Any
) -> dict[str, Assignment]:
    return per_pool(elastic_srjf_pool)(jobs, capacity, now, resize_cost=resize_cost, sticky=sticky)
