"""`lavaflow controller` on a cluster: the simulator's controllers against an informer-backed store.

The controllers are the ones the simulator runs, built by the same function
(:func:`lavaflow.controllers.build_controllers`).
Watch events mark their keys dirty; a reconcile pass then runs in a worker
thread while the store's lock keeps the cache still, with each controller's
writes going through the API server (409 conflicts retried on a fresh copy).
A key whose reconcile fails is retried with exponential back-off, at most
``max_requeue`` times (Volcano's --max-requeue-num).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from ..controllers import build_controllers
from .client import KubeClient
from .leader import LeaderElector, lead
from .metrics import ControllerMetrics, count_refusals
from .store import KubeStore

log = logging.getLogger("lavaflow.kube")

INFORMED = (
    "Queue",
    "PriorityClass",
    "PodGroup",
    "Job",
    "Pod",
    "Command",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "BatchJob",
)
OPTIONAL_INFORMED = ("Service", "ConfigMap", "Secret", "NetworkPolicy", "JobFlow", "JobTemplate")


class KubeControllers:
    def __init__(
        self,
        client: KubeClient,
        scheduler_names: tuple[str, ...] = ("volcano", "lavaflow"),
        elector: LeaderElector | None = None,
        metrics: ControllerMetrics | None = None,
        resync: float = 1.0,
        max_requeue: int = 15,
        extra_kinds: tuple[str, ...] = (),
        concurrent_syncs: int = 64,
    ) -> None:
        self.client = client
        self.store = KubeStore(client, keep_raw=True)
        from ..api.kinds import API_KINDS

        kinds = list(INFORMED) + [k for k in OPTIONAL_INFORMED if k in API_KINDS and _has_model(k)] + list(extra_kinds)
        for kind in kinds:
            self.store.inform(kind)
        self.elector = elector
        self.metrics = metrics or ControllerMetrics()
        count_refusals(self.store, self.metrics.writes_refused, elector)
        self.resync = resync
        self.max_requeue = max_requeue
        self.controllers = build_controllers(self.store, time.time, scheduler_names).all()
        self.failures: dict[tuple[int, str], int] = {}
        # Per controller, the dirty keys not yet synced and when each was first seen dirty.
        self._waiting: dict[int, dict[str, int]] = {}
        self._seq = itertools.count()
        self.retry_at: dict[tuple[int, str], float] = {}
        self.wake = asyncio.Event()
        self.store.add_listener(lambda kind, ev, obj: self.wake.set())
        self.passes = 0
        self.last_tick = time.monotonic()
        # A key's writes (a job's PodGroup, pods and status, a queue's status) are sent while the
        # next keys sync (Volcano's controllers sync on several workers): at most this many keys
        # with writes under way at once. Each write that ends wakes the loop.
        self.store.defer_creates = True
        self.concurrent_syncs = concurrent_syncs
        self.store.on_written = self.wake.set

    @property
    def ready(self) -> bool:
        return self.store.synced

    @property
    def healthy(self) -> bool:
        return time.monotonic() - self.last_tick < max(60.0, 20 * self.resync)

    async def run(self, stop: asyncio.Event) -> None:
        if self.elector is not None:
            self.elector.start_observing()  # a standby counts a silent leader's lease from now
        await self.store.start()
        while not await self.store.wait_synced(5.0):
            if stop.is_set():
                return
            log.info("waiting for the informer caches to sync")
        if self.elector is not None:
            await lead(self.elector, lambda: self._loop(stop), stop, self.metrics.leader)
            return
        await self._loop(stop)

    async def shutdown(self) -> None:
        if self.elector is not None:
            await self.elector.release()
        await self.store.stop()

    async def _loop(self, stop: asyncio.Event) -> None:
        await self._ensure_builtin()
        while not stop.is_set():
            self.last_tick = time.monotonic()
            self.wake.clear()
            await self.reconcile()
            try:
                await asyncio.wait_for(_first_set(stop, self.wake), self._next_timeout())
            except TimeoutError:
                pass

    def _next_timeout(self) -> float:
        """Sleep until the next retry or controller timer (delayed actions, TTLs), at most one resync."""
        waits = [self.resync]
        if self.retry_at:
            waits.append(min(self.retry_at.values()) - time.monotonic())
        timers = [t for t in (getattr(c, "next_timer", lambda: None)() for c in self.controllers) if t is not None]
        if timers:
            waits.append(min(timers) - time.time())
        return max(0.0, min(waits))

    async def _ensure_builtin(self) -> None:
        from ..controllers.queue import builtin_queues

        for q in builtin_queues():
            if self.store.get("Queue", q.name) is None:
                try:
                    await self.store.acreate(q)
                except Exception as exc:
                    log.debug("creating queue %s: %s", q.name, exc)

    async def reconcile(self) -> int:
        """One pass: every dirty key of every controller, until nothing is dirty (bounded)."""
        async with self.store.lock:
            for c in self.controllers:
                fire = getattr(c, "fire_timers", None)
                if fire is not None:
                    fire(time.time())  # controllers run on wall-clock time here
            now = time.monotonic()
            for (cid, key), at in list(self.retry_at.items()):
                if at <= now:
                    del self.retry_at[(cid, key)]
                    for c in self.controllers:
                        if id(c) == cid:
                            c.mark(key)
            n = await asyncio.to_thread(self._settle)
        self.passes += 1
        return n

    def _settle(self) -> int:
        """Sync every dirty key, until none is left (bounded). A key whose earlier writes are still
        under way is not synced: it stays dirty and waits for them (their end wakes the loop), so
        its pods are never created twice and no sync waits on another key's round trips. At most
        ``concurrent_syncs`` keys of each controller have writes under way: past that its keys wait
        too, and nothing waits on a write here. Keys are synced in the order they became dirty (a
        new Job's PodGroup is not held back behind later work on other Jobs)."""
        done = 0
        store = self.store
        for _ in range(100):
            self._take_created(store.written_owners())  # ended writes may mark keys
            ran = 0
            for c in self.controllers:
                name = type(c).__name__
                writing = sum(1 for o in store._deferred if o is not None and o[0] is c)
                waiting = self._waiting.setdefault(id(c), {})
                for key in [k for k in waiting if k not in c.dirty]:
                    del waiting[key]  # (no longer dirty without a sync here: forgotten)
                while writing < self.concurrent_syncs:
                    for key in sorted(c.dirty.difference(waiting)):
                        waiting[key] = next(self._seq)
                    ready = sorted((k for k in c.dirty if not store.writing((c, k))), key=waiting.__getitem__)
                    if not ready:
                        break
                    for key in ready:
                        del waiting[key]
                        owner = (c, key)
                        if owner in store._deferred:  # its writes first (they have ended)
                            self._take_created([owner])
                            writing -= 1
                        c.dirty.discard(key)  # (taking them may have marked it again)
                        store.owner = owner
                        try:
                            c.sync(key)
                            self.failures.pop((id(c), key), None)
                            self.metrics.syncs.labels(controller=name).inc()
                        except Exception as exc:
                            self._failed(c, key, exc)
                        finally:
                            store.owner = None
                        ran += 1
                        if owner in store._deferred:
                            writing += 1
                            if writing >= self.concurrent_syncs:
                                break
            done += ran
            if not ran:
                break
        return done

    def _take_created(self, owners: list[tuple[Any, str]]) -> None:
        """Apply the results of ``owners``' deferred writes (waiting for those under way); a failed
        one fails its key's sync (retried with back-off)."""
        for o in owners:
            exc = self.store.take_created(o)
            if exc is not None and o is not None:
                self._failed(o[0], o[1], exc)

    def _failed(self, c: Any, key: str, exc: BaseException) -> None:
        name = type(c).__name__
        self.metrics.errors.labels(controller=name).inc()
        n = self.failures.get((id(c), key), 0) + 1
        self.failures[(id(c), key)] = n
        if n <= self.max_requeue:
            self.retry_at[(id(c), key)] = time.monotonic() + min(0.05 * 2 ** (n - 1), 30.0)
            log.warning("%s %s: %s (retry %d)", name, key, _said(exc), n)
        else:
            log.error("%s %s: %s (giving up after %d retries)", name, key, _said(exc), n - 1)
            self.failures.pop((id(c), key), None)


def _has_model(kind: str) -> bool:
    from ..api.kinds import kind_info

    return kind_info(kind).model is not None


async def _first_set(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set. The waits are made here, not by the caller: a caller's
    timeout can cancel this before it starts, and waits made for it would then never be awaited."""
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


def _said(exc: BaseException) -> str:
    """An exception for the log: its type always, its message where it has one (a bare
    ``KeyError()`` or ``AssertionError()`` would otherwise log as an empty string)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
