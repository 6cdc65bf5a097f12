"""FfDL optimizer (Voda ``FfDLOptimizer``, after Saxena et al., MASCOTS 2020), corrected.

Keep the longest FIFO prefix of jobs whose minimums fit (and at most one job per GPU), then a
dynamic programme chooses each kept job's workers g in [min, max] maximising the sum of speedups
using at most the available GPUs.  Voda ignored the minimum (it could return 0 < g < min) and
panicked when the programme was infeasible; here the prefix is always feasible."""

from __future__ import annotations

import numpy as np

from .base import JobView, fifo_key, per_pool

NEG = -1e18


def ffdl_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    order = sorted(jobs, key=fifo_key)
    kept: list[JobView] = []
    used = 0
    for j in order:
        if len(kept) >= gpus or used + j.min_workers > gpus:
            break
        kept.append(j)
        used += j.min_workers
    if not kept:
        return {}
    K = gpus
    P = np.full(K + 1, NEG)
    P[0] = 0.0
    choices = []
    for j in kept:
        new = np.full(K + 1, NEG)
        arg = np.zeros(K + 1, dtype=np.int64)
        for g in range(j.min_workers, min(j.max_workers, K) + 1):
            cand = np.full(K + 1, NEG)
            cand[g:] = P[: K + 1 - g] + j.speedup(gpu_type, g)
            better = cand > new + 1e-12
            new = np.where(better, cand, new)
            arg = np.where(better, g, arg)
        P = new
        choices.append(arg)
    k = int(np.argmax(P))  # first (fewest GPUs) among equal optima
    out: dict[str, int] = {}
    for j, arg in zip(reversed(kept), reversed(choices)):
        g = int(arg[k])
        out[j.name] = g
        k -= g
    return out


ffdl = per_pool(ffdl_pool)
