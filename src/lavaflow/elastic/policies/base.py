"""Common types of the allocation policies.

A policy is a pure function ``(jobs, capacity, now) -> {job name: Assignment}``: ``jobs`` are
immutable :class:`JobView` snapshots, ``capacity`` maps each GPU type to the GPUs the elastic
scheduler may hand out, and the result gives each job a GPU type and a worker count.  Jobs absent
from the result (or with 0 workers) are halted / stay queued.  Every result satisfies
:func:`check_allocation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Assignment(NamedTuple):
    gpu_type: str
    workers: int


@dataclass(frozen=True)
class JobView:
    name: str
    submit_time: float
    min_workers: int
    max_workers: int
    requested: int
    # rates[t][n]: work units per second with n workers of type t, consolidated (n = 0..max)
    rates: Mapping[str, tuple[float, ...]]
    remaining_work: float
    total_work: float = 0.0
    priority: int = 0  # JOB_PRIORITY: 0 = highest
    current_workers: int = 0
    current_type: str | None = None
    pinned_type: str | None = None
    first_start: float | None = None
    attained_service: float = 0.0  # GPU-seconds since submission
    queue_service: float = 0.0  # GPU-seconds since last promotion (Tiresias)
    running_time: float = 0.0
    waiting_time: float = 0.0
    # when the job entered its current Tiresias queue (arrival, demotion or promotion); None: unknown
    queue_entered: float | None = None
    # work units done so far (the job's observable progress; non-clairvoyant policies may read it)
    done_work: float = 0.0
    # allocation changes after the job's first start (restarts: resizes, migrations, restarts
    # after a halt), as the Pollux artifact counts them for its restart penalty
    restarts: int = 0
    # rate on n consolidated workers of a type for any n, also beyond max_workers (the same speed
    # model as ``rates``; for policies that compare with a fair share); None: only ``rates``
    rate_fn: Callable[[str, int], float] | None = field(default=None, compare=False)

    def types(self, capacity: Mapping[str, int]) -> list[str]:
        if self.pinned_type is not None:
            return [self.pinned_type] if self.pinned_type in capacity else []
        return sorted(capacity)

    def rate(self, gpu_type: str, n: int) -> float:
        r = self.rates.get(gpu_type)
        if r is None or n <= 0:
            return 0.0
        return r[min(n, len(r) - 1)]

    def speedup(self, gpu_type: str, n: int) -> float:
        base = self.rate(gpu_type, 1)
        return self.rate(gpu_type, n) / base if base > 0 else float(n)

    def remaining_time(self, gpu_type: str, n: int = 1) -> float:
        """Voda's estimate: remaining work at ``n`` (default 1) worker(s)."""
        r = self.rate(gpu_type, n)
        return self.remaining_work / r if r > 0 else math.inf

    def clamp(self, n: int) -> int:
        return min(max(n, self.min_workers), self.max_workers)


class AllocationError(ValueError):
    pass


def check_allocation(jobs: Sequence[JobView], capacity: Mapping[str, int], result: Mapping[str, Assignment]) -> None:
    """Raise AllocationError unless every job is within [min, max] (or 0) and types fit."""
    by_name = {j.name: j for j in jobs}
    used: dict[str, int] = {}
    for name, a in result.items():
        j = by_name.get(name)
        if j is None:
            raise AllocationError(f"allocation for unknown job {name!r}")
        if a.workers == 0:
            continue
        if a.workers < j.min_workers or a.workers > j.max_workers:
            raise AllocationError(f"job {name}: {a.workers} workers outside [{j.min_workers}, {j.max_workers}]")
        if a.gpu_type not in capacity:
            raise AllocationError(f"job {name}: unknown GPU type {a.gpu_type!r}")
        if j.pinned_type is not None and a.gpu_type != j.pinned_type:
            raise AllocationError(f"job {name}: pinned to {j.pinned_type}, given {a.gpu_type}")
        used[a.gpu_type] = used.get(a.gpu_type, 0) + a.workers
    for t, n in used.items():
        if n > capacity[t]:
            raise AllocationError(f"GPU type {t}: {n} workers allocated, capacity {capacity[t]}")


def fifo_key(j: JobView) -> tuple[float, str]:
    return (j.submit_time, j.name)


def split_pools(jobs: Sequence[JobView], capacity: Mapping[str, int]) -> dict[str, list[JobView]]:
    """Voda runs one scheduler per GPU type.  Pinned jobs go to their type's pool; a job already
    running stays in its pool; other jobs are put, in FIFO order, into the pool with the lowest
    demand (sum of minimum workers) per GPU — a type-agnostic, deterministic choice."""
    pools: dict[str, list[JobView]] = {t: [] for t in sorted(capacity)}
    demand = {t: 0 for t in pools}
    free_agents = []
    for j in sorted(jobs, key=fifo_key):
        t = j.pinned_type or j.current_type
        if t is not None and t in pools:
            pools[t].append(j)
            demand[t] += j.min_workers
        elif j.pinned_type is None:
            free_agents.append(j)
    for j in free_agents:
        cands = [t for t in pools if capacity[t] > 0]
        if not cands:
            continue
        t = min(cands, key=lambda t: (demand[t] / capacity[t], t))
        pools[t].append(j)
        demand[t] += j.min_workers
    return pools


SinglePool = Callable[[list[JobView], int, float, str], dict[str, int]]


@dataclass
class Policy:
    """A named allocation policy.

    ``clairvoyant``: the policy reads a job's ``remaining_work`` / ``total_work`` (its length is
    known in advance); non-clairvoyant policies use only what a scheduler can observe (arrival,
    attained service, sizes, measured speed curves).  ``default_interval``: the policy's own
    scheduling tick in seconds (None: the simulator's / scheduler's default).  ``thresholds`` and
    ``promote_knob``: attained-service queue thresholds (GPU-seconds) and starvation promotion
    factor that whoever runs a policy with ``uses_priority_queues`` must track for it (None: the
    defaults, 3600 GPU-s and 8x; ``math.inf``: no promotion).  ``placement``: how whoever runs the
    policy places its workers (:func:`lavaflow.elastic.placement.place` mode: ``"auto"``
    consolidates and may migrate; ``"keep"`` never moves a running job, as the Pollux artifact's
    Tiresias).  ``aligned_tick``: reschedules happen only at multiples of the interval (a periodic
    scheduling round, as the Pollux simulator runs every policy), not as soon as the interval since
    the last one has passed.  ``periodic``: a round every interval while there are jobs (the Pollux
    artifact re-optimises every 60 s, as its learned models move).  ``shares_profiles``: whoever
    runs the policy lets jobs of one profile group learn from each other's measurements."""

    name: str
    elastic: bool
    needs_info: bool
    fn: Callable[..., dict[str, Assignment]]
    uses_priority_queues: bool = False
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    clairvoyant: bool = False
    default_interval: float | None = None
    thresholds: tuple[float, ...] | None = None
    promote_knob: float | None = None
    placement: str = "auto"
    aligned_tick: bool = False
    periodic: bool = False  # reschedule every interval while jobs exist, not only on events
    # seconds: while GPUs stand idle, a round this often even if nothing happened (0: none); for
    # learned models, which move as jobs report (Goodput: ``goodput.IDLE_ROUNDS``)
    idle_rounds: float = 0.0
    # jobs of one profile group share their measurements (lavaflow.io/profile-group), unless the
    # plugin's elastic.sharedProfiles says otherwise; False for Pollux, as its artifact runs it
    shares_profiles: bool = True
    # the policy takes ``node_sizes`` (GPUs per node of each type; Sia's menu of configurations
    # is whole nodes), which whoever runs it passes when it knows them
    node_aware: bool = False

    def __call__(
        self,
        jobs: Sequence[JobView],
        capacity: Mapping[str, int],
        now: float,
        node_sizes: Mapping[str, int] | None = None,
    ) -> dict[str, Assignment]:
        if self.node_aware and node_sizes:
            return self.fn(list(jobs), dict(capacity), now, **self.params, node_sizes=dict(node_sizes))
        return self.fn(list(jobs), dict(capacity), now, **self.params)


def per_pool(single: SinglePool) -> Callable[..., dict[str, Assignment]]:
    """Lift a one-GPU-type policy to several types the way Voda does: one pool per type."""

    def run(jobs: list[JobView], capacity: dict[str, int], now: float, **kw: Any) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {}
        for t, pool in split_pools(jobs, capacity).items():
            if not pool:
                continue
            res = single(pool, capacity[t], now, t, **kw)
            for name, n in res.items():
                if n > 0:
                    out[name] = Assignment(t, n)
        return out

    run.__name__ = getattr(single, "__name__", "policy")
    return run
