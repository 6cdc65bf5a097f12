"""``Gavel``: heterogeneity-aware scheduling of rigid jobs by rounds (Narayanan et al., OSDI'20),
configured as the Sia artifact runs it for "Gavel + TunedJobs": 360 s rounds, every job at its
trace size and batch (the traces' sizes and batches are the tuned ones: TunedJobs), no batch
co-adaptation.

Two steps per round:

* **Allocation.** An LP gives each job a time fraction ``X[j, t]`` on each GPU type: maximise
  ``Σ X[j, t] · rate[j, t]`` (the *max-sum-throughput* policy, which the Sia paper and its artifact
  chose for Gavel; ``objective="max_min"`` gives max-min fairness of each job's throughput
  normalised by its best type's instead) such that ``Σ_t X[j, t] ≤ 1`` and ``Σ_j size_j · X[j, t]``
  does not exceed type ``t``'s GPUs.  ``rate[j, t]`` is the job's rate on its size on type ``t``
  from its learned model.
* **Round.** Jobs take the GPUs of a type in the order of their *priority* there, the allocation
  over the share of time they have received; a job is placed once, on the type of its first entry
  that still has room for its whole size.  Gavel keeps per type how long each job ran; the
  scheduler hands policies each job's attained service only, so the share received here is the
  job's (GPU-seconds / size + half a round) — the same order whenever a job has run on one type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .base import Assignment, JobView

ROUND = 360.0  # the Sia artifact's round for Gavel


def allocation(
    jobs: Sequence[JobView], capacity: dict[str, int], objective: str = "max_sum"
) -> dict[tuple[str, str], float]:
    """Gavel's time fractions ``X[(job, type)]`` (only positive ones).

    Jobs of the same size and rates are interchangeable, so the LP is solved over such classes
    (a class of ``k`` jobs may hold up to ``k`` of time) and each member gets an equal part: among
    the optimal allocations, the one that shares ties evenly, as Gavel's interior-point solver
    returns (a simplex vertex would give one of them everything)."""
    from scipy.optimize import linprog

    types = sorted(t for t, c in capacity.items() if c > 0)
    classes: dict[tuple[int, tuple[tuple[str, float], ...]], list[JobView]] = {}
    for j in jobs:
        n = j.clamp(j.requested)
        sig = tuple((t, j.rate(t, n)) for t in j.types(capacity) if t in types and n <= capacity[t])
        if any(r > 0 for _, r in sig):
            classes.setdefault((n, sig), []).append(j)
    members = list(classes.values())
    keys: list[tuple[int, str]] = []
    rate: list[float] = []
    for c, ((_n, sig), _js) in enumerate(classes.items()):
        for t, rt in sig:
            if rt > 0:
                keys.append((c, t))
                rate.append(rt)
    if not keys:
        return {}
    nv, nc = len(keys), len(members)
    rows_cls = np.zeros((nc, nv))
    rows_type = np.zeros((len(types), nv))
    for k, (c, t) in enumerate(keys):
        rows_cls[c, k] = 1.0
        rows_type[types.index(t), k] = members[c][0].clamp(members[c][0].requested)
    count = np.array([len(m) for m in members], dtype=float)
    caps = np.array([float(capacity[t]) for t in types])
    r = np.array(rate)
    bounds = [(0.0, count[c]) for c, _ in keys]
    if objective == "max_sum":
        res = linprog(
            -r, A_ub=np.vstack([rows_cls, rows_type]), b_ub=np.concatenate([count, caps]), bounds=bounds, method="highs"
        )
        x = res.x
    elif objective == "max_min":
        best = np.zeros(nc)
        for k, (c, _t) in enumerate(keys):
            best[c] = max(best[c], r[k])
        # variables: y..., z; maximise z with z <= (Σ_t y[c, t] · rate / best) / k for every class
        fair = -(rows_cls * (r / best[[c for c, _ in keys]]) / count[:, None])
        a_ub = np.vstack(
            [
                np.hstack([rows_cls, np.zeros((nc, 1))]),
                np.hstack([rows_type, np.zeros((len(types), 1))]),
                np.hstack([fair, np.ones((nc, 1))]),
            ]
        )
        cost = np.zeros(nv + 1)
        cost[-1] = -1.0
        res = linprog(
            cost,
            A_ub=a_ub,
            b_ub=np.concatenate([count, caps, np.zeros(nc)]),
            bounds=[*bounds, (0, None)],
            method="highs",
        )
        x = res.x[:nv] if res.x is not None else None
    else:
        raise ValueError(f"gavel: unknown objective {objective!r} (max_sum or max_min)")
    if x is None:
        return {}
    out: dict[tuple[str, str], float] = {}
    for (c, t), v in zip(keys, x, strict=True):
        if v > 1e-9:
            for j in members[c]:
                out[(j.name, t)] = float(v) / len(members[c])
    return out


def gavel(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    resize_cost: float = 30.0,
    objective: str = "max_sum",
    round_length: float = ROUND,
) -> dict[str, Assignment]:
    order = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    x = allocation(order, capacity, str(objective))
    half = float(round_length) / 2
    by_name = {j.name: j for j in order}
    entries = []
    for (name, t), share in x.items():
        j = by_name[name]
        n = j.clamp(j.requested)
        received = j.attained_service / max(n, 1) + half
        entries.append((-share / received, -share, j.submit_time, name, t))
    entries.sort()
    left = dict(capacity)
    out: dict[str, Assignment] = {}
    for _p, _s, _t0, name, t in entries:
        if name in out:
            continue
        j = by_name[name]
        n = j.clamp(j.requested)
        if n <= left[t]:
            left[t] -= n
            out[name] = Assignment(t, n)
    return out


def total_throughput(jobs: Sequence[JobView], result: dict[str, Assignment]) -> float:
    """Σ of the jobs' rates on what ``result`` gives them (for tests and benchmarks)."""
    by_name = {j.name: j for j in jobs}
    return math.fsum(by_name[n].rate(a.gpu_type, a.workers) for n, a in result.items())
