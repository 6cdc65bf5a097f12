"""ElasticFIFO (Voda's default), corrected.

Voda's rule: phase 1, in FIFO order each job gets its minimum if it fits (misfits do not block later
jobs); phase 2, while GPUs remain, walk the started jobs in FIFO order giving +1 to each below its
maximum (round robin).  Fixes (see docs/elastic.md, "ElasticFIFO / ElasticSRJF"):

* D1 only started jobs grow (Voda handed +1s to jobs that never got their minimum: 0 < n < min);
* D2 a job grows only while one more worker speeds it up (Voda's own TODO);
* D3 Voda's allocator is stateless: every reschedule recomputes the allocation from the minimums,
  so each arrival/completion moves running jobs by ±1 worker, and every move costs a
  checkpoint-restart (300-880 resizes per Pollux workload).  Here a running job keeps its current
  size unless growing it saves more remaining time than the resize costs, or GPUs it holds are
  needed by a job of higher priority in the policy's order;
* D4 a job about to finish is not shrunk: if shrinking costs it more time than it has left (the
  longest the other jobs would wait for its GPUs instead), it keeps them;
* D5 a *new* job is admitted only if its requested size fits (as the rigid policy admits it);
  Voda admitted any job whose minimum fits, so a 24-GPU minimum of a 15-hour imagenet job slipped
  into a gap and held it for hours, slowing every later job (workload 5: ElasticFIFO 1.9 h vs FIFO
  1.1 h).  Running jobs still stay as long as their minimum fits;
* D6 surplus GPUs go +1 at a time in the policy's order (SRJF: shortest first) instead of round
  robin, so the policy's priority also decides who grows.  ``sticky=False`` restores Voda's
  stateless round robin (with D1, D2).
"""

from __future__ import annotations

import math
from typing import Any

from .base import Assignment, JobView, fifo_key, per_pool


def _rem(j: JobView, gpu_type: str | None, n: int) -> float:
    if gpu_type is None:
        return math.inf
    return j.remaining_time(gpu_type, n)


def _speeds_up(j: JobView, gpu_type: str | None, n: int) -> bool:
    return gpu_type is None or j.rate(gpu_type, n + 1) > j.rate(gpu_type, n)


def worth_resizing(j: JobView, gpu_type: str | None, n0: int, n1: int, resize_cost: float) -> bool:
    """Growing a running job from ``n0`` to ``n1`` pays off: it then finishes earlier even after
    the ``resize_cost`` pause (remaining work / rate at each size)."""
    if gpu_type is None:
        return True
    return _rem(j, gpu_type, n0) - _rem(j, gpu_type, n1) > resize_cost


def shrink_loss(j: JobView, gpu_type: str | None, n0: int, n1: int, resize_cost: float) -> float:
    """Extra time a running job needs when shrunk from ``n0`` to ``n1`` (pause included)."""
    if gpu_type is None:
        return resize_cost
    return resize_cost + _rem(j, gpu_type, n1) - _rem(j, gpu_type, n0)


def _round_robin(
    order: list[JobView], alloc: dict[str, int], free: int, gpu_type: str | None, frozen: set[str]
) -> dict[str, int]:
    out = dict(alloc)
    while free > 0:
        grew = False
        for j in order:
            if free == 0:
                break
            n = out[j.name]
            if j.name not in frozen and n < j.max_workers and _speeds_up(j, gpu_type, n):
                out[j.name] += 1
                free -= 1
                grew = True
        if not grew:
            break
    return out


def elastic_in_order(
    order: list[JobView],
    gpus: int,
    gpu_type: str | None = None,
    resize_cost: float = 30.0,
    sticky: bool = True,
) -> dict[str, int]:
    """Voda's two phases over ``order`` with fixes D1–D5 (module docstring).  ``gpu_type`` gives
    the policy the jobs' speed curves (``None``: speed-blind).  ``sticky=False`` is Voda's
    stateless rule (with D1, D2 only), kept for comparison."""
    free = gpus
    run: list[JobView] = []
    cur: dict[str, int] = {}
    for j in order:
        c = j.current_workers if (gpu_type is None or j.current_type in (None, gpu_type)) else 0
        # phase 1: a running job stays if its minimum fits (Voda); D5: a new job is admitted
        # only if its requested size fits, as the rigid policy would admit it
        need = j.min_workers if (c or not sticky) else j.clamp(j.requested)
        if need <= free:
            run.append(j)
            cur[j.name] = c
            free -= j.min_workers
    if not sticky:
        return _round_robin(run, {j.name: j.min_workers for j in run}, free, gpu_type, set())
    # phase 2 target from scratch: minimums, then +1s in priority order while they speed up
    tgt = _grow_in_order(run, {j.name: j.min_workers for j in run}, free, gpu_type, cur, 0.0)
    # D3: a running job keeps its size when the change does not pay for its resize (growth)
    # or would cost it more than it has left (D4, shrink of a job about to finish)
    out = dict(tgt)
    for j in run:
        c, t = cur[j.name], tgt[j.name]
        if not c or c == t:
            continue
        if t > c and not worth_resizing(j, gpu_type, c, t, resize_cost):
            out[j.name] = c
        elif t < c and shrink_loss(j, gpu_type, c, t, resize_cost) >= _rem(j, gpu_type, c):
            out[j.name] = c
    used = sum(out.values())
    for j in reversed(run):  # over capacity: kept jobs shrink after all, lowest priority first
        if used <= gpus:
            break
        if out[j.name] > tgt[j.name]:
            d = min(out[j.name] - tgt[j.name], used - gpus)
            out[j.name] -= d
            used -= d
    # GPUs left over by kept jobs: growth in priority order, if it pays for the resize
    return _grow_in_order(run, out, gpus - used, gpu_type, cur, resize_cost)


def _grow_in_order(
    run: list[JobView],
    alloc: dict[str, int],
    free: int,
    gpu_type: str | None,
    cur: dict[str, int],
    resize_cost: float,
) -> dict[str, int]:
    out = dict(alloc)
    for j in run:
        n0 = out[j.name]
        n = n0
        while free > 0 and n < j.max_workers and _speeds_up(j, gpu_type, n):
            n += 1
            free -= 1
        c = cur.get(j.name, 0)
        if resize_cost and c and n > n0 == c and not worth_resizing(j, gpu_type, c, n, resize_cost):
            free += n - n0
            n = n0
        out[j.name] = n
    return out


def elastic_fifo_pool(
    jobs: list[JobView], gpus: int, now: float, gpu_type: str, resize_cost: float = 30.0, sticky: bool = True
) -> dict[str, int]:
    return elastic_in_order(sorted(jobs, key=fifo_key), gpus, gpu_type, resize_cost, sticky)


def elastic_fifo(
    jobs: list[JobView], capacity: dict[str, int], now: float, resize_cost: float = 30.0, sticky: bool = True, **_: Any
) -> dict[str, Assignment]:
    return per_pool(elastic_fifo_pool)(jobs, capacity, now, resize_cost=resize_cost, sticky=sticky)
