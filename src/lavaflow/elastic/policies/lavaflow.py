"""``Lavaflow``: marginal goodput with resize-cost and heterogeneity awareness (ours).

Objective.  For average JCT, each job's value is the fraction of its remaining work done per
second, ``rate_j(type, n) / remaining_work_j`` (= 1 / remaining time).  Maximising the sum of these
favours short jobs (SRPT-like) and, within a job, stops adding workers once they no longer speed
it up enough to beat starting or growing another job.

Switching cost.  Changing a running job (start, resize, type change) costs ``resize_cost`` seconds
of no progress.  Any configuration other than the job's current one has its value discounted by
``T / (T + S)`` with ``T`` the job's remaining time there (sizes are sticky: a configuration, once
taken, is kept until the job ends unless GPUs are needed elsewhere) and ``S = switch_factor *
resize_cost`` the switching cost.  The pause alone under-counts what a change costs: GPUs taken
from the spare pool are usually handed back later (a second pause), a job started on GPUs it
cannot keep is shrunk or halted later, and each change can displace other jobs.  ``S`` charges
this as a multiple of the pause (default 12x = 360 s at a 30 s pause; one global constant, chosen
on the Pollux workloads where 8x-24x form a plateau, docs/benchmarks.md).  Keeping the current
configuration costs nothing, so a running job only changes when the gain beats the switching cost.
``horizon`` optionally caps ``T`` (the previous rule: 900 s with ``switch_factor=1``).

Heterogeneity.  A waiting job may start on any type it is not pinned away from; the value uses
the job's own rate on that type, so the job goes where it gains most per GPU.  To respect
comparative advantage (Gavel), a type's value for a job is also reduced by the fraction of its
best type's rate it would forgo, weighted by ``hetero_weight``: a job barely faster on a V100
leaves V100s to jobs that are much faster there.

Algorithm.  Greedy on value gain per GPU with a heap: a waiting job's options are starting at
``k >= min`` workers on each type, a started job's options are growing by ``1..lookahead`` workers
on its type (look-ahead so dips in measured curves, e.g. crossing a node boundary, do not stop
growth), or jumping straight back to its current size (which carries no resize discount).  Each
step takes the option with the best gain per GPU that fits; it ends when no positive gain fits.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

import numpy as np

from .base import Assignment, JobView


def lavaflow(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    resize_cost: float = 30.0,
    horizon: float = math.inf,
    lookahead: int = 8,
    hetero_weight: float = 1.0,
    type_agnostic: bool = False,
    switch_factor: float = 12.0,
    spare_factor: float | None = None,
    node_size: int = 0,
    spare_horizon: float = math.inf,
    type_moves: bool = False,
) -> dict[str, Assignment]:
    if type_agnostic and len(capacity) > 1:
        # ablation: Voda-style per-type pools, jobs assigned to pools without looking at speed
        from .base import split_pools

        out: dict[str, Assignment] = {}
        for t, pool in split_pools(jobs, capacity).items():
            out.update(
                lavaflow(pool, {t: capacity[t]}, now, resize_cost, horizon, lookahead, 0.0, switch_factor=switch_factor)
            )
        return out
    types = sorted(t for t, c in capacity.items() if c > 0)
    free = {t: capacity[t] for t in types}
    order = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    rank = {j.name: i for i, j in enumerate(order)}
    val = _values(order, capacity, free, max(resize_cost, 0.0) * switch_factor, horizon, hetero_weight, node_size)
    alloc: dict[str, Assignment] = {}
    moves = bool(type_moves) and len(types) > 1
    _greedy(order, rank, val, free, alloc, lookahead, moves)
    if spare_factor is not None and spare_factor < switch_factor and any(f > 0 for f in free.values()):
        # GPUs nobody takes at the full switching cost: offered again at a lower one (they are
        # idle otherwise; a job grown onto them is shrunk again only if others need them)
        val = _values(
            order,
            capacity,
            free,
            max(resize_cost, 0.0) * spare_factor,
            min(horizon, spare_horizon),
            hetero_weight,
            node_size,
        )
        _greedy(order, rank, val, free, alloc, lookahead, moves)
    return alloc


def _values(
    order: list[JobView],
    capacity: Mapping[str, int],
    free: dict[str, int],
    switch: float,
    horizon: float,
    hetero_weight: float,
    node_size: int = 0,
) -> dict[str, dict[str, np.ndarray]]:
    """Value tables ``val[name][type][n]`` for n = 0..max workers.  With ``node_size`` > 1 only
    sizes up to one node or whole multiples of it (and the job's minimum and current size) can be
    chosen: the others get value -inf."""
    val: dict[str, dict[str, np.ndarray]] = {}
    for j in order:
        w = max(j.remaining_work, 1e-12)
        jt = j.types(capacity)
        best_unit = max((j.rate(t, 1) for t in jt), default=0.0)
        per_type = {}
        for t in jt:
            if t not in free:
                continue
            r = np.asarray(j.rates.get(t, ()), dtype=float)[: j.max_workers + 1]
            if len(r) < j.max_workers + 1:
                r = np.concatenate([r, np.full(j.max_workers + 1 - len(r), r[-1] if len(r) else 0.0)])
            v = r / w
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (tiny rates: inf)
                rem = np.where(r > 0, w / np.maximum(r, 1e-300), math.inf)
            span = np.minimum(rem, horizon)
            if switch > 0:
                with np.errstate(invalid="ignore"):
                    disc = np.where(np.isfinite(span), span / (span + switch), 1.0)
            else:
                disc = np.ones_like(r)
            if hetero_weight > 0 and best_unit > 0 and len(jt) > 1:
                forgo = 1.0 - r[1] / best_unit if len(r) > 1 else 0.0
                disc = disc * (1.0 - hetero_weight * forgo * 0.5)
            v = v * disc
            if node_size > 1 and len(v) > node_size + 1:
                # whole nodes (or part of one): sizes that leave no fragments to re-pack around
                ns = np.arange(len(v))
                ok = (ns <= node_size) | (ns % node_size == 0) | (ns == j.min_workers)
                v = np.where(ok, v, -math.inf)
            if j.current_type == t and 0 < j.current_workers <= j.max_workers:
                c = j.current_workers
                v[c] = r[c] / w  # staying as is costs nothing
            v[0] = 0.0
            per_type[t] = v
        val[j.name] = per_type
    return val


def _greedy(
    order: list[JobView],
    rank: dict[str, int],
    val: dict[str, dict[str, np.ndarray]],
    free: dict[str, int],
    alloc: dict[str, Assignment],
    lookahead: int,
    moves: bool = False,
) -> None:
    """Lazy greedy on value gain per GPU, from the allocation ``alloc`` (updated in place).
    ``moves``: a job given a type may move to another one when that gains more per GPU taken
    there (its GPUs are handed back), so that jobs first placed on the fastest type at one worker
    each do not keep the other types idle."""
    version = {j.name: 0 for j in order}
    heap: list[tuple[float, int, int, str, int, JobView]] = []

    def push_options(j: JobView) -> None:
        a = alloc.get(j.name)
        best = None
        if a is None:
            for t, v in val[j.name].items():
                hi = min(j.max_workers, free[t])
                if hi < j.min_workers:
                    continue
                ks = np.arange(j.min_workers, hi + 1)
                g = v[j.min_workers : hi + 1] / ks
                i = int(np.argmax(g))
                cand = (float(g[i]), t, int(ks[i]))
                if best is None or cand[0] > best[0] + 1e-15:
                    best = cand
        else:
            t, n = a
            v = val[j.name][t]
            hi = min(j.max_workers, n + free[t])
            if hi > n:
                top = min(hi, n + lookahead)
                ks = np.arange(n + 1, top + 1)
                if j.current_type == t and hi >= j.current_workers > top:
                    ks = np.append(ks, j.current_workers)
                g = (v[ks] - v[n]) / (ks - n)
                i = int(np.argmax(g))
                best = (float(g[i]), t, int(ks[i]))
            if moves:
                # moving to another type: its GPUs taken, these handed back
                for t2, v2 in val[j.name].items():
                    hi2 = min(j.max_workers, free[t2])
                    if t2 == t or hi2 < j.min_workers:
                        continue
                    ks = np.arange(j.min_workers, hi2 + 1)
                    g = (v2[ks] - v[n]) / ks
                    i = int(np.argmax(g))
                    if best is None or g[i] > best[0] + 1e-15:
                        best = (float(g[i]), t2, int(ks[i]))
        if best is not None and best[0] > 0:
            heapq.heappush(heap, (-best[0], rank[j.name], version[j.name], best[1], best[2], j))

    for j in order:
        push_options(j)
    while heap:
        negg, _, ver, t, k, j = heapq.heappop(heap)
        if ver != version[j.name]:
            continue
        cur = alloc.get(j.name)
        if cur is not None and cur.gpu_type != t:
            if k > free[t]:
                version[j.name] += 1
                push_options(j)
                continue
            free[t] -= k
            free[cur.gpu_type] += cur.workers
            alloc[j.name] = Assignment(t, k)
            for o in order:  # GPUs came back on the type it left: every job looks again
                version[o.name] += 1
                push_options(o)
            continue
        n = cur.workers if cur is not None else 0
        if k - n > free[t]:
            version[j.name] += 1
            push_options(j)  # re-evaluate within what is left
            continue
        free[t] -= k - n
        alloc[j.name] = Assignment(t, k)
        version[j.name] += 1
        push_options(j)
