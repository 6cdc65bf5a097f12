"""A cluster with a dashboard in front of it, for the browser tests and the screenshots script.

In a thread of its own, one event loop runs the API double, a lavaflow scheduler (with the
elastic action), the controllers, the fake kubelet (kube_harness.Cluster), and ``lavaflow
dashboard``'s live state and web server on a free port of 127.0.0.1. The caller (a browser
driven synchronously) creates objects with :meth:`DashboardCluster.create` and stops it all
with :meth:`DashboardCluster.stop`.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import threading
from typing import Any

import kube_harness
from kube_harness import Cluster
from lavaflow.dashboard.app import Dashboard, forecast_loop, make_app, server
from lavaflow.dashboard.forecast_column import ForecastColumn
from lavaflow.dashboard.live import LiveState
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.testing import fake_node

# Debian's Chromium, as Playwright drives it here (never `playwright install`: its download fails).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

CONF = """\
actions: "enqueue, elastic, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: elastic
    arguments: {elastic.policy: Lavaflow, elastic.resizeInterval: 0s, elastic.resizeCost: 30s, elastic.oracle: true}
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def gpu_node(name: str, gpus: int, gpu_type: str) -> dict[str, Any]:
    n = fake_node(name, cpu="32", memory="128Gi", labels={"lavaflow.io/accelerator": gpu_type})
    for part in ("capacity", "allocatable"):
        n["status"][part]["nvidia.com/gpu"] = str(gpus)
    return n


NODES = [gpu_node("v100-0", 4, "v100"), gpu_node("v100-1", 4, "v100"), fake_node("cpu-0", cpu="8", memory="32Gi")]

QUEUES = [
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"weight": 2, "capability": {"cpu": "6"}, "reclaimable": True},
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "vision"},
        "spec": {"weight": 1, "parent": "research", "guarantee": {"resource": {"cpu": "1"}}},
    },
]


def elastic_job(name: str, lo: int, hi: int, duration: str, epochs: int = 1000) -> dict[str, Any]:
    """An elastic training job on v100 workers (speed-ups measured linear; no agent reports)."""
    return kube_harness.elastic_job(name, epochs, lo, hi, duration)


def cpu_job(name: str, queue: str, replicas: int, cpu: str, duration: str = "inf") -> dict[str, Any]:
    """A gang of ``replicas`` pods of ``cpu`` each (all or none), in ``queue``."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
                        "spec": {
                            "nodeSelector": {"type": "fake"},
                            "containers": [
                                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                            ],
                        },
                    },
                }
            ],
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DashboardCluster:
    """``with DashboardCluster() as dc: dc.url ...`` (see the module's docstring)."""

    def __init__(self, nodes: list[dict[str, Any]] | None = None, forecast: ForecastColumn | None = None) -> None:
        self.nodes = copy.deepcopy(nodes if nodes is not None else NODES)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.forecast = forecast
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="dashboard-cluster", daemon=True)
        self.cluster: Cluster | None = None
        self.live: LiveState | None = None

    def __enter__(self) -> DashboardCluster:
        self._thread.start()
        if not self._ready.wait(60) or self._error is not None:
            self.stop()
            raise RuntimeError(f"the cluster and its dashboard did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with Cluster(self.nodes, time_scale=0.01) as c:
            self.cluster = c
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(CONF))
            await c.until_ready()
            self.live = LiveState(c.client(), "API double")
            await self.live.start()
            dash = Dashboard(self.live.state, live=True, forecast=self.forecast or ForecastColumn())
            dash.keepalive = 1.0
            srv = server(make_app(dash), "127.0.0.1", self.port)
            serving = asyncio.create_task(srv.serve())
            follow = asyncio.create_task(dash.broadcast.follow(self.live.changed, self._stop))
            forecasts = asyncio.create_task(
                forecast_loop(dash, self.live.objects, load_scheduler_conf(CONF), self._stop)
            )
            while not srv.started:
                if serving.done():
                    await serving  # (raises why it could not start)
                await asyncio.sleep(0.02)
            self._ready.set()
            await self._stop.wait()
            srv.should_exit = True
            await asyncio.wait([serving], timeout=5)
            follow.cancel()
            forecasts.cancel()
            await self.live.stop()

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run ``coro`` on the cluster's loop and wait for its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def create(self, docs: list[dict[str, Any]]) -> None:
        assert self.cluster is not None
        self.call(self.cluster.create(docs))

    def create_workload(self, *extra: dict[str, Any]) -> None:
        """The queues and jobs the tests and the screenshots look at: an elastic job at 8 workers
        (``big``), a gang too big for any node in queue ``vision`` (``too-big``, pending) and a
        small one beside it (``fits``), then ``extra``."""
        self.create(QUEUES)
        self.create(
            [
                elastic_job("big", 2, 8, "inf"),
                cpu_job("too-big", "vision", 2, "40"),
                cpu_job("fits", "vision", 1, "1"),
                *extra,
            ]
        )

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop already ended
                pass
        self._thread.join(30)
