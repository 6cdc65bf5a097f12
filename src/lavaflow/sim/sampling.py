"""The simulator's timeline: cluster allocation, pod counts and per-queue allocation over time.

A point is taken after every event time. Its figures are kept up to date from what changed
since the previous point (the pods with an event, the jobs whose PodGroup changed, the binds and
evictions of a cycle), so taking a point costs the number of changes, not the number of pods.

A queue's allocation is the sum of its running pods' requests, added in the order the scheduler
cache holds its tasks (the order in which the figures were always computed). When every request
is a multiple of 1/1024 and the sums stay within float precision, that sum is exact whatever the
order, so it is kept as an integer count of 1/1024 units and updated per change; otherwise (e.g.
100m cpu) the queue's running pods are summed again in cache order when it changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..api.volcano import PodGroup
    from ..scheduler.cache import SchedulerCache
    from ..scheduler.framework.session import Session
    from ..scheduler.model import TaskInfo
    from ..store.memory import MemoryStore

_UNIT = 1024  # exact sums are kept in 1/1024 of a resource unit
_MAX_SCALE = 10  # requests finer than 1/1024 are summed in order instead


def _scale(v: float) -> int | None:
    """The smallest k <= 10 such that v * 2**k is an integer, or None."""
    for k in range(_MAX_SCALE + 1):
        m = v * (1 << k)
        if m == int(m):
            return k
    return None


def _count_units(resreq: np.ndarray) -> list[tuple[int, int]] | None:
    """Each request as (its value in 1/1024 units, its scale), or None if one is finer."""
    out = []
    for v in resreq.tolist():
        k = _scale(v)
        if k is None:
            return None
        out.append((int(v * (1 << k)) << (_MAX_SCALE - k), k))
    return out


_MISSING = object()
_UNITS_KEPT = 4096  # distinct request vectors remembered (TimelineSampler._units)


class _Queue:
    __slots__ = ("running", "sums", "scale", "odd", "amounts")

    def __init__(self) -> None:
        # pod key -> (cache order, requests, their units as _units gave them when added)
        self.running: dict[str, tuple[int, np.ndarray, list[tuple[int, int]] | None]] = {}
        self.sums: list[int] = []  # per resource, in 1/1024 units, of requests with a scale
        self.scale: list[int] = []  # per resource, the largest scale ever added
        self.odd = 0  # running pods with a request finer than 1/1024
        # (resource count, amounts) _queue_amounts last gave: points repeat them until a pod comes
        # or goes (points share the dict, which nothing changes)
        self.amounts: tuple[int, dict[str, float]] | None = None


class TimelineSampler:
    def __init__(self, store: MemoryStore, cache: SchedulerCache) -> None:
        self.cache = cache
        self.store = store
        self.dirty: dict[str, None] = {}  # pod keys whose task may have changed since the last point
        self.seen: dict[str, Any] = {}  # pod key -> ("run", queue, units or None) or "pending"
        self.order: dict[str, tuple[Any, int]] = {}  # pod key -> (task object, its place in cache order)
        self._next = itertools.count()
        self.running = 0
        self.pending = 0
        self.queues: dict[str, _Queue] = {}
        self._taken: tuple[int, Any] | None = None  # (store version, session) of the last point
        self.job_queues: dict[str, str] = {}  # PodGroup key -> the queue its tasks were last marked in
        self._units_of: dict[bytes, list[tuple[int, int]] | None] = {}  # see _units
        # (node set version, allocatable array, node count, resource count) and the capacity figures
        # worked out from them: nodes change rarely, points are taken after every event time
        self._capacity: tuple[tuple[Any, ...], dict[str, float]] | None = None
        # Registered after the scheduler cache's handlers: the cache has seen each event first.
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", self._on_podgroup)

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        meta = pod.metadata
        key = f"{meta.namespace or 'default'}/{meta.name}"  # pod.key
        self.dirty[key] = None
        t = self.cache.tasks.get(key)
        if t is not None:
            known = self.order.get(key)
            if known is None or known[0] is not t:  # a new task: the cache appended it
                self.order[key] = (t, next(self._next))

    def _on_podgroup(self, event: str, pg: PodGroup, old: PodGroup | None) -> None:
        job = self.cache.jobs.get(pg.key)
        if job is None:
            return
        # The job's queue may have changed: its tasks' points move with it. Most PodGroup updates
        # (status, annotations such as progress reports) leave the queue as it was.
        if event == "DELETED":
            self.job_queues.pop(pg.key, None)
        elif self.job_queues.get(pg.key) != job.queue:
            self.job_queues[pg.key] = job.queue
        else:
            return
        self.dirty.update(dict.fromkeys(job.tasks))

    def touched(self, keys: Iterable[str]) -> None:
        """Pods a scheduling cycle changed without an event of their own (binds, evictions)."""
        self.dirty.update(dict.fromkeys(keys))

    def _settle(self) -> None:
        cache = self.cache
        for key in self.dirty:
            t = cache.tasks.get(key)
            new: Any
            if t is None:
                new = None
                self.order.pop(key, None)
            elif t.node >= 0:
                job = cache.jobs.get(t.job)
                new = ("run", job.queue if job is not None else "default", t)
            elif t.status == 0:
                new = "pending"
            else:
                new = None
            old = self.seen.get(key)
            if old == new:
                continue
            if old == "pending":
                self.pending -= 1
            elif old is not None:
                self._remove(key, old[1])
            if new is None:
                self.seen.pop(key, None)
                continue
            self.seen[key] = new
            if new == "pending":
                self.pending += 1
            else:
                self._add(key, new[1], new[2])
        self.dirty.clear()

    def _add(self, key: str, queue: str, task: TaskInfo) -> None:
        self.running += 1
        q = self.queues.get(queue)
        if q is None:
            q = self.queues[queue] = _Queue()
        q.amounts = None
        resreq = task.resreq
        units = self._units(resreq)
        q.running[key] = (self.order[key][1], resreq, units)
        if units is None:
            q.odd += 1
            return
        if len(q.sums) < len(units):
            q.sums.extend([0] * (len(units) - len(q.sums)))
            q.scale.extend([0] * (len(units) - len(q.scale)))
        for i, (u, k) in enumerate(units):
            q.sums[i] += u
            if k > q.scale[i]:
                q.scale[i] = k

    def _remove(self, key: str, queue: str) -> None:
        self.running -= 1
        q = self.queues[queue]
        _, _, units = q.running.pop(key)  # (a task's requests do not change while it runs)
        q.amounts = None
        if units is None:
            q.odd -= 1
        else:
            for i, (u, _) in enumerate(units):
                q.sums[i] -= u
        if not q.running:
            del self.queues[queue]

    def _units(self, resreq: np.ndarray) -> list[tuple[int, int]] | None:
        """``_count_units`` of a request vector, kept by its values (a job's pods, and every
        incarnation of them, request the same)."""
        raw = resreq.tobytes()
        hit = self._units_of.get(raw, _MISSING)
        if hit is _MISSING:
            if len(self._units_of) >= _UNITS_KEPT:
                self._units_of.clear()
            hit = self._units_of[raw] = _count_units(resreq)
        return hit  # type: ignore[return-value]

    def _queue_amounts(self, q: _Queue, names: list[str]) -> dict[str, float]:
        kept = q.amounts
        if kept is not None and kept[0] == len(names):
            return kept[1]
        if not q.odd and all(s < (1 << (53 - k)) * _UNIT for s, k in zip(q.sums, q.scale)):
            sums = q.sums
            out = {nm: sums[i] / _UNIT for i, nm in enumerate(names) if nm != "pods" and i < len(sums) and sums[i]}
        else:
            # Sum in cache order, exactly as the figures were always computed.
            acc = np.zeros(len(names))
            for _, resreq, _ in sorted(q.running.values(), key=lambda e: e[0]):
                acc[: len(resreq)] += resreq
            out = {nm: float(acc[i]) for i, nm in enumerate(names) if nm != "pods" and acc[i]}
        q.amounts = (len(names), out)
        return out

    def point(self, now: float, session: Session | None) -> dict[str, Any] | None:
        """The timeline point at ``now``, or None when nothing changed since the last one."""
        taken = (self.store.version, session)
        if not self.dirty and self._taken is not None and self._taken[0] == taken[0] and self._taken[1] is session:
            return None
        self._taken = taken
        self._settle()
        cache = self.cache
        names = cache.index.names
        nodes = cache.nodes
        used = nodes.view("used").sum(axis=0)
        cap_key = (nodes.version, nodes.allocatable, len(nodes.names), len(names))
        kept = self._capacity
        if kept is not None and kept[0][1] is cap_key[1] and kept[0] == cap_key:
            capacity = kept[1]
        else:
            cap = nodes.view("allocatable").sum(axis=0)
            capacity = {nm: float(cap[i]) for i, nm in enumerate(names) if nm != "pods"}
            self._capacity = (cap_key, capacity)
        queues = {name: self._queue_amounts(q, names) for name, q in sorted(self.queues.items())}
        deserved = {}
        if session is not None:
            for q, share in sorted(session.deserved_shares().items()):
                d = share.tolist()  # (Python numbers: indexing the array costs a numpy scalar each)
                deserved[q] = {nm: float(d[i]) for i, nm in enumerate(names) if nm != "pods" and i < len(d) and d[i]}
        return {
            "time": now,
            "allocated": {nm: u for nm, u in zip(names, used.tolist()) if nm != "pods"},
            "capacity": capacity,
            "runningPods": self.running,
            "pendingPods": self.pending,
            "queues": queues,
            "deserved": deserved,
        }
