"""Prometheus metrics, /healthz and /readyz (prometheus-client + aiohttp)."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from aiohttp import web

    from .leader import LeaderElector
    from .store import KubeStore

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
E2E_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def _write_counters(r: CollectorRegistry) -> tuple[Counter, Counter]:
    """What both processes count of their writes: those fenced, and those the server refused."""
    fenced = Counter(
        "lavaflow_writes_fenced",
        "Bindings, evictions and status writes not sent because the lease could not be proven held (renew deadline passed).",
        ["kind"],
        registry=r,
    )
    refused = Counter(
        "lavaflow_api_writes_refused",
        "Writes (create, update, patch, delete, bind, evict) the API server refused, by kind, verb and HTTP status.",
        ["kind", "verb", "code"],
        registry=r,
    )
    return fenced, refused


def count_refusals(store: KubeStore, counter: Counter, elector: LeaderElector | None = None) -> None:
    """Count the writes ``store`` (a KubeStore) reports refused in ``counter``; with ``elector``
    (a LeaderElector), its Lease writes are reported through the store too."""
    store.refusal_hooks.append(lambda kind, verb, code: counter.labels(kind=kind, verb=verb, code=str(code)).inc())
    if elector is not None:
        elector.on_refused = store.refused


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cycle = Histogram(
            "lavaflow_scheduling_cycle_duration_seconds",
            "Duration of one scheduling cycle (session open to close).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "lavaflow_e2e_scheduling_latency_seconds",
            "Time from a pod's creation to its successful binding.",
            buckets=E2E_BUCKETS,
            registry=r,
        )
        self.bind_latency = Histogram(
            "lavaflow_binding_duration_seconds",
            "Latency of one pods/binding call.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.bound = Counter("lavaflow_pods_bound", "Pods bound by lavaflow.", registry=r)
        self.bind_errors = Counter("lavaflow_bind_errors", "Failed pods/binding calls.", ["reason"], registry=r)
        self.bound_rate = Gauge(
            "lavaflow_pods_bound_per_second", "Pods bound per second over the last 10 seconds.", registry=r
        )
        self.pending_jobs = Gauge(
            "lavaflow_pending_jobs", "PodGroups not yet running (Pending or Inqueue), per queue.", ["queue"], registry=r
        )
        self.preemptions = Counter(
            "lavaflow_preemptions", "Pods evicted to make room for other pods (preempt, reclaim).", registry=r
        )
        self.evictions = Counter("lavaflow_evictions", "Pods evicted through the Eviction API.", ["reason"], registry=r)
        self.evictions_delayed = Counter(
            "lavaflow_evictions_rate_limited", "Evictions held back by the eviction rate limit.", registry=r
        )
        self.cycles = Counter("lavaflow_scheduling_cycles", "Scheduling cycles run.", registry=r)
        self.elastic_resizes = Counter(
            "lavaflow_elastic_resizes",
            "Elastic training jobs started, resized, halted, and workers migrated, by kind.",
            ["kind"],
            registry=r,
        )
        self.fenced, self.writes_refused = _write_counters(r)
        self.leader = Gauge("lavaflow_leader", "1 while this replica holds the leader lease.", registry=r)
        self.relists = Gauge("lavaflow_informer_relists", "Relists after 410 Gone, per kind.", ["kind"], registry=r)
        self.writes_waiting = Gauge(
            "lavaflow_writes_waiting",
            "API writes decided but not yet sent, per lane (decision, status, event).",
            ["lane"],
            registry=r,
        )
        self.events_dropped = Gauge(
            "lavaflow_events_dropped", "Events dropped because too many were waiting (since start).", registry=r
        )
        self.skipped_plugins = Gauge(
            "lavaflow_scheduler_skipped_plugins",
            "Plugins named in the scheduler configuration that lavaflow does not implement and skips (1 each).",
            ["plugin"],
            registry=r,
        )
        self._binds: collections.deque[float] = collections.deque()

    def bound_one(self, created: float | None) -> None:
        now = time.time()
        self.bound.inc()
        if created:
            self.e2e.observe(max(0.0, now - created))
        self._binds.append(now)
        self.refresh_rate(now)

    def refresh_rate(self, now: float | None = None) -> None:
        now = now or time.time()
        while self._binds and self._binds[0] < now - 10:
            self._binds.popleft()
        self.bound_rate.set(len(self._binds) / 10.0)

    def refresh_writes(self, waiting: dict[str, int], dropped: int) -> None:
        for lane, n in waiting.items():
            self.writes_waiting.labels(lane=lane).set(n)
        self.events_dropped.set(dropped)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.syncs = Counter("lavaflow_controller_syncs", "Reconciles run, per controller.", ["controller"], registry=r)
        self.errors = Counter(
            "lavaflow_controller_errors", "Reconciles that failed, per controller.", ["controller"], registry=r
        )
        self.fenced, self.writes_refused = _write_counters(r)
        self.leader = Gauge("lavaflow_leader", "1 while this replica holds the leader lease.", registry=r)


async def serve_health(
    registry: CollectorRegistry | None,
    host: str,
    port: int,
    healthy: Callable[[], bool],
    ready: Callable[[], bool],
) -> Served:
    """Serve /metrics, /healthz and /readyz; returns a Served (``bound_port``, ``cleanup()``)."""
    from aiohttp import web

    async def metrics(_req: web.Request) -> web.Response:
        body = generate_latest(registry) if registry is not None else b""
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_req: web.Request) -> web.Response:
        ok = healthy()
        return web.Response(text="ok" if ok else "unhealthy", status=200 if ok else 503)

    async def readyz(_req: web.Request) -> web.Response:
        ok = ready()
        return web.Response(text="ok" if ok else "not ready", status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return Served(runner, site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


class Served:
    """A running aiohttp server: its port, and cleanup()."""

    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self.runner = runner
        self.bound_port = port

    async def cleanup(self) -> None:
        await self.runner.cleanup()
