"""A fake kubelet for tests and benchmarks on the Kubernetes backend.

``FakeKubelet`` plays the nodes through the HTTP API, so it works against the test API server
(:mod:`.fake_apiserver`) and a real API server alike: it marks bound pods Running, then
Succeeded (or Failed) after their ``sim.lavaflow.io/duration`` (scaled), creates the pods a
running pod spawns (``sim.lavaflow.io/spawned-by``), and completes the deletion of pods bound
to nodes (there is no real kubelet to do it). ``fake_node`` is a Node manifest for it to play.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..api import sim_annotations as ann
from ..api.core import PodPhase
from ..kube.client import MERGE_PATCH
from ..kube.tasks import cancel_and_wait
from .fake_apiserver import _now

if TYPE_CHECKING:  # pragma: no cover
    from ..kube.client import KubeClient


class FakeKubelet:
    """Runs bound pods through the API: Running at once, then Succeeded/Failed after their duration.

    ``time_scale`` multiplies every ``sim.lavaflow.io/*`` duration (0.01: a
    60 s pod finishes in 0.6 s). ``held`` are pods to create once their
    ``sim.lavaflow.io/spawned-by`` parent runs (Spark executors).
    """

    def __init__(
        self,
        client: KubeClient,
        time_scale: float = 0.01,
        default_duration: float = 60.0,
        held: list[dict[str, Any]] | None = None,
    ) -> None:
        self.client = client
        self.time_scale = time_scale
        self.default_duration = default_duration
        self.held: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in held or []:
            meta = p["metadata"]
            parent = f"{meta.get('namespace', 'default')}/{meta['annotations'][ann.SPAWNED_BY]}"
            self.held[parent].append(p)
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.bound_nodes: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait([self._runner, *self._tasks])

    async def _run(self) -> None:
        await list_watch(self.client, "/api/v1/pods", self._event)

    def _event(self, etype: str, pod: dict[str, Any]) -> None:
        if etype in ("ADDED", "MODIFIED"):
            self._see(pod)

    def _see(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata", {})
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        uid = meta.get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        if meta.get("deletionTimestamp") and node:
            self._spawn(self._force_delete(key))
            return
        if (
            node
            and uid not in self.started
            and (pod.get("status") or {}).get("phase", PodPhase.PENDING) == PodPhase.PENDING
        ):
            self.started.add(uid)
            self.bound_nodes[key] = node
            self._spawn(self._lifecycle(pod))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _seconds(self, pod: dict[str, Any], key: str, default: float) -> float:
        raw = (pod.get("metadata", {}).get("annotations") or {}).get(key)
        if raw is None:
            return default
        return ann.parse_duration(raw, allow_inf=True) if key == ann.DURATION else ann.parse_duration(raw)

    async def _set_status(self, pod: dict[str, Any], phase: str, exit_code: int | None = None) -> bool:
        meta = pod["metadata"]
        now = _now()
        name = (pod["spec"].get("containers") or [{"name": "main"}])[0].get("name", "main")
        state: dict[str, dict[str, Any]]
        if phase == PodPhase.RUNNING:
            state = {"running": {"startedAt": now}}
        else:
            state = {
                "terminated": {
                    "exitCode": exit_code or 0,
                    "reason": "Completed" if phase == PodPhase.SUCCEEDED else "Error",
                    "finishedAt": now,
                }
            }
        patch = {
            "status": {
                "phase": phase,
                "startTime": (pod.get("status") or {}).get("startTime") or now,
                "containerStatuses": [
                    {
                        "name": name,
                        "ready": phase == PodPhase.RUNNING,
                        "restartCount": 0,
                        "image": "x",
                        "imageID": "",
                        "state": state,
                    }
                ],
            }
        }
        try:
            await self.client.request(
                "PATCH",
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                body=patch,
                content_type="application/strategic-merge-patch+json",
            )
            return True
        except Exception:
            return False

    async def _lifecycle(self, pod: dict[str, Any]) -> None:
        import math

        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if not await self._set_status(pod, PodPhase.RUNNING):
            return
        for child in self.held.pop(key, []):
            delay = self._seconds(child, ann.SPAWN_DELAY, 0.0) * self.time_scale
            self._spawn(self._create_later(child, delay))
        duration = self._seconds(pod, ann.DURATION, self.default_duration)
        if not math.isfinite(duration):
            return
        await asyncio.sleep(duration * self.time_scale)
        code = int((meta.get("annotations") or {}).get(ann.EXIT_CODE, "0"))
        try:
            cur = await self.client.request("GET", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
        except Exception:
            return
        if cur["metadata"].get("uid") != meta.get("uid") or cur.get("status", {}).get("phase") != PodPhase.RUNNING:
            return
        if await self._set_status(cur, PodPhase.SUCCEEDED if code == 0 else PodPhase.FAILED, code):
            self.finished.add(key)

    async def _create_later(self, pod: dict[str, Any], delay: float) -> None:
        await asyncio.sleep(delay)
        ns = pod["metadata"].get("namespace", "default")
        try:
            await self.client.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod)
        except Exception:
            pass

    async def _force_delete(self, key: str) -> None:
        ns, name = key.split("/", 1)
        await force_delete(self.client, ns, name)


async def list_watch(
    client: KubeClient,
    path: str,
    on_event: Callable[[str, dict[str, Any]], None],
    on_list: Callable[[list[dict[str, Any]]], None] | None = None,
) -> None:
    """List ``path``, then watch it from the list's resourceVersion, for ever: ``on_event(type,
    object)`` for each listed object (as ``ADDED``) and each watch event but bookmarks. A watch
    ERROR (410 Gone) or any failure (of the request or of a callback) starts again with a new list,
    after 0.1 s on a failure; ``on_list(items)``, when given, first sees each list whole (to notice
    what went away while nothing was watched)."""
    rv = None
    while True:
        try:
            if rv is None:
                lst = await client.request("GET", path)
                items = lst.get("items", [])
                if on_list is not None:
                    on_list(items)
                for obj in items:
                    on_event("ADDED", obj)
                rv = lst["metadata"]["resourceVersion"]
            async for ev in client.stream(
                path, {"watch": True, "resourceVersion": rv, "allowWatchBookmarks": True, "timeoutSeconds": 60}, 60
            ):
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    rv = None
                    break
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if ev.get("type") != "BOOKMARK":
                    on_event(ev.get("type", ""), obj)
        except asyncio.CancelledError:
            raise
        except Exception:
            rv = None
            await asyncio.sleep(0.1)


async def force_delete(client: KubeClient, namespace: str, name: str, uid: str | None = None) -> None:
    """Delete a pod with grace period 0 (what a kubelet does once its containers are gone); with
    ``uid``, only that incarnation of the pod. Failures are ignored."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        await client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body=body)
    except Exception:
        pass


NOT_READY_TAINT = "node.kubernetes.io/not-ready"


async def lift_not_ready_taint(client: KubeClient, node: dict[str, Any]) -> None:
    """Remove the ``node.kubernetes.io/not-ready`` taint from ``node`` (as the API server returned
    it), keeping its other taints. kube-apiserver's TaintNodesByCondition admission puts it on
    every new Node and kube-controller-manager's node lifecycle controller lifts it once the node
    reports Ready; a bare control plane (an API server and etcd) has no such controller, so
    without this no pod lacking a toleration would ever be bound to a fake node there."""
    taints = (node.get("spec") or {}).get("taints") or []
    kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
    if len(kept) == len(taints):
        return
    await client.request(
        "PATCH",
        f"/api/v1/nodes/{node['metadata']['name']}",
        body={"spec": {"taints": kept or None}},
        content_type=MERGE_PATCH,
    )


def fake_node(
    name: str, cpu: str = "8", memory: str = "32Gi", pods: str = "110", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Node object with no kubelet behind it (Ready, with the given allocatable)."""
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "fake", **(labels or {})}},
        "spec": {"taints": []},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "FakeKubelet",
                    "message": "fake node",
                    "lastHeartbeatTime": _now(),
                    "lastTransitionTime": _now(),
                }
            ],
        },
    }
