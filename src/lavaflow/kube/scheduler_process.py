"""`lavaflow scheduler` on a cluster: informers feed the SchedulerCache, decisions go to the API.

The scheduling itself is the simulator's ``Scheduler.run_once``; this module runs the process
around it: informers into the cache (the pods whose binding is in flight kept where they are
going), leader election, jobs prepared ahead of the first cycle, then a cycle every period, each
in a thread of its own while the event loop goes on sending. What a cycle decided is the write
side's to send (bindings, evictions, statuses, events: see scheduler_writes).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from ..api.volcano import GROUP_NAME_ANNOTATION, PodGroupPhase
from ..scheduler.cache import PLUGIN_KIND_OF, PLUGIN_KINDS, SchedulerCache
from ..scheduler.framework.conf import SchedulerConfiguration, load_scheduler_conf
from ..scheduler.framework.node_choice import NodeChoice
from ..scheduler.model import ALLOCATED
from ..scheduler.scheduler import Scheduler
from ..store.base import DELETED
from .client import KubeClient
from .dispatch import Dispatcher
from .gang_source import GangSource
from .leader import LeaderElector, LostLeadership, lead
from .metrics import SchedulerMetrics, count_refusals
from .scheduler_writes import SchedulerWriter, with_status
from .store import KubeStore
from .tasks import cancel_and_wait
from .volcano_podgroup import VolcanoPodGroups
from .workload_api import WorkloadGangs
from .x_k8s_podgroup import CoschedulingGroups

log = logging.getLogger("lavaflow.kube")
_T = TypeVar("_T")

# Scheduler.prepare_jobs before the first cycle: after each wait of _PREPARE_WAIT, for this share
# of the time the event loop's thread was idle during the wait (at most _PREPARE_SLICE at a time).
_PREPARE_WAIT = 0.005
_PREPARE_SHARE = 1.0
_PREPARE_SLICE = 0.02
_PREPARE_BATCH = 100  # jobs per call
# The collector, paused while the informers sync, is turned back on after the first cycle, or
# this many seconds after the sync at most.
_GC_PAUSE_LIMIT = 30.0
# The interpreter's switch interval while a session runs in its thread (see KubeScheduler.cycle).
_SESSION_SWITCH_INTERVAL = 0.0005
# PodGroup phases as plain strs (read for every job; see scheduler.model.NOT_ADMITTED).
_PG_PENDING = PodGroupPhase.PENDING.value
_PG_WAITING = (PodGroupPhase.PENDING.value, PodGroupPhase.INQUEUE.value)


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class KubeScheduler:
    def __init__(
        self,
        client: KubeClient,
        conf: SchedulerConfiguration | None = None,
        scheduler_names: tuple[str, ...] = ("volcano", "lavaflow"),
        period: float = 1.0,
        bind_workers: int = 64,
        write_workers: int = 32,
        metrics: SchedulerMetrics | None = None,
        emit_events: bool = True,
        identity: str | None = None,
        elector: LeaderElector | None = None,
        idle_cycles_every: int = 10,
        evictions_per_second: float = 20.0,
        eviction_burst: int = 100,
        pause_gc_while_syncing: bool = False,
        protobuf_pods: bool = True,
        node_choice: NodeChoice | None = None,
    ) -> None:
        self.client = client
        self.pause_gc_while_syncing = pause_gc_while_syncing
        self.conf = conf or load_scheduler_conf()
        self.period = period
        self.metrics = metrics or SchedulerMetrics()
        for path, msg in self.conf.warnings:
            log.warning("scheduler configuration: %s: %s", path, msg)
        for name in self.conf.skipped_plugins:
            self.metrics.skipped_plugins.labels(plugin=name).set(1)
        self.identity = identity or default_identity()
        self.elector = elector
        self.idle_cycles_every = idle_cycles_every
        self.store = KubeStore(client, keep_raw=False)
        count_refusals(self.store, self.metrics.writes_refused, elector)
        for kind in ("Node", "PriorityClass", "Queue", "PodGroup", "Pod"):
            self.store.inform(kind)
        # Kinds only some plugins read are watched when a configured plugin needs them (their
        # CRDs may not be installed otherwise).
        configured = {p.name for tier in self.conf.tiers for p in tier.plugins}
        for kind in dict.fromkeys(k for plugin, kinds in PLUGIN_KIND_OF.items() if plugin in configured for k in kinds):
            self.store.inform(kind)
        self.cache = SchedulerCache(scheduler_names=scheduler_names)
        self.store.ours = frozenset(self.cache.scheduler_names)
        if not protobuf_pods:  # (else decided at start: where the server sends pods as protobuf)
            self.store.protobuf_pods = False
        self.scheduler = Scheduler(self.cache, self.conf, node_choice=node_choice)
        self.dispatch = Dispatcher(workers=bind_workers, status_workers=write_workers)
        # The gang APIs (see gang_source), each asked in turn: scheduler-plugins PodGroups
        # (scheduling.x-k8s.io) and the Kubernetes Workload API (scheduling.k8s.io v1alpha1
        # Workloads, v1alpha2 PodGroups) where the API server serves them, then Volcano's own
        # PodGroups, which take every status the others do not. (One list, the writer's too.)
        self.cosched = CoschedulingGroups(self)
        self.workloads = WorkloadGangs(self)
        self.volcano = VolcanoPodGroups(self)
        self.gang_sources: list[GangSource] = [self.cosched, self.workloads, self.volcano]
        # the write side: bindings, evictions, status writes and events (see scheduler_writes)
        self.writer = SchedulerWriter(
            client,
            self.store,
            self.cache,
            self.dispatch,
            self.metrics,
            self.gang_sources,
            self.identity,
            elector=elector,
            emit_events=emit_events,
            evictions_per_second=evictions_per_second,
            eviction_burst=eviction_burst,
        )
        self.cycles = 0
        self._preparing: asyncio.Task[None] | None = None  # Scheduler.prepare_jobs, until the first cycle
        self._touched: dict[str, None] | None = None  # the jobs it has yet to prepare, oldest first
        self._bare: dict[str, None] = {}  # and those touched before any of their pods came
        self._gc_paused = False  # the collector paused by run, until the first cycle
        self.last_tick = time.monotonic()
        self._last_version = -1
        self._idle = 0
        for kind, fn in (
            ("Queue", self.cache.on_queue),
            ("PriorityClass", self.cache.on_priority_class),
        ):

            def on_cluster(ev: str, obj: Any, old: Any, fn: Callable[[Any, bool], None] = fn) -> None:
                fn(obj, ev == DELETED)

            self.store.watch(kind, on_cluster)
        self.store.watch("PodGroup", self.on_podgroup)
        self.store.watch("Node", lambda ev, obj, old: self.cache.on_node(obj, ev == DELETED))
        self.store.watch("Pod", self.on_pod)
        for kind in PLUGIN_KINDS:

            def on_plugin(ev: str, obj: Any, old: Any, kind: str = kind) -> None:
                self.cache.on_object(kind, obj, ev == DELETED)

            self.store.watch(kind, on_plugin)

    # ------------------------------------------------------------------ cache feed
    def on_pod(self, event: str, pod: Any, old: Any) -> None:
        """A pod's event, as the cache should see it (also told by a gang source whose group came
        or went): its gang API's internal group named, and where its binding is in flight."""
        given = pod
        # (each leaves the pod as it is when its gang API is not served, or names no group of its
        # pods: no call per pod then)
        for source in self.gang_sources:
            if source.maps_pods and source.enabled:
                pod = source.on_pod(event, pod)
        inflight = self.writer.inflight  # bindings sent and not seen yet (none while the informers sync)
        if event == DELETED:
            if inflight:
                inflight.pop(given.key, None)
            self.cache.on_pod(pod, True)
            return
        if inflight:
            key = given.key
            if pod.spec.node_name:
                inflight.pop(key, None)
            elif key in inflight:
                pod = _assumed(pod, inflight[key])
        self.cache.on_pod(pod)
        touched = self._touched
        if touched is not None:
            group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
            if group is not None:
                uid = f"{pod.metadata.namespace or 'default'}/{group}"
                touched.pop(uid, None)  # to the end: the job's newest state is yet to come
                touched[uid] = None
                self._bare.pop(uid, None)

    def on_podgroup(self, event: str, pg: Any, old: Any) -> None:
        """A Volcano PodGroup's event: the cache sees the status decided for it while that is written."""
        pg_wanted = self.writer.pg_wanted
        if event == DELETED:
            pg_wanted.pop(pg.key, None)
            self.cache.on_podgroup(pg, True)
            return
        wanted = pg_wanted.get(pg.key) if pg_wanted else None  # (none while the informers sync)
        self.cache.on_podgroup(pg if wanted is None else with_status(pg, wanted))
        touched = self._touched
        if touched is not None:
            job = self.cache.jobs.get(pg.key)
            if job is not None and job.tasks:
                touched.pop(pg.key, None)
                touched[pg.key] = None
            else:  # its pods (if it has any yet) are likely still to come: prepared last
                self._bare[pg.key] = None

    @property
    def ready(self) -> bool:
        return self.store.synced

    @property
    def healthy(self) -> bool:
        return time.monotonic() - self.last_tick < max(30.0, 10 * self.period)

    # ------------------------------------------------------------------ run
    async def start(self) -> None:
        # Which optional gang APIs the server serves: asked at once, before the informers start.
        await asyncio.gather(*(source.discover() for source in self.gang_sources))
        await self.store.start()

    async def run(self, stop: asyncio.Event) -> None:
        """Informers, then (as leader, when electing) a cycle every period until ``stop``."""
        # The informers' first lists build most of what the process will hold (every node, pod and
        # PodGroup): nothing of it is garbage, so the collector is paused while they are applied
        # and what they built is then frozen out of later full collections (the scheduler command
        # asks for this; tests running many schedulers in one process do not).
        # Likewise the pods' use of their nodes: added to the nodes' rows at once when synced.
        paused = self.pause_gc_while_syncing and gc.isenabled()
        if paused:
            gc.disable()
            self._gc_paused = True
        synced = False
        self.cache.defer_usage()
        # What the first session would work out for every job, worked out in the meantime, in the
        # moments the informers wait for the server (until this process's first cycle).
        self._preparing = asyncio.get_running_loop().create_task(self._prepare_jobs(), name="prepare-jobs")
        if self.elector is not None:
            self.elector.start_observing()  # a standby counts a silent leader's lease from now
        try:
            await self.start()
            while not await self.store.wait_synced(5.0):
                if stop.is_set():
                    return
                log.info("waiting for the informer caches to sync")
            synced = True
        finally:
            self.cache.settle_usage()
            if paused:
                if synced:
                    # Still paused through the first cycle, whose full collections would otherwise
                    # scan its own new objects again and again on the way to its first binding
                    # (0.13 s at the #5819 restart); resumed after it (cycle), or after a while
                    # at most (a standby may wait long for the lease).
                    asyncio.get_running_loop().call_later(_GC_PAUSE_LIMIT, self._resume_gc)
                else:
                    self._resume_gc()
        await self._ensure_builtin_queues()
        if self.elector is None:
            await self._loop(stop)
            return
        try:
            await lead(self.elector, lambda: self._loop(stop), stop, self.metrics.leader)
        except LostLeadership as exc:
            dropped = await self.step_down()
            said = ", ".join(f"{n} {lane}" for lane, n in dropped.items() if n) or "none"
            raise LostLeadership(f"{exc}; unsent writes dropped: {said}") from None

    async def step_down(self) -> dict[str, int]:
        """Leadership lost: whatever was decided and not yet sent is dropped, not drained, since
        the new leader decides from its own view and two leaders' bindings could overcommit.
        Returns how many writes of each lane were dropped (the process says so when it exits)."""
        dropped = self.dispatch.waiting()
        await self.dispatch.stop()
        self.writer.inflight.clear()
        return dropped

    async def shutdown(self, drain: float = 1.0) -> None:
        """Graceful stop: let the bindings already decided go out (for at most ``drain`` seconds),
        drop status writes and events (the next leader decides statuses again from the server's
        view; events are best effort), release the lease, stop watching."""
        await self._stop_preparing()
        self.dispatch.drop_optional()
        await self.dispatch.drain(drain)
        await self.dispatch.stop()
        if self.elector is not None:
            await self.elector.release()
        await self.store.stop()

    async def crash(self) -> None:
        """Stop at once, as a killed process would (tests): nothing is drained or released."""
        await self._stop_preparing()
        await self.dispatch.stop()
        if self.elector is not None:
            await self.elector.stop_observing()
        await self.store.stop()

    async def _prepare_jobs(self) -> None:
        """Until the first cycle: ``Scheduler.prepare_jobs`` for the jobs the informers touched,
        the longest untouched first (a job's objects come over a while: its PodGroup, then its
        pods; a job none of whose pods came yet goes last), in slices of a few milliseconds that
        together take as much time as this thread was idle (the informers waiting for the
        server's next objects). At a large cluster's start, the first session then finds most
        jobs' vectors kept; a standby keeps them so until it leads. Exact either way: what is
        kept is keyed on each job's version. (Where the API server shares the host's cores, its
        busy moments are this thread's idle ones: docs/benchmarks.md.)"""
        touched = self._touched = {}
        bare = self._bare
        cache = self.cache
        budget = 0.0  # seconds of preparing owed for the idle time seen
        try:
            while True:
                wall, cpu = time.perf_counter(), time.thread_time()
                await asyncio.sleep(_PREPARE_WAIT)
                idle = (time.perf_counter() - wall) - (time.thread_time() - cpu)
                budget = min(budget + _PREPARE_SHARE * max(idle, 0.0), _PREPARE_SLICE)
                if not (touched or bare) or budget < _PREPARE_SLICE / 4:
                    continue
                start = time.perf_counter()
                end = start + budget
                while (touched or bare) and time.perf_counter() < end:
                    todo = touched or bare
                    uids = list(itertools.islice(todo, _PREPARE_BATCH))
                    for uid in uids:
                        del todo[uid]
                    jobs = cache.pg_jobs  # (read anew: scheduled_jobs() may replace it, sorted)
                    try:
                        self.scheduler.prepare_jobs([job for uid in uids if (job := jobs.get(uid)) is not None])
                    except Exception:  # a plugin's bug: the sessions work it all out as ever
                        log.exception("preparing jobs ahead of the first cycle failed; not preparing any more")
                        return
                budget -= time.perf_counter() - start
        finally:
            self._touched = None
            self._bare.clear()

    def _resume_gc(self) -> None:
        """The collector back on (paused from the process start, see run), what survived until
        now frozen out of its later full collections."""
        if self._gc_paused:
            self._gc_paused = False
            gc.freeze()
            gc.enable()

    async def _stop_preparing(self) -> None:
        task, self._preparing = self._preparing, None
        await cancel_and_wait([task])

    async def _loop(self, stop: asyncio.Event) -> None:
        async with self.store.lock:
            adopted = self.adopt_partial_gangs()
        if adopted:
            log.info("took over %d PodGroups a previous leader had started to bind (Pending -> Inqueue)", adopted)
        while not stop.is_set():
            started = time.monotonic()
            self.last_tick = started
            changed = self.store.version != self._last_version
            self._idle = 0 if changed else self._idle + 1
            if changed or self._idle >= self.idle_cycles_every:
                self._idle = 0
                await self.cycle()
            self.metrics.refresh_rate()
            self.metrics.refresh_writes(self.dispatch.waiting(), self.dispatch.events_dropped)
            left = self.period - (time.monotonic() - started)
            try:
                await asyncio.wait_for(stop.wait(), max(left, 0.0))
            except TimeoutError:
                pass

    def adopt_partial_gangs(self) -> int:
        """On taking the lead (or starting): a PodGroup still ``Pending`` on the server while some of
        its pods are bound was admitted by a leader that died before writing ``Inqueue``. Admitting
        it again would count its bound pods twice (as queue usage and inside its minResources), and
        on a cluster filled exactly the gang would never be admitted: stranded half-bound, holding
        its nodes. Such a gang is taken over as ``Inqueue`` instead, so allocate completes it with
        its remaining pods (or it waits as any admitted gang, never re-admitted)."""
        n = 0
        for job in self.cache.jobs.values():
            pg = job.pg
            if pg is None or (pg.status.phase or _PG_PENDING) != _PG_PENDING or pg.key in self.writer.pg_wanted:
                continue
            if not job.count(ALLOCATED):
                continue
            status = pg.status.model_dump(by_alias=True, exclude_none=True, mode="json")
            status["phase"] = PodGroupPhase.INQUEUE.value  # (.value: a status document, kept and sent)
            for source in self.gang_sources:  # (the last, Volcano's, takes any the others do not)
                if source.adopt(pg, status):
                    break
            n += 1
        return n

    async def _ensure_builtin_queues(self) -> None:
        from ..controllers.queue import builtin_queues

        for q in builtin_queues():
            if self.store.get("Queue", q.name) is None:
                try:
                    await self.store.acreate(q)
                except Exception as exc:  # the controller may have made it meanwhile
                    log.debug("creating queue %s: %s", q.name, exc)

    async def cycle(self) -> None:
        if self._preparing is not None:
            await self._stop_preparing()  # a session (in its own thread) and preparing never overlap
        if self.elector is not None and not self.elector.holding():
            return  # the renewal loop is about to step down; decide nothing from this view
        async with self.store.lock:
            self._last_version = self.store.version
            now = time.time()
            t0 = time.perf_counter()
            # Binds go out while the session continues (each job's as its statement commits).
            loop = asyncio.get_running_loop()

            def on_bind(key: str, node: str) -> None:
                try:
                    loop.call_soon_threadsafe(self.writer.bind_now, key, node)
                except RuntimeError:  # the process is stopping: the loop is closed
                    pass

            self.cache.on_bind = on_bind
            # While the session's thread computes, this thread sends its bindings: every step of a
            # request (write, read, parse) waits for the interpreter lock, which a busy thread gives
            # up only every switch interval (5 ms by default, so a binding took ~0.5 s to leave
            # during the first session over 87,000 running jobs; ~0.1 s with 0.5 ms).
            interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, _SESSION_SWITCH_INTERVAL))
            try:
                await in_daemon_thread(self.scheduler.run_once, now)
            finally:
                self.cache.on_bind = None
                sys.setswitchinterval(interval)
                self._resume_gc()  # (after the first cycle; nothing once resumed)
            self.metrics.cycle.observe(time.perf_counter() - t0)
            self.metrics.cycles.inc()
            self.cycles += 1
            d = self.cache.take_decisions()
            self._pending_gauge()
            self.writer.send(d)

    async def idle(self, timeout: float = 10.0) -> None:
        """Wait until every decision, status write and event of past cycles went out (tests)."""
        await self.dispatch.drain(timeout)
        await self.writer.settled(timeout)

    def _pending_gauge(self) -> None:
        counts: dict[str, int] = {}
        for q in self.cache.queues:
            counts[q] = 0
        for job in self.cache.scheduled_jobs().values():
            pg = job.pg
            if pg is not None and (pg.status.phase or _PG_PENDING) in _PG_WAITING:
                counts[job.queue] = counts.get(job.queue, 0) + 1
        for q, n in counts.items():
            self.metrics.pending_jobs.labels(queue=q).set(n)


def in_daemon_thread(fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """``fn(*args)`` in a daemon thread of its own. Unlike ``asyncio.to_thread`` (whose pool is
    joined at exit), a session still running when the process is told to stop does not hold the
    exit up: a graceful stop takes well under 2 s however large the cluster."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[_T] = loop.create_future()

    def done(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def target() -> None:
        value: _T | BaseException
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            ok, value = False, exc
        else:
            ok, value = True, result
        try:
            loop.call_soon_threadsafe(done, ok, value)
        except RuntimeError:  # loop closed
            pass

    threading.Thread(target=target, name="lavaflow-session", daemon=True).start()
    return fut


def _assumed(pod: Any, node: str) -> Any:
    """The pod as the cache should see it while its binding is in flight."""
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": node})})
