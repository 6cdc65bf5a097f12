"""A cluster for the Kubernetes-layer tests: the API double (or a real server), the scheduler,
the controllers, the admission webhook's logic and a fake kubelet, all in one process."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from pathlib import Path
from typing import Any

import yaml

from lavaflow.api.kinds import API_KINDS
from lavaflow.kube import codec
from lavaflow.kube.client import ClientConfig, KubeClient, load_config
from lavaflow.kube.controller_process import KubeControllers
from lavaflow.kube.leader import LeaderElector
from lavaflow.kube.ops import create_manifest, list_objects
from lavaflow.kube.scheduler_process import KubeScheduler
from lavaflow.kube.webhook import WebhookServer
from lavaflow.testing import ApiDouble, FakeKubelet, fake_node, lift_not_ready_taint, webhook_admitter

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class DoubleView:
    """The API double's own objects as a read-only store (for the webhook running inside it)."""

    def __init__(self, double: ApiDouble) -> None:
        self.double = double
        self.informers = {"Queue": None, "PodGroup": None, "Namespace": None}

    def list(self, kind: str) -> list[Any]:
        res = API_KINDS[kind]
        out = []
        for raw in list(self.double.objects[ApiDouble._bucket(res)].values()):
            obj = codec.decode(res, raw)
            if obj is not None:
                out.append(obj)
        return out

    def get(self, kind: str, key: str) -> Any | None:
        return next((o for o in self.list(kind) if o.key == key), None)


def load_example(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, objects, held pods) of an example file; NodeGroups become fake nodes."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    nodes, objects, held = [], [], []
    for d in docs:
        if d["kind"] == "NodeGroup":
            cap = {k: str(v) for k, v in d["spec"]["capacity"].items()}
            for i in range(int(d["spec"].get("count", 1))):
                nodes.append(
                    fake_node(
                        f"{d['metadata']['name']}-{i}",
                        cap.get("cpu", "1"),
                        cap.get("memory", "1Gi"),
                        cap.get("pods", "110"),
                        d["spec"].get("labels"),
                    )
                )
        elif "sim.lavaflow.io/spawned-by" in ((d.get("metadata") or {}).get("annotations") or {}):
            held.append(d)
        else:
            objects.append(d)
    return nodes, objects, held


class Cluster:
    """Async context manager: ``async with Cluster(nodes) as c: ...``."""

    def __init__(
        self,
        nodes: list[dict[str, Any]] | None = None,
        held: list[dict[str, Any]] | None = None,
        period: float = 0.05,
        time_scale: float = 0.01,
        lease: bool = False,
        real: bool = False,
        namespace_prefix: str = "",
        kubelet: Any = None,
    ) -> None:
        """``kubelet``: a function of a client returning the kubelet to run instead of the
        ``FakeKubelet`` (e.g. a ``ProcessKubelet``, which registers its own nodes: never both)."""
        self.nodes = nodes or []
        self.held = held or []
        self.period = period
        self.time_scale = time_scale
        self.lease = lease
        self.real = real
        self.double: ApiDouble | None = None
        self.stop = asyncio.Event()
        self.schedulers: list[tuple[KubeScheduler, asyncio.Task]] = []
        self.controllers: KubeControllers | None = None
        self._ctrl_task: asyncio.Task | None = None
        self.clients: list[KubeClient] = []
        self.make_kubelet = kubelet

    def client(self) -> KubeClient:
        if self.real:
            cfg = load_config(os.environ.get("LAVAFLOW_TEST_KUBECONFIG") or os.environ.get("KUBECONFIG"))
            cfg.qps, cfg.burst = 0, 0
        else:
            cfg = ClientConfig(server=self.double.url, qps=0, burst=0)  # type: ignore[union-attr]
        c = KubeClient(cfg)
        self.clients.append(c)
        return c

    async def __aenter__(self) -> Cluster:
        if not self.real:
            self.double = ApiDouble(bookmark_interval=0.1).start()
            self.webhook = WebhookServer(store=DoubleView(self.double))
            self.double.admit = webhook_admitter(self.webhook)
        self.api = self.client()
        for n in self.nodes:
            await self._create_node(n)
        if self.make_kubelet is not None:
            self.kubelet = self.make_kubelet(self.client())
            await self.kubelet.start()
        else:
            self.kubelet = FakeKubelet(self.client(), time_scale=self.time_scale, held=self.held)
            self.kubelet.start()
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        for s, t in self.schedulers:
            await _finish(t)
            await s.shutdown(drain=2)
        if self._ctrl_task is not None:
            await _finish(self._ctrl_task)
            await self.controllers.shutdown()  # type: ignore[union-attr]
        await self.kubelet.stop()
        for c in self.clients:
            await c.close()
        if self.double is not None:
            self.double.stop()

    # ------------------------------------------------------------------ components
    def start_scheduler(
        self, identity: str = "sched-a", lease_duration: float = 2.0, client: KubeClient | None = None, **kw: Any
    ) -> KubeScheduler:
        """``client``: the scheduler's own (e.g. with a service account's token); default a new
        client of the cluster's."""
        if client is None:
            client = self.client()
        else:
            self.clients.append(client)
        elector = None
        if self.lease:
            elector = LeaderElector(
                client,
                "lavaflow-scheduler",
                "default",
                identity,
                lease_duration,
                lease_duration * 0.7,
                lease_duration / 5,
            )
        s = KubeScheduler(client, period=self.period, identity=identity, elector=elector, **kw)
        stop = asyncio.Event()
        s._stop = stop  # type: ignore[attr-defined]
        t = asyncio.get_running_loop().create_task(s.run(stop))
        self.schedulers.append((s, t))
        return s

    async def kill_scheduler(self, s: KubeScheduler) -> None:
        for i, (x, t) in enumerate(self.schedulers):
            if x is s:
                t.cancel()
                await _finish(t)
                await s.crash()
                del self.schedulers[i]
                return

    def start_controllers(self, **kw: Any) -> KubeControllers:
        self.controllers = KubeControllers(self.client(), resync=0.2, **kw)
        self._ctrl_task = asyncio.get_running_loop().create_task(self.controllers.run(self.stop))
        return self.controllers

    async def until_ready(self) -> None:
        """Until the built-in queues exist (made by the controller or the scheduler)."""

        async def queues() -> bool:
            names = {q["metadata"]["name"] for q in await self.objects("Queue")}
            return {"root", "default"} <= names

        await self.wait_for(queues, 10, "the built-in queues")

    # ------------------------------------------------------------------ helpers
    async def create(self, docs: list[dict[str, Any]]) -> None:
        for d in docs:
            if d.get("kind") == "Node":
                await self._create_node(d)
            else:
                await create_manifest(self.api, dict(d))

    async def _create_node(self, doc: dict[str, Any]) -> None:
        """Create a Node; on a real API server also lift the not-ready taint its admission adds
        (no node lifecycle controller runs beside a bare API server)."""
        got = await create_manifest(self.api, dict(doc))
        if self.real:
            await lift_not_ready_taint(self.api, got)

    async def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return await list_objects(self.api, "Pod", namespace)

    async def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return await list_objects(self.api, kind, namespace)

    async def wait_for(self, predicate, timeout: float = 20.0, what: str = "condition") -> Any:
        return await wait_for(predicate, timeout, what)

    def bindings(self) -> list[tuple[str, str]]:
        assert self.double is not None
        return self.double.call(lambda: list(self.double.bindings))


async def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> Any:
    """Until ``predicate()`` (awaited when it is a coroutine function's) is truthy, polled every
    50 ms; its value. AssertionError after ``timeout`` seconds, naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


async def settled(s: Any, pods: tuple[str, ...] = (), timeout: float = 20.0) -> None:
    """Until the scheduler ``s`` has run a cycle over everything its informers had seen when this
    was called (after its informers have the pods ``pods``, "namespace/name", just created), and
    what that cycle decided (binds, evictions, status writes, Events) went out: the moment to
    assert that something did *not* happen, on a machine of any speed (a wall-clock sleep before
    such an assertion passes vacuously when the machine is slow)."""

    async def seen_pods() -> bool:
        return all(s.store.get("Pod", k) is not None for k in pods)

    if pods:
        await wait_for(seen_pods, timeout, f"the scheduler's informers to see {', '.join(pods)}")
    seen, start = s.store.version, s.cycles

    async def cycled() -> bool:
        return s.cycles > start and s._last_version >= seen

    await wait_for(cycled, timeout, "a scheduler cycle over what the informers had seen")
    await s.idle(timeout)


async def controllers_settled(k: Any, timeout: float = 20.0) -> None:
    """Until the controllers ``k`` have made two full passes since this was called (the second one
    began after everything the informers had seen by then) and no deferred write is under way:
    the controllers' counterpart of :func:`settled`."""
    start = k.passes

    def done() -> bool:
        return k.passes >= start + 2 and not any(
            not fut.done() for writes in k.store._deferred.values() for fut, _ in writes
        )

    await wait_for(done, timeout, "two controller passes and their writes")


def lease_tries(s: Any) -> list[bool]:
    """What each of the scheduler ``s``'s tries for its lease returned, as they come. Call it just
    after ``start_scheduler`` (before the scheduler's task first runs): a standby's "leads and
    binds nothing" is asserted once it has tried and been refused, not after a sleep."""
    tries: list[bool] = []
    attempt = s.elector.try_acquire_or_renew

    async def counted() -> bool:
        got = await attempt()
        tries.append(got)
        return got

    s.elector.try_acquire_or_renew = counted
    return tries


async def _finish(t: asyncio.Task) -> None:
    if not t.done():
        t.cancel()
    try:
        await t
    except (asyncio.CancelledError, Exception):
        pass


def node_usage(pods: list[dict[str, Any]]) -> dict[str, float]:
    """CPU requested per node by pods bound there and not finished."""
    from lavaflow.api.quantity import parse_quantity

    out: dict[str, float] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in p["spec"].get("containers", []):
            cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
            if cpu is not None:
                out[node] = out.get(node, 0.0) + float(parse_quantity(cpu))
    return out


__all__ = ["Cluster", "load_example", "node_usage", "wait_for"]


def pod_view(obj: Any) -> Any:
    """What the scheduler's store holds of a pod, comparable across two stores: its type, requests,
    the fields the cache reads and, for a pod held whole or light, the whole model."""
    from lavaflow.kube.lightpod import LightPod
    from lavaflow.kube.slim import UsageOnlyPod

    if obj is None:
        return None
    out: dict[str, Any] = {"type": type(obj).__name__, "requests": getattr(obj, "requests", None)}
    m, s, st = obj.metadata, obj.spec, obj.status
    for a in ("name", "namespace", "uid", "resource_version", "creation_timestamp", "deletion_timestamp"):
        out["m." + a] = getattr(m, a)
    out["labels"], out["annotations"] = dict(m.labels), dict(m.annotations)
    for a in ("node_name", "scheduler_name", "workload_ref", "scheduling_group"):
        out["s." + a] = getattr(s, a)
    out["phase"] = st.phase
    if isinstance(obj, LightPod):
        out["light"] = [
            getattr(s, a) for a in ("priority", "priority_class_name", "preemption_policy", "node_selector")
        ]
        out["light_status"] = [st.start_time, st.reason, st.message]
        out["full"] = obj.full().model_dump()
    elif not isinstance(obj, UsageOnlyPod):
        out["full"] = obj.model_dump()
    return out


LINEAR = "1:1,2:2,4:4,8:8"  # measured speed-ups of a job that scales linearly


def elastic_job(name: str, epochs: int, lo: int, hi: int, duration: str, gpu_type: str = "v100") -> dict[str, Any]:
    """A job that scales linearly (measured speed-ups), ``epochs`` of 60 s on one worker."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "lavaflow.io/speedup": LINEAR,
                "lavaflow.io/epoch-time": "60s",
                "lavaflow.io/epochs": str(epochs),
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": lo,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": hi,
                    "template": {
                        "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
                        "spec": {
                            "nodeSelector": {"lavaflow.io/accelerator": gpu_type},
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "pytorch",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }
