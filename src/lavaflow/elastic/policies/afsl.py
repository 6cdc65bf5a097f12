"""AFS-L (Voda ``AFS-L``, after Hwang et al., NSDI 2021), corrected.

GPUs are handed out one step at a time (a waiting job's step is its whole minimum).  Each step goes
to the winner of a pairwise tournament over the jobs in FIFO order:

* both waiting: the shorter estimated remaining time wins;
* otherwise, with j the job that would finish sooner at its current allocation and k the other,
  k wins iff ``(S_k[n_k'] - S_k[n_k]) / S_k[n_k'] > (S_j[n_j'] - S_j[n_j]) / S_j[n_j]`` where n' is
  the count after the step and S the speedup (a waiting j has an infinite relative gain).

Voda ignored the minimum and evaluated k's length with j's worker count; both fixed here."""

from __future__ import annotations

import math

from .base import JobView, fifo_key, per_pool


def afsl_pool(jobs: list[JobView], gpus: int, now: float, gpu_type: str) -> dict[str, int]:
    order = sorted(jobs, key=fifo_key)
    alloc = {j.name: 0 for j in order}
    free = gpus

    def step(j: JobView) -> int:
        return j.min_workers if alloc[j.name] == 0 else 1

    def length(j: JobView) -> float:
        n = alloc[j.name]
        return j.remaining_time(gpu_type, n) if n > 0 else math.inf

    def rel_gain_new(j: JobView) -> float:  # gain relative to the throughput after the step
        n = alloc[j.name]
        s_new = j.speedup(gpu_type, n + step(j))
        return (s_new - j.speedup(gpu_type, n)) / s_new if s_new > 0 else -math.inf

    def rel_gain_cur(j: JobView) -> float:  # gain relative to the current throughput
        n = alloc[j.name]
        s_cur = j.speedup(gpu_type, n)
        if n == 0 or s_cur <= 0:
            return math.inf
        return (j.speedup(gpu_type, n + 1) - s_cur) / s_cur

    def pick(a: JobView, b: JobView) -> JobView:
        if alloc[a.name] == 0 and alloc[b.name] == 0:
            ra, rb = a.remaining_time(gpu_type, 1), b.remaining_time(gpu_type, 1)
            return b if rb < ra else a
        la, lb = length(a), length(b)
        short, long_ = (a, b) if la <= lb else (b, a)
        return long_ if rel_gain_new(long_) > rel_gain_cur(short) else short

    while free > 0:
        cands = [
            j
            for j in order
            if alloc[j.name] < j.max_workers
            and step(j) <= free
            and (alloc[j.name] == 0 or j.speedup(gpu_type, alloc[j.name] + 1) > j.speedup(gpu_type, alloc[j.name]))
        ]
        if not cands:
            break
        champ = cands[0]
        for j in cands[1:]:
            champ = pick(champ, j)
        s = step(champ)
        alloc[champ.name] += s
        free -= s
    return {k: v for k, v in alloc.items() if v > 0}


afsl = per_pool(afsl_pool)
