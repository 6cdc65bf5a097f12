"""``Sia``: the heterogeneity-aware, goodput-optimised policy of Sia (Jayaram Subramanya et al.,
SOSP'23), configured as its artifact runs it (``p = -0.5``, ``λ_n = 1.1``, 60 s rounds).

Every round Sia picks, for each job, at most one *configuration* — a GPU type and a GPU count of
a fixed menu — by an integer linear program over a goodput matrix:

* **The menu.** On a type whose nodes hold ``g`` GPUs: 1, 2, 4, … below ``g``, then whole nodes
  ``g, 2g, …`` up to the type's node count (on 4-GPU nodes 1, 2, 4, 8, 12, …; on 8-GPU nodes 1, 2,
  4, 8, 16, …).  A job's valid configurations lie in its ``[min, max]`` workers: ``max`` is the
  bound of twice what was measured (the artifact's ``max_replicas``, shared across types).  The
  artifact's jobs have no minimum (``min_replicas`` 0, taken as 1); a lavaflow job may have one
  (a Pollux-trace job asking ``NP`` GPUs: ``⌈NP/2⌉``, and ``max = min`` until it is measured), so
  its minimum is a configuration of its own beside the menu's counts — else a job whose range
  holds no menu count (3 on 4-GPU nodes) would never run.
* **The matrix.** Each valid configuration's goodput comes from the job's learned model on that
  type (the rates the scheduler hands every policy).  Per job the row is normalised so that its
  smallest goodput over every type and every menu count from one GPU up (and its minimum) is 1
  (a job's 1-GPU slowest type), values at or below 10⁻⁴ are set to 10⁻⁴.  A minimum does not
  rescale the row: a job that must take 24 GPUs is worth its speed-up over one GPU there, as the
  artifact values its jobs (a rigid one at its GPU count), not 1 — which made it worth no more
  than a 1-GPU job, so the ILP left it waiting while any smaller job could use its GPUs.
* **Restarts.** A job that holds a configuration keeps its value there; every other
  configuration of that job is multiplied by the *re-allocation factor*
  ``max(age − restarts · P, 0) / (age + P)`` (1 while ``age < P``), ``P`` the checkpoint-restore
  penalty Sia assumes for the job's model (the artifact's per-model values, :data:`RESTART_PENALTY`).
* **The ILP.** With ``A = round(goodput^p, 2)`` (clipped at 3,000) and binary ``x``, minimise
  ``Σ x·A + λ_n · (jobs − Σ x)`` such that every job takes at most one configuration and every
  type's GPUs suffice.  With ``p < 0`` a configuration is worth taking only if ``A < λ_n``: a job
  goes unallocated rather than run where its normalised goodput is below ``λ_n^(1/p)``; ``p``
  trades the sum of goodputs against fairness between jobs.

Solved with scipy's HiGHS (:func:`scipy.optimize.milp`), relative gap 10⁻⁴ as the artifact sets its
solver, optionally with a ``time_limit`` (seconds; the best solution found so far is used).  Only
configurations with ``A < λ_n`` are variables: no other can lower the objective.  On a cluster of one
GPU type the ILP is a multiple-choice knapsack: :func:`_one_type` solves it exactly by dynamic
programming over GPU counts (the same optimum, tested against the solver and exhaustive search; a
round on Pollux's 64 GPUs costs about 0.2 ms there against 6 ms in HiGHS).

What differs from the artifact (read for its semantics; no code taken): goodputs of a type the job
has not run on come from the learned model (a type never measured takes the fit of the type
measured most, or what jobs of the same model measured there — profile groups, which Sia runs with
in lavaflow, in place of the artifact's per-application throughput ratios between types); the
artifact's hard constraint that a job in the middle of a checkpoint-restore keeps its configuration
is not modelled (the scheduler keeps no restore clock the policy could read); placement is the
elastic action's (consolidated, fewest moves) rather than the artifact's round-robin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .base import Assignment, JobView

DEFAULT_P = -0.5
DEFAULT_LAMBDA_N = 1.1
ZERO_GAIN = 1e-4  # the artifact's floor for a normalised goodput
CLIP = 3000.0  # the artifact's cap on goodput^p
MIP_GAP = 1e-4  # the artifact's relative optimality gap
DEFAULT_NODE_SIZE = 8

#: Checkpoint-restore seconds Sia's policy assumes per model in its re-allocation factor (the
#: artifact's values, matched on the job's name as the artifact does; others: ``resize_cost``).
RESTART_PENALTY = {"deepspeech": 25.0, "imagenet": 250.0, "cifar": 30.0, "bert": 120.0, "yolov3": 45.0}


def restart_penalty(name: str, default: float) -> float:
    for key, secs in RESTART_PENALTY.items():
        if key in name:
            return secs
    return default


def configurations(capacity: int, node_size: int) -> list[int]:
    """Sia's menu of GPU counts on one type: powers of two below a node, then whole nodes."""
    g = max(int(node_size), 1)
    out = []
    n = 1
    while n < g and n <= capacity:
        out.append(n)
        n *= 2
    out += list(range(g, capacity + 1, g))
    return out


def powered(g: float, p: float) -> float:
    """``round(g^p, 2)`` capped at :data:`CLIP`, as the artifact builds its matrix (a goodput of 0,
    from a re-allocation factor of 0, gives the cap)."""
    return CLIP if g <= 0 else min(round(g**p, 2), CLIP)


def realloc_factor(j: JobView, now: float, penalty: float) -> float:
    """The artifact's (Pollux's) re-allocation factor of a job."""
    age = max(now - j.submit_time, 0.0)
    if age < penalty:
        return 1.0
    return max(age - j.restarts * penalty, 0.0) / (age + penalty)


def goodput_rows(
    jobs: Sequence[JobView],
    capacity: Mapping[str, int],
    node_sizes: Mapping[str, int],
    now: float,
    resize_cost: float,
) -> list[dict[tuple[str, int], float]]:
    """Per job, its normalised and restart-discounted goodput on each valid configuration."""
    menus = {t: configurations(c, node_sizes.get(t, DEFAULT_NODE_SIZE)) for t, c in capacity.items() if c > 0}
    rows = []
    for j in jobs:
        # Every count of the menu up to the job's maximum, from one GPU (the artifact's jobs have
        # no minimum), and the job's own minimum: the goodputs the row is normalised over.
        raw: dict[tuple[str, int], float] = {}
        for t in j.types(capacity):
            if t not in menus or t not in j.rates:
                continue
            counts = {n for n in menus[t] if n <= j.max_workers}
            if j.min_workers <= min(j.max_workers, capacity[t]):
                counts.add(j.min_workers)
            for n in sorted(counts):
                raw[(t, n)] = j.rate(t, n)
        positive = [v for v in raw.values() if v > ZERO_GAIN]
        base = min(positive) if positive else 1.0
        f = realloc_factor(j, now, restart_penalty(j.name, resize_cost))
        held = (j.current_type, j.current_workers) if j.current_workers else None
        row = {}
        for key, v in raw.items():
            if key[1] < j.min_workers:
                continue  # below the job's minimum: it may not run there
            g = max(v / base, ZERO_GAIN)
            if held is not None and key != held:
                g *= f
            row[key] = g
        rows.append(row)
    return rows


def sia(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    resize_cost: float = 30.0,
    p: float = DEFAULT_P,
    lambda_n: float = DEFAULT_LAMBDA_N,
    time_limit: float | None = None,
    node_size: int = DEFAULT_NODE_SIZE,
    node_sizes: Mapping[str, int] | None = None,
) -> dict[str, Assignment]:
    p, lambda_n, resize_cost = float(p), float(lambda_n), float(resize_cost)
    time_limit = float(time_limit) if time_limit is not None else None
    if p >= 0:
        raise ValueError("sia: only p < 0 (the artifact's -0.5) is implemented")
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    order = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    sizes = {t: int((node_sizes or {}).get(t, node_size)) for t in capacity}
    rows = goodput_rows(order, capacity, sizes, now, resize_cost)
    var_job: list[int] = []
    var_cfg: list[tuple[str, int]] = []
    cost: list[float] = []
    for i, row in enumerate(rows):
        for key in sorted(row):
            a = powered(row[key], p)
            if a < lambda_n:  # only these can lower the objective
                var_job.append(i)
                var_cfg.append(key)
                cost.append(a - lambda_n)
    if not var_job:
        return {}
    types = sorted(t for t in capacity if capacity[t] > 0)
    if len(types) == 1:
        exact = _one_type(order, var_job, var_cfg, cost, capacity[types[0]], lambda_n)
        if exact is not None:
            return exact
    nv = len(var_job)
    cols = np.arange(nv)
    # one configuration per job; GPUs per type
    tpos = {t: k for k, t in enumerate(types)}
    r = np.concatenate([np.array(var_job), len(order) + np.array([tpos[t] for t, _ in var_cfg])])
    v = np.concatenate([np.ones(nv), np.array([n for _, n in var_cfg], dtype=float)])
    a_mat = coo_matrix((v, (r, np.concatenate([cols, cols]))), shape=(len(order) + len(types), nv)).tocsr()
    ub = np.concatenate([np.ones(len(order)), np.array([capacity[t] for t in types], dtype=float)])
    options: dict[str, float | bool] = {"mip_rel_gap": MIP_GAP, "disp": False}
    if time_limit is not None and time_limit > 0:
        options["time_limit"] = float(time_limit)
    res = milp(
        c=np.array(cost),
        integrality=np.ones(nv),
        bounds=Bounds(0, 1),
        constraints=LinearConstraint(a_mat, -np.inf, ub),
        options=options,
    )
    if res.x is None:  # no solution within the time limit: keep what runs (it fits)
        return {
            j.name: Assignment(j.current_type, j.current_workers) for j in order if j.current_workers and j.current_type
        }
    out: dict[str, Assignment] = {}
    for k in np.flatnonzero(res.x > 0.5):
        t, n = var_cfg[k]
        out[order[var_job[k]].name] = Assignment(t, n)
    return out


def _one_type(
    order: Sequence[JobView],
    var_job: list[int],
    var_cfg: list[tuple[str, int]],
    cost: list[float],
    gpus: int,
    lambda_n: float,
) -> dict[str, Assignment] | None:
    """The same ILP on a cluster of one GPU type — a multiple-choice knapsack — solved exactly by
    dynamic programming over GPU counts, in whole hundredths (the matrix is rounded to hundredths,
    so the objective is an integer number of them when ``λ_n`` is). None when ``λ_n`` is not: the
    ILP solver is used then. The objective is the ILP's optimum (a tested property); where several
    allocations reach it, the one taken is the first in job order that leaves a job out, then the
    smallest configuration (the ILP solver may pick another of them)."""
    lam = round(lambda_n * 100)
    if abs(lambda_n * 100 - lam) > 1e-9:
        return None
    jobs = len(order)
    options: list[list[tuple[int, int, int]]] = [[] for _ in range(jobs)]  # (GPUs, cost, variable)
    for k, (i, (_, n), c) in enumerate(zip(var_job, var_cfg, cost, strict=True)):
        if n <= gpus:
            options[i].append((n, round(c * 100 + lam) - lam, k))
    big = np.iinfo(np.int64).max // 4
    best = np.zeros(gpus + 1, dtype=np.int64)  # least cost of the jobs so far on at most c GPUs
    picks = np.full((jobs, gpus + 1), -1, dtype=np.int64)  # the option each job takes at c GPUs
    for i, opts in enumerate(options):
        if not opts:
            continue
        cand = np.full((len(opts) + 1, gpus + 1), big, dtype=np.int64)
        cand[0] = best  # the job left out
        for r, (n, price, _) in enumerate(opts, start=1):
            cand[r, n:] = best[: gpus + 1 - n] + price
        choice = np.argmin(cand, axis=0)  # (ties: the first row, so leaving out, then fewer GPUs)
        best = cand[choice, np.arange(gpus + 1)]
        picks[i] = choice - 1
    out: dict[str, Assignment] = {}
    left = gpus
    for i in range(jobs - 1, -1, -1):
        r = int(picks[i, left])
        if r < 0:
            continue
        t, n = var_cfg[options[i][r][2]]
        out[order[i].name] = Assignment(t, n)
        left -= n
    return out


def objective(
    jobs: Sequence[JobView],
    capacity: dict[str, int],
    now: float,
    result: Mapping[str, Assignment],
    resize_cost: float = 30.0,
    p: float = DEFAULT_P,
    lambda_n: float = DEFAULT_LAMBDA_N,
    node_sizes: Mapping[str, int] | None = None,
) -> float:
    """Sia's objective (to minimise) of ``result``; ``math.inf`` for a configuration off its menu."""
    order = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    sizes = {t: int((node_sizes or {}).get(t, DEFAULT_NODE_SIZE)) for t in capacity}
    total = 0.0
    for j, row in zip(order, goodput_rows(order, capacity, sizes, now, resize_cost), strict=True):
        a = result.get(j.name)
        if a is None or a.workers == 0:
            total += lambda_n
            continue
        g = row.get((a.gpu_type, a.workers))
        if g is None:
            return math.inf
        total += powered(g, p)
    return total
