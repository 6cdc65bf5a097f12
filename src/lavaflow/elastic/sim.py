"""Discrete-event trace replay of elastic training jobs on a GPU cluster.

Events: job arrivals, completions, node changes and Tiresias priority changes.  Each requests a
reschedule, rate-limited to one per ``resched_interval`` seconds (Voda's default 30 s).  A
reschedule asks the policy for every waiting/running job's (GPU type, workers), places the workers
(best fit + fewest moves, :mod:`.placement`) and applies the changes in Voda's order: halts,
scale-ins, starts, scale-outs.  Every start, resize, type change or migration pauses the job for
``resize_cost`` seconds (checkpoint + restart).  Between events every running job progresses at
the rate its speed model gives for its placement and GPU type; a job completes when its work is
done.  Time advances exactly from event to event (no fixed tick), so completions are exact.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .job import ElasticJobSpec
from .results import JobResult, SimResult
from .placement import Node, place, placement_shape
from .policies import JobView, Policy, check_allocation
from .policies.tiresias import DEFAULT_THRESHOLDS
from .speed import rate_curve

EPS = 1e-9
DEFAULT_INTERVAL = 30.0  # Voda's default resched rate limit


@dataclass
class Cluster:
    nodes: list[Node]

    @property
    def capacity(self) -> dict[str, int]:
        cap: dict[str, int] = {}
        for n in self.nodes:
            cap[n.gpu_type] = cap.get(n.gpu_type, 0) + n.gpus
        return cap

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpus_per_node(self) -> int:
        return max((n.gpus for n in self.nodes), default=1)

    @classmethod
    def homogeneous(cls, nodes: int, gpus_per_node: int, gpu_type: str = "default") -> Cluster:
        return cls([Node(f"{gpu_type}-{i}", gpus_per_node, gpu_type) for i in range(nodes)])

    @classmethod
    def typed(cls, spec: Mapping[str, int], gpus_per_node: int) -> Cluster:
        nodes = []
        for t, count in spec.items():
            nodes += [Node(f"{t}-{i}", gpus_per_node, t) for i in range(count)]
        return cls(nodes)


@dataclass
class NodeEvent:
    time: float
    node: Node
    up: bool


@dataclass
class _State:
    spec: ElasticJobSpec
    remaining: float
    curves: dict[str, tuple[float, ...]]
    gpu_type: str | None = None
    workers: int = 0
    placement: dict[str, int] = field(default_factory=dict)
    rate: float = 0.0
    paused_until: float = 0.0
    first_start: float | None = None
    finish: float | None = None
    attained: float = 0.0
    queue_service: float = 0.0
    running_time: float = 0.0
    waiting_time: float = 0.0
    run_start: float | None = None
    last_run_len: float = 0.0
    wait_since: float = 0.0
    queue_entered: float = 0.0
    resizes: int = 0
    halts: int = 0
    migrations: int = 0
    history: list[tuple[float, int, str | None]] = field(default_factory=list)


def _view(s: _State, now: float) -> JobView:
    return JobView(
        name=s.spec.name,
        submit_time=s.spec.submit_time,
        min_workers=s.spec.min_workers,
        max_workers=s.spec.max_workers,
        requested=s.spec.requested,
        rates=s.curves,
        remaining_work=s.remaining,
        total_work=s.spec.work,
        priority=s.spec.priority,
        current_workers=s.workers,
        current_type=s.gpu_type if s.workers else None,
        pinned_type=s.spec.gpu_type,
        first_start=s.first_start,
        attained_service=s.attained,
        queue_service=s.queue_service,
        running_time=s.running_time,
        waiting_time=s.waiting_time,
        queue_entered=s.queue_entered,
        done_work=max(s.spec.work - s.remaining, 0.0),
    )


def simulate(
    jobs: Sequence[ElasticJobSpec],
    cluster: Cluster,
    policy: Policy,
    resched_interval: float | None = None,
    resize_cost: float = 30.0,
    node_events: Sequence[NodeEvent] = (),
    thresholds: Sequence[float] | None = None,
    promote_knob: float | None = None,
    max_time: float | None = None,
    validate: bool = True,
) -> SimResult:
    """``resched_interval``, ``thresholds`` and ``promote_knob`` default to the policy's own
    (``Policy.default_interval`` etc.), else 30 s, 3600 GPU-s and 8x."""
    wall0 = _time.perf_counter()
    if resched_interval is None:
        resched_interval = policy.default_interval if policy.default_interval is not None else DEFAULT_INTERVAL
    if thresholds is None:
        thresholds = policy.thresholds if policy.thresholds is not None else DEFAULT_THRESHOLDS
    if promote_knob is None:
        promote_knob = policy.promote_knob if policy.promote_knob is not None else 8.0
    nodes = list(cluster.nodes)
    gpn = cluster.gpus_per_node
    all_types = sorted({n.gpu_type for n in nodes} | {e.node.gpu_type for e in node_events})
    pending = sorted(jobs, key=lambda j: (j.submit_time, j.name))
    for spec in pending:
        if spec.gpu_type is not None and spec.gpu_type not in all_types:
            raise ValueError(f"job {spec.name}: GPU type {spec.gpu_type!r} not in the cluster ({', '.join(all_types)})")
    nevents = sorted(node_events, key=lambda e: e.time)
    states: dict[str, _State] = {}
    active: dict[str, _State] = {}
    done: list[_State] = []
    pi = ei = 0
    t = pending[0].submit_time if pending else 0.0
    last_resched = -math.inf
    resched_due: float | None = None
    timeline: list[tuple[float, dict[str, int]]] = [(t, {})]
    n_resched = 0
    curve_cache: dict[tuple, tuple[float, ...]] = {}
    thresholds = tuple(sorted(thresholds))

    def curves_for(spec: ElasticJobSpec) -> dict[str, tuple[float, ...]]:
        out = {}
        for ty in all_types:
            if spec.gpu_type is not None and ty != spec.gpu_type:
                continue
            key = (id(spec.speed), ty, spec.max_workers)
            c = curve_cache.get(key)
            if c is None:
                c = rate_curve(spec.speed, ty, spec.max_workers, gpn)
                curve_cache[key] = c
            out[ty] = c
        return out

    def capacity() -> dict[str, int]:
        cap = {ty: 0 for ty in all_types}
        for n in nodes:
            cap[n.gpu_type] += n.gpus
        return cap

    def record_alloc() -> None:
        alloc: dict[str, int] = {}
        for s in active.values():
            if s.workers:
                alloc[s.gpu_type] = alloc.get(s.gpu_type, 0) + s.workers
        if timeline and timeline[-1][0] == t:
            timeline[-1] = (t, alloc)
        else:
            timeline.append((t, alloc))

    def next_priority_change() -> float:
        best = math.inf
        for s in active.values():
            if s.workers:
                for th in thresholds:
                    if s.queue_service < th - EPS:
                        best = min(best, t + (th - s.queue_service) / s.workers)
                        break
            elif s.last_run_len > 0 and s.queue_service > 0:
                best = min(best, s.wait_since + promote_knob * s.last_run_len)
        return best

    def reschedule() -> None:
        nonlocal n_resched, last_resched
        n_resched += 1
        last_resched = t
        cap = capacity()
        views = [_view(s, t) for s in active.values()]
        result = policy(views, cap, t)
        if validate:
            check_allocation(views, cap, result)
        # per-type placement
        new_type: dict[str, str | None] = {}
        new_n: dict[str, int] = {}
        for name in active:
            a = result.get(name)
            new_type[name] = a.gpu_type if a and a.workers else None
            new_n[name] = a.workers if a else 0
        placements: dict[str, dict[str, int]] = {}
        migrations: dict[str, int] = {}
        for ty in all_types:
            ty_nodes = [n for n in nodes if n.gpu_type == ty]
            reqs = {name: new_n[name] for name in active if new_type[name] == ty}
            cur = {name: s.placement for name, s in active.items() if s.workers and s.gpu_type == ty}
            pl, mig = place(ty_nodes, cur, reqs)
            placements.update(pl)
            for k, v in mig.items():
                if new_type[k] == active[k].gpu_type:
                    migrations[k] = v
        # apply: halts -> scale-ins -> starts -> scale-outs
        def phase(s: _State) -> int:
            n0, n1 = s.workers, new_n[s.spec.name]
            if n1 == 0:
                return 0
            if n0 and n1 < n0:
                return 1
            if n0 == 0:
                return 2
            return 3

        for s in sorted(active.values(), key=lambda s: (phase(s), s.spec.submit_time, s.spec.name)):
            name = s.spec.name
            n0, n1 = s.workers, new_n[name]
            ty1 = new_type[name]
            if n1 == 0:
                if n0:
                    s.halts += 1
                    s.last_run_len = t - (s.run_start if s.run_start is not None else t)
                    s.run_start = None
                    s.wait_since = t
                    s.workers, s.gpu_type, s.placement, s.rate = 0, None, {}, 0.0
                    s.history.append((t, 0, None))
                continue
            pl = placements.get(name, {})
            changed = n0 != n1 or s.gpu_type != ty1
            moved = migrations.get(name, 0) if n0 else 0
            if n0 == 0:
                if s.first_start is None:
                    s.first_start = t
                s.run_start = t
                changed = True
            elif changed:
                s.resizes += 1
            if moved:
                s.migrations += moved
            if changed or moved:
                s.paused_until = t + resize_cost
            s.workers, s.gpu_type, s.placement = n1, ty1, dict(pl)
            s.rate = s.spec.speed.rate(placement_shape(pl), ty1)
            if changed:
                s.history.append((t, n1, ty1))
        record_alloc()

    def request_resched(force: bool = False) -> None:
        nonlocal resched_due
        due = t if force else max(t, last_resched + resched_interval)
        resched_due = due if resched_due is None else min(resched_due, due)

    while pending[pi:] or active:
        if max_time is not None and t >= max_time:
            break
        t_arr = pending[pi].submit_time if pi < len(pending) else math.inf
        t_node = nevents[ei].time if ei < len(nevents) else math.inf
        t_done = math.inf
        for s in active.values():
            if s.workers and s.rate > 0:
                t_done = min(t_done, max(t, s.paused_until) + s.remaining / s.rate)
        t_prio = next_priority_change() if policy.uses_priority_queues else math.inf
        t_res = resched_due if resched_due is not None else math.inf
        t_next = min(t_arr, t_node, t_done, t_prio, t_res)
        if t_next == math.inf:
            # nothing can happen any more: jobs that can never run (e.g. min > cluster)
            break
        if max_time is not None:
            t_next = min(t_next, max_time)
        dt = t_next - t
        if dt > 0:
            for s in active.values():
                if s.workers:
                    s.attained += s.workers * dt
                    s.queue_service += s.workers * dt
                    s.running_time += dt
                    prog = t_next - max(t, s.paused_until)
                    if prog > 0:
                        s.remaining -= s.rate * prog
                else:
                    s.waiting_time += dt
        t = t_next
        dirty = False
        # completions
        finished = [s for s in active.values() if s.workers and s.remaining <= EPS * max(s.spec.work, 1.0)]
        for s in finished:
            s.remaining = 0.0
            s.finish = t
            s.history.append((t, 0, None))
            s.workers, s.placement, s.rate = 0, {}, 0.0
            del active[s.spec.name]
            done.append(s)
            dirty = True
        if finished:
            record_alloc()
        # arrivals
        while pi < len(pending) and pending[pi].submit_time <= t + EPS:
            spec = pending[pi]
            pi += 1
            s = _State(spec=spec, remaining=float(spec.work), curves=curves_for(spec), wait_since=t,
                       queue_entered=spec.submit_time)
            states[spec.name] = s
            active[spec.name] = s
            dirty = True
        # node changes: reschedule at once (workers on a lost node are gone)
        force = False
        while ei < len(nevents) and nevents[ei].time <= t + EPS:
            ev = nevents[ei]
            ei += 1
            if ev.up:
                if all(n.name != ev.node.name for n in nodes):
                    nodes.append(ev.node)
            else:
                nodes = [n for n in nodes if n.name != ev.node.name]
                for s in active.values():
                    if ev.node.name in s.placement:
                        s.placement.pop(ev.node.name)
            force = dirty = True
        # Tiresias: promotions of starved jobs, demotions on crossing a threshold
        if policy.uses_priority_queues:
            for s in active.values():
                if (
                    not s.workers
                    and s.last_run_len > 0
                    and s.queue_service > 0
                    and t + EPS >= s.wait_since + promote_knob * s.last_run_len
                ):
                    s.queue_service = 0.0
                    s.queue_entered = t
                    dirty = True
                elif s.workers and any(abs(s.queue_service - th) <= 1e-6 * max(th, 1.0) for th in thresholds):
                    s.queue_entered = t
                    dirty = True
            if t_prio <= t + EPS:
                dirty = True
        if dirty:
            request_resched(force)
        if resched_due is not None and resched_due <= t + EPS:
            resched_due = None
            if active:
                reschedule()
    # jobs that never finished
    for s in active.values():
        done.append(s)
    for spec in pending[pi:]:
        s = _State(spec=spec, remaining=float(spec.work), curves={})
        done.append(s)
    results = []
    for s in sorted(done, key=lambda s: (s.spec.submit_time, s.spec.name)):
        results.append(
            JobResult(
                name=s.spec.name,
                application=s.spec.application,
                submit=s.spec.submit_time,
                start=s.first_start,
                finish=s.finish,
                jct=(s.finish - s.spec.submit_time) if s.finish is not None else None,
                resizes=s.resizes,
                halts=s.halts,
                migrations=s.migrations,
                gpu_seconds=s.attained,
                history=s.history,
            )
        )
    return SimResult(
        policy=policy.name,
        jobs=results,
        capacity=cluster.capacity,
        timeline=timeline,
        reschedules=n_resched,
        wall_seconds=_time.perf_counter() - wall0,
        end_time=t,
        clairvoyant=policy.clairvoyant,
    )
