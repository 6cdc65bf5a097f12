"""``Pollux``: the literature baseline for adaptive-batch jobs (Qiao et al., OSDI'21), as its
artifact configures it.

Objective (per scheduling round, every 60 s): maximise the generalised (power) mean with
``p = -1`` of every job's *speed-up* — its goodput on the allocation over its goodput on a fair
share of the cluster (``⌈GPUs / jobs⌉`` workers) — scaled so that a node's worth of fair share is
1, plus 1e-3; a job whose allocation changes has its speed-up multiplied by the *restart penalty*
``max(age − restarts · 30 s, 0) / (age + 30 s)`` (age: time since submission).  With ``p = -1``
the mean is a harmonic one: a job with nothing counts ``1 / 1e-3``, so the objective first gives
every job something, then grows jobs where goodput rises most.

Speed-ups come from the jobs' *learned* models (the rates the elastic plugin hands every policy:
fitted from what each job reported, a linear placeholder before its first report, and at most
twice the workers it was measured on, which is the artifact's ``max_replicas``).

Search.  The artifact runs NSGA-II (population 100, 100 generations) over job × node replica
matrices.  Here placement is the elastic action's (consolidated, fewest moves), so the search is
over each job's worker count (and GPU type).  The objective is then separable: minimise
``Σ_j 1 / (s_j(n_j) + 1e-3)`` subject to the GPUs per type.  With one GPU type that is a
knapsack, solved exactly by dynamic programming over the jobs (it reaches exhaustive search's
objective: tests/elastic/test_pollux_policy.py).  With several types a lazy greedy takes, again and
again, the allocation step (any larger size, not only +1, so that dips in measured curves and the
restart penalty's jump are crossed) with the largest decrease of that sum per GPU that still fits,
which is optimal for convex per-job terms only.  Jobs may be halted (``min_replicas = 0`` in the artifact):
a job gets 0 or a size in its range.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .base import Assignment, JobView

EPS = 1e-3  # the artifact's offset in the power mean
RESTART_DELAY = 30.0  # the artifact's restart delay in the penalty (its rescale time)


def _costs(j: JobView, t: str, base: float, now: float, scale: float, delay: float) -> list[float]:
    """1 / (scaled speed-up + EPS) of ``j`` on 0..max workers of type ``t``."""
    age = max(now - j.submit_time, 0.0)
    factor = max(age - j.restarts * delay, 0.0) / (age + delay) if age + delay > 0 else 0.0
    out = [1.0 / EPS]
    same_type = j.current_type == t or j.current_workers == 0
    # j.rate(t, n), read off the curve here (every job, size and round: the policy's inner loop)
    r = j.rates.get(t)
    last = len(r) - 1 if r is not None else 0
    lo, now_n = j.min_workers, j.current_workers
    for n in range(1, j.max_workers + 1):
        if n < lo:
            out.append(math.inf)
            continue
        rate = (r[n] if n < last else r[last]) if r is not None else 0.0
        s = rate / base * scale if base > 0 else 0.0
        if not (n == now_n and same_type):
            s *= factor
        out.append(1.0 / (s + EPS))
    if j.current_workers:
        out[0] = 1.0 / EPS  # halted: speed-up 0 whatever the penalty
    return out


def pollux(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    resize_cost: float = RESTART_DELAY,
    p: float = -1.0,
    gpus_per_node: float = 4.0,
) -> dict[str, Assignment]:
    if p != -1.0:
        raise ValueError("pollux: only p = -1 (the artifact's power mean) is implemented")
    types = sorted(t for t, c in capacity.items() if c > 0)
    if not jobs or not types:
        return {}
    total = sum(capacity[t] for t in types)
    fair = max(math.ceil(total / len(jobs)), 1)
    scale = 1.0 / max(gpus_per_node, 1.0)  # the artifact's dominant share x nodes: speed-up per node
    delay = resize_cost if resize_cost > 0 else RESTART_DELAY
    order = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    costs: dict[tuple[int, str], list[float]] = {}
    for i, j in enumerate(order):
        for t in j.types(capacity):
            if t not in types or t not in j.rates:
                continue
            base = j.rate_fn(t, fair) if j.rate_fn is not None else j.rate(t, min(fair, j.max_workers))
            costs[(i, t)] = _costs(j, t, base, now, scale, delay)
    if len(types) == 1:
        return _exact(order, costs, types[0], capacity[types[0]])
    free = dict((t, capacity[t]) for t in types)
    size = [0] * len(order)
    kind: list[str | None] = [None] * len(order)

    def best_step(i: int) -> tuple[float, int, str] | None:
        """The step of job ``i`` with the largest cost decrease per GPU that fits now."""
        j = order[i]
        best: tuple[float, int, str] | None = None
        k = kind[i]
        for t in [k] if k is not None else types:
            c = costs.get((i, t))
            if c is None:
                continue
            n0 = size[i]
            here = c[n0]
            room = free[t]
            for n in range(max(n0 + 1, j.min_workers), min(j.max_workers, n0 + room) + 1):
                gain = (here - c[n]) / (n - n0)
                if gain > 1e-12 and (best is None or gain > best[0] + 1e-15):
                    best = (gain, n, t)
        return best

    heap: list[tuple[float, int, int, str]] = []
    for i in range(len(order)):
        b = best_step(i)
        if b is not None:
            heapq.heappush(heap, (-b[0], i, b[1], b[2]))
    while heap:  # (one entry per job)
        neg, i, _n, _t = heapq.heappop(heap)
        fresh = best_step(i)
        if fresh is None:
            continue
        if fresh[0] < -neg - 1e-15:  # worth less now (GPUs went to others): back in line
            heapq.heappush(heap, (-fresh[0], i, fresh[1], fresh[2]))
            continue
        _, n, t = fresh
        free[t] -= n - size[i]
        size[i], kind[i] = n, t
        b = best_step(i)
        if b is not None:
            heapq.heappush(heap, (-b[0], i, b[1], b[2]))
    return {order[i].name: Assignment(kt, size[i]) for i in range(len(order)) if size[i] and (kt := kind[i])}


@lru_cache(maxsize=256)
def _steps(cap: int, sizes: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``_exact``'s step with ``sizes`` sizes (0..sizes-1) of a job under ``cap`` GPUs: whether
    size n fits in k GPUs, and the GPUs left for the jobs before (0 where it does not fit), per
    (k, n). The same for every job of that many sizes (only read)."""
    take = np.arange(cap + 1)[:, None] - np.arange(sizes)[None, :]
    return take >= 0, np.maximum(take, 0)


def _exact(order: list[JobView], costs: dict[tuple[int, str], list[float]], t: str, cap: int) -> dict[str, Assignment]:
    """The allocation of one GPU type with the smallest ``Σ 1 / (speed-up + EPS)``: a knapsack
    solved by dynamic programming over the jobs (best[k] = the least sum with at most k GPUs),
    each job one min-plus step over its sizes; ties keep the smaller size."""
    ks = np.arange(cap + 1)
    best = np.zeros(cap + 1)
    choices = []
    for i, _j in enumerate(order):
        c = np.array(costs.get((i, t), [1.0 / EPS]), dtype=float)[: cap + 1]
        fits, left = _steps(cap, len(c))
        total = np.where(fits, best[left] + c[None, :], math.inf)
        n = np.argmin(total, axis=1)
        best = total[ks, n]
        choices.append(n)
    out: dict[str, Assignment] = {}
    k = cap
    for i in range(len(order) - 1, -1, -1):
        n = int(choices[i][k])
        if n:
            out[order[i].name] = Assignment(t, n)
        k -= n
    first: dict[str, int] = {}  # each name's first place in ``order`` (list.index's answer)
    for i, j in enumerate(order):
        first.setdefault(j.name, i)
    return dict(sorted(out.items(), key=lambda kv: first[kv[0]]))


def objective(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    result: dict[str, Assignment],
    resize_cost: float = RESTART_DELAY,
    gpus_per_node: float = 4.0,
) -> float:
    """Pollux's objective (the p = -1 power mean of scaled, penalised speed-ups) of ``result``."""
    total = sum(c for c in capacity.values() if c > 0)
    fair = max(math.ceil(total / max(len(jobs), 1)), 1)
    scale = 1.0 / max(gpus_per_node, 1.0)
    acc = 0.0
    for j in jobs:
        a = result.get(j.name)
        t = a.gpu_type if a else (j.current_type or next(iter(sorted(capacity)), ""))
        base = j.rate_fn(t, fair) if j.rate_fn is not None else j.rate(t, min(fair, j.max_workers))
        c = _costs(j, t, base, now, scale, resize_cost if resize_cost > 0 else RESTART_DELAY)
        acc += c[a.workers if a else 0]
    return len(jobs) / acc if acc > 0 else 0.0


POOL = "*"  # the one GPU type a heterogeneity-unaware Pollux sees


def _pooled(j: JobView, capacity: dict[str, int]) -> JobView:
    """``j`` as a heterogeneity-unaware scheduler sees it: one curve, the capacity-weighted mean of
    its curves on the types it may run on (the artifact's unaware job fits one model to what it
    measured on every type), and its current type folded into the pool."""
    types = [t for t in j.types(capacity) if t in j.rates and capacity.get(t, 0) > 0]
    weight = sum(capacity[t] for t in types) or 1
    width = j.max_workers + 1
    curve = tuple(sum(capacity[t] * j.rate(t, n) for t in types) / weight for n in range(width))
    rate_fn = None
    if j.rate_fn is not None:
        fn = j.rate_fn

        def rate_fn(_t: str, n: int) -> float:
            return sum(capacity[t] * fn(t, n) for t in types) / weight

    return dataclasses.replace(
        j,
        rates={POOL: curve},
        pinned_type=None,
        current_type=POOL if j.current_workers else None,
        rate_fn=rate_fn,
    )


def pollux_fix(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    resize_cost: float = RESTART_DELAY,
    p: float = -1.0,
    gpus_per_node: float = 4.0,
) -> dict[str, Assignment]:
    """Pollux run heterogeneity-unaware, with the Sia paper's fix-up: Pollux sizes every job on
    all GPUs as one pool (each job's speed one curve, :func:`_pooled`); the job's workers are then
    laid onto the types — a job that keeps its size keeps its GPUs, the others, largest first,
    take GPUs from the type with the most free ones, then the next — and the job keeps only the GPUs
    of the type it holds most of (ties go to the type where it runs fastest); the others stay idle
    this round, as the artifact's repair leaves them."""
    types = sorted(t for t, c in capacity.items() if c > 0)
    if not jobs or not types:
        return {}
    pooled = [_pooled(j, capacity) for j in jobs]
    sizes = pollux(pooled, {POOL: sum(capacity[t] for t in types)}, now, resize_cost, p, gpus_per_node)
    by_name = {j.name: j for j in jobs}
    free = {t: capacity[t] for t in types}
    out: dict[str, Assignment] = {}
    rest = []
    for name, a in sizes.items():
        j = by_name[name]
        t = j.current_type
        if a.workers == j.current_workers and t in free and free[t] >= a.workers:
            free[t] -= a.workers
            out[name] = Assignment(t, a.workers)
        else:
            rest.append((a.workers, j))
    rest.sort(key=lambda x: (-x[0], x[1].submit_time, x[1].name))
    for n, j in rest:
        allowed = [t for t in j.types(capacity) if t in free]
        held: dict[str, int] = {}
        need = n
        while need > 0:
            cands = [t for t in allowed if free[t] - held.get(t, 0) > 0]
            if not cands:
                break
            t = max(cands, key=lambda t: (free[t] - held.get(t, 0), -types.index(t)))
            take = min(need, free[t] - held.get(t, 0))
            held[t] = held.get(t, 0) + take
            need -= take
        if not held:
            continue
        best = max(held, key=lambda t: (held[t], j.rate(t, 1), -types.index(t)))
        for t, k in held.items():
            free[t] -= k  # the GPUs of other types are left idle this round
        k = held[best]
        if k >= j.min_workers and k <= j.max_workers:
            out[j.name] = Assignment(best, k)
    return out
