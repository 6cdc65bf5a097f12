"""An informer-backed Store: list + watch per kind, writes through the API server.

Each informer lists its kind (paginated), then watches from the list's
resourceVersion with bookmarks, remembering the last resourceVersion seen so a
dropped stream resumes where it stopped; a 410 Gone (the version was
compacted away) triggers a fresh list, whose differences with the cache are
delivered as ADDED/MODIFIED/DELETED events.

The Store protocol is synchronous (it is the simulator's), so controllers run
in a worker thread while ``lock`` is held (no watch event is applied
meanwhile); their writes hop onto the event loop and, once the server has
answered, the answer is applied to the cache and handlers are notified at
once, as the simulator's MemoryStore does. The watch event for the same
resourceVersion that arrives later is recognised and skipped.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import concurrent.futures
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, cast

from ..api.core import PodTemplateSpec
from ..api.kinds import API_KINDS, Kind, kind_info
from ..api.meta import ObjectKeys
from ..api.volcano import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_KEY,
    TASK_SPEC_KEY,
    VOLCANO_GROUP_NAME_ANNOTATION,
    PodGroup,
)
from ..api.x_k8s_podgroup import POD_GROUP_LABEL
from ..store.base import ADDED, DELETED, MODIFIED, Handler, kind_of
from . import codec, protopod
from .client import MERGE_PATCH, STRATEGIC_PATCH, ApiError, KubeClient, NotProtobuf
from .compact import compact
from .discovery import served_resources
from .lightpod import (
    _INVALID,
    _PHASES,
    _USAGE_KEEP,
    CONTAINER_KEEP,
    META_DROP,
    LightMeta,
    LightPod,
    LightSpec,
    LightStatus,
    light_pod,
    read_meta,
    spec_requests,
)
from .plainpg import volcano_podgroup
from .tasks import cancel_and_wait

log = logging.getLogger("lavaflow.kube")
_T = TypeVar("_T")


async def _results(coro: Any) -> list[Any]:
    """``[result]`` or ``[exception]``: one write in the shape of _create_batches' results."""
    try:
        return [await coro]
    except Exception as exc:  # noqa: BLE001 - handed back to the syncing thread
        return [exc]


class AlreadyExists(KeyError):
    pass


class StreamingUnsupported(Exception):
    """The API server cannot send a watch's initial state (sendInitialEvents)."""


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Gone(Exception):
    pass


_BY_NAME = 16  # bound pods the protobuf could not give in full, listed one by one up to this many
# The streaming-list probe (KubeStore._streams_lists): asked of the first of these kinds informed
# (built in and small), else of any; for objects of a name no object can have.
_PROBE_KINDS = ("PriorityClass", "Namespace", "Node", "Pod")
_PROBE_NAME = "-lavaflow-watch-list-probe-"
_REDISCOVER = 30.0  # seconds between two readings of one group/version's discovery at run time
_TEMPLATES_KEPT = 1024  # Job task templates kept worked out for their pods' creates


def _rv(raw: dict[str, Any] | None) -> str | None:
    if not raw:
        return None
    return (raw.get("metadata") or {}).get("resourceVersion")


def _newer_or_same(have: str | None, incoming: str | None) -> bool:
    """Whether the cached version ``have`` is at least ``incoming`` (integers when they parse)."""
    if have is None or incoming is None:
        return False
    if have == incoming:
        return True
    try:
        return int(have) >= int(incoming)
    except ValueError:
        return False


def key_of(res: Kind, raw: dict[str, Any]) -> str:
    return _key_in(res, raw.get("metadata") or {})


def _key_in(res: Kind, meta: dict[str, Any]) -> str:
    """``key_of`` from an object's metadata."""
    if res.namespaced:
        return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
    name: str = meta.get("name", "")
    return name


def _kind_name(res: Kind) -> str:
    return f"{res.api_kind} ({res.api_version})"


def _status_way(has: bool) -> str:
    if has:
        return "served with a status subresource: status is written through it"
    return "served without a status subresource: status is written on the object itself"


def _kept(sent: object, got: object) -> bool:
    """Whether the object ``got`` holds what the merge patch ``sent`` set (a None removes)."""
    if not isinstance(sent, dict):
        return sent == got
    have = got if isinstance(got, dict) else {}
    return all(have.get(k) is None if v is None else _kept(v, have.get(k)) for k, v in sent.items())


def _without_empty(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its empty lists and maps (which an API object leaves out)."""
    return {k: v for k, v in d.items() if v != [] and v != {}}


def _strip(raw: dict[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        raw = dict(raw)
        raw["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return raw


def slim_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a pod the scheduler reads (memory at 150,000 pods): metadata without owner
    references, finalizers and managed fields; containers keep only name, resources, restartPolicy
    and ports; status keeps phase, startTime and, while the pod waits for a node, the PodScheduled
    condition. A pod on a node also drops its tolerations: they only choose a node (the static
    predicates and scores of a pending task), and a bound pod never chooses again."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return raw
    out = dict(raw)
    meta = raw.get("metadata")
    if isinstance(meta, dict) and any(k in meta for k in META_DROP):
        out["metadata"] = {k: v for k, v in meta.items() if k not in META_DROP}
    spec = dict(spec)
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [{k: c[k] for k in CONTAINER_KEEP if k in c} for c in spec[key] or []]
    spec.pop("volumes", None)
    bound = bool(spec.get("nodeName"))
    if bound:
        spec.pop("tolerations", None)
    out["spec"] = spec
    status = raw.get("status")
    if isinstance(status, dict):
        out["status"] = {k: status[k] for k in ("phase", "startTime", "reason", "message") if k in status}
        if not bound:
            scheduled = [
                c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "PodScheduled"
            ]
            if scheduled:
                out["status"]["conditions"] = scheduled
    return out


def slim_node(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a node the scheduler reads: a kubelet's status also lists its images, addresses
    and daemon endpoints, and its conditions carry heartbeat times, none of which scheduling needs."""
    status = raw.get("status")
    if not isinstance(status, dict):
        return raw
    out = dict(raw)
    out["status"] = {
        "capacity": status.get("capacity") or {},
        "allocatable": status.get("allocatable") or {},
        "conditions": [
            {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        ],
    }
    return out


_SLIM = {"Pod": slim_pod, "Node": slim_node}


def _decode(res: Kind, raw: dict[str, Any]) -> Any | None:
    """``codec.decode``; a Volcano PodGroup through ``volcano_podgroup`` (the same model, without
    the walk over its times) unless that leaves it to ``codec.decode``."""
    if res.model is PodGroup:
        obj = volcano_podgroup(raw)
        if obj is not None:
            return obj
    return codec.decode(res, raw)


class _UsageMeta:
    __slots__ = ("name", "namespace", "uid", "resource_version", "creation_timestamp", "deletion_timestamp")
    # a usage-only pod carries no gang label or annotation (read-only, shared)
    labels: Mapping[str, str] = MappingProxyType({})
    annotations: Mapping[str, str] = MappingProxyType({})

    def __init__(self, meta: dict[str, Any]) -> None:
        read_meta(self, meta)


class _UsageSpec:
    __slots__ = ("node_name", "scheduler_name")
    workload_ref = None
    scheduling_group = None

    def __init__(self, spec: dict[str, Any]) -> None:
        self.node_name = spec.get("nodeName")
        self.scheduler_name = spec.get("schedulerName")


class _UsageStatus:
    __slots__ = ("phase",)

    def __init__(self, status: Any) -> None:
        self.phase = status.get("phase", "Pending") if isinstance(status, dict) else "Pending"


class UsageOnlyPod(ObjectKeys):
    """A pod of another scheduler as the scheduler keeps it: where it is, its phase and what it
    requests (the cache adds it to its node's usage and reads nothing else of it). A pydantic Pod
    costs ~7.5 KiB whatever it holds (every defaulted list, dict and field set); this ~0.6 KiB."""

    __slots__ = ("metadata", "spec", "status", "requests")
    kind = "Pod"
    namespaced = True

    def __init__(self, raw: dict[str, Any], requests: dict[str, float]) -> None:
        self.metadata = _UsageMeta(raw["metadata"])
        self.spec = _UsageSpec(raw["spec"])
        self.status = _UsageStatus(raw.get("status"))
        self.requests = requests


def usage_only_pod(raw: dict[str, Any], ours: frozenset[str]) -> UsageOnlyPod | LightPod | None:
    """A pod of another scheduler that belongs to no gang, kept as node usage only (see
    UsageOnlyPod); one of ours bound in a Volcano PodGroup, as a LightPod when it reads plainly
    (see lightpod). None for any other pod, which is read whole: one naming a group of any gang
    API, or one whose resources do not read."""
    spec = raw.get("spec")
    meta = raw.get("metadata")
    if type(spec) is not dict or type(meta) is not dict:
        return None
    if (spec.get("schedulerName") or "default-scheduler") in ours:
        return light_pod(raw)
    if spec.get("workloadRef") is not None or spec.get("schedulingGroup") is not None:
        return None
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if any(k in labels for k in _GANG_LABELS) or any(k in annotations for k in _GANG_ANNOTATIONS):
        return None
    requests, _ = spec_requests(spec, _USAGE_KEEP)
    if requests is _INVALID:
        return None  # the whole decode reports it
    return UsageOnlyPod(raw, requests)


# the gang markers of the three gang APIs (a pod carrying one is read whole, whoever schedules it)
_GANG_LABELS = (POD_GROUP_LABEL,)
_GANG_ANNOTATIONS = (GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION)


# ------------------------------------------------------------------ pods straight from protobuf
_proto_requests_memo: dict[Any, Any] = {}
_PROTO_KEPT = 4096  # request sets remembered (by the bytes of a template's containers)


def _proto_requests(s: Any, keep: tuple[str, ...]) -> Any:
    """What spec_requests gives for the JSON of a pod message's containers, init containers and
    overhead (cut to ``keep``), or _INVALID (also for a part not converted): remembered by their
    bytes, which the pods of one template share."""
    overhead = s.overhead
    key = (
        keep,
        tuple(s.containers),
        tuple(s.initContainers),
        tuple(sorted((k, q.string) for k, q in overhead.items())),
    )
    hit = _proto_requests_memo.get(key)
    if hit is None:
        containers, partial = protopod.containers(s.containers)
        given: dict[str, Any] = {"containers": containers}
        if s.initContainers:
            init, more = protopod.containers(s.initContainers)
            given["initContainers"] = init
            partial |= more
        if overhead:
            given["overhead"] = dict(key[3])
        hit = _INVALID if partial else spec_requests(given, keep)[0]
        if len(_proto_requests_memo) >= _PROTO_KEPT:
            _proto_requests_memo.clear()
        _proto_requests_memo[key] = hit
    return hit


def _proto_meta(target: Any, m: Any) -> None:
    """read_meta from an ObjectMeta message: what it reads of the same pod's JSON."""
    target.name = m.name
    target.namespace = m.namespace or None
    target.uid = m.uid
    target.resource_version = m.resourceVersion or None
    target.creation_timestamp = codec.parse_time(protopod.time_of(m.creationTimestamp))
    target.deletion_timestamp = (
        codec.parse_time(protopod.time_of(m.deletionTimestamp)) if m.HasField("deletionTimestamp") else None
    )


def proto_bound_pod(p: Any, raw: bytes, ours: frozenset[str]) -> UsageOnlyPod | LightPod | None:
    """A bound pod's protobuf (``p``, the Pod message of ``raw``; see protopod) straight as what
    the store keeps of its JSON when that is a UsageOnlyPod or a LightPod (see usage_only_pod),
    with the same values; None when it is neither, or carries a field the message here does not
    convert (the caller then reads it through protopod's dict, or as JSON). A LightPod keeps the
    bytes, and its whole model is decoded from protopod's dict when first read."""
    m, s, st = p.metadata, p.spec, p.status
    node = s.nodeName
    if not node or s.HasField("workloadRef") or s.HasField("schedulingGroup"):
        return None
    labels, annotations = m.labels, m.annotations
    phase = st.phase or "Pending"
    scheduler = s.schedulerName
    if (scheduler or "default-scheduler") in ours:
        if (
            s.HasField("affinity")  # (a light pod has none of these; a usage-only pod reads none)
            or s.topologySpreadConstraints
            or s.resourceClaims
            or GROUP_NAME_ANNOTATION not in annotations
            or VOLCANO_GROUP_NAME_ANNOTATION in annotations
            or POD_GROUP_LABEL in labels
            or phase not in _PHASES
        ):
            return None
        requests = _proto_requests(s, CONTAINER_KEEP)
        if requests is _INVALID:
            return None
        pod = LightPod(raw, requests)
        lm = LightMeta()
        lm._pod = pod
        _proto_meta(lm, m)
        lm.labels = dict(labels)
        lm.annotations = dict(annotations)
        ls = LightSpec()
        ls._pod = pod
        ls.node_name = node
        ls.scheduler_name = scheduler or None
        ls.priority = s.priority if s.HasField("priority") else None
        ls.priority_class_name = s.priorityClassName or None
        ls.preemption_policy = s.preemptionPolicy if s.HasField("preemptionPolicy") else None
        ls.node_selector = dict(s.nodeSelector)
        lst = LightStatus()
        lst._pod = pod
        lst.phase = phase
        lst.start_time = codec.parse_time(protopod.time_of(st.startTime)) if st.HasField("startTime") else None
        lst.reason = st.reason or None
        lst.message = st.message or None
        pod.metadata, pod.spec, pod.status = lm, ls, lst
        return pod
    if any(k in labels for k in _GANG_LABELS) or any(k in annotations for k in _GANG_ANNOTATIONS):
        return None
    requests = _proto_requests(s, _USAGE_KEEP)
    if requests is _INVALID:
        return None
    obj = UsageOnlyPod.__new__(UsageOnlyPod)
    um = _UsageMeta.__new__(_UsageMeta)
    _proto_meta(um, m)
    us = _UsageSpec.__new__(_UsageSpec)
    us.node_name, us.scheduler_name = node, scheduler or None
    ust = _UsageStatus.__new__(_UsageStatus)
    ust.phase = phase
    obj.metadata, obj.spec, obj.status, obj.requests = um, us, ust, requests
    return obj


class Informer:
    """List + watch of one kind into a KubeStore."""

    def __init__(
        self,
        store: KubeStore,
        res: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: tuple[int, int] = (300, 600),
    ) -> None:
        self.store = store
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.rv: str | None = None
        self.synced = asyncio.Event()
        self.relists = 0
        self.restarts = 0
        self.events = 0
        self.bookmarks = 0
        self.streaming = True  # try a streaming list first, when the store's server can send one
        self.protobuf: bool | None = None  # False once the server would not stream pods as protobuf
        self._task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.res.kind}")
        return self._task

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    async def run(self) -> None:
        backoff = 0.2
        while True:
            try:
                if self.rv is None:
                    if self._protobuf():
                        try:
                            await self._initial_protobuf()
                        except NotProtobuf as exc:
                            self.protobuf = False
                            log.info("%s: not read as protobuf (%s); as JSON instead", self.res.kind, exc)
                            continue
                    elif self.store.watch_list and self.streaming:
                        try:
                            await self._watch(initial=True)  # goes on as a watch once the state is in
                        except StreamingUnsupported as exc:
                            self.streaming = False
                            log.info("%s: no streaming list (%s); listing instead", self.res.kind, exc)
                        continue
                    else:
                        await self._list()
                await self._watch()
                backoff = 0.2
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("%s: resourceVersion %s is gone; relisting", self.res.kind, self.rv)
                self.rv = None
                self.relists += 1
            except ApiError as exc:
                if exc.gone:
                    self.rv = None
                    self.relists += 1
                    continue
                log.warning("%s informer: %s", self.res.kind, exc)
                self.restarts += 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            except Exception as exc:  # connection trouble: resume from the last version
                log.warning("%s informer: %s: %s", self.res.kind, type(exc).__name__, exc)
                self.restarts += 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    async def _list(self) -> None:
        """A paginated list, each page applied while the server prepares the next.

        The whole list is never held at once (at 140,000 pods the JSON alone is ~450 MB), and the
        client's decoding overlaps the server's encoding. Every page after the first comes from
        the snapshot of the first (the continue token carries its resourceVersion), so the watch
        that follows starts at the list's version and nothing is missed. Objects the cache holds
        that the list did not name are deleted once the last page is in.
        """
        t0 = time.monotonic()
        first = self._selectors()
        if not self.relists:
            # The first list, as client-go's reflector does it when it cannot stream: from the
            # API server's watch cache (resourceVersion 0), which answers in one page. A relist
            # after 410 Gone reads consistently, since the cache was the thing that fell behind.
            first["resourceVersion"] = "0"
        seen: set[str] = set()
        n, busy, rv = await self._list_pages(first, seen)
        async with self.store.lock:
            self.store._drop_unseen(self.res, seen)
        self.rv = rv
        self.synced.set()
        log.info("%s: listed %d in %.2fs (%.2fs of it applying)", self.res.kind, n, time.monotonic() - t0, busy)

    async def _list_pages(
        self,
        first: dict[str, Any],
        seen: set[str],
        keep: set[str] | None = None,
        namespace: str | None = None,
    ) -> tuple[int, float, str | None]:
        """Apply every page of a list (``first``: its selectors and version; the pages after the
        first carry the selectors and the continue token), adding each key to ``seen``; with
        ``keep``, only the objects of those keys. The objects applied, the seconds it took to
        apply them and the list's resourceVersion."""
        path = self.res.path(namespace if namespace is not None else self.namespace)
        rest = {k: v for k, v in first.items() if k not in ("resourceVersion", "resourceVersionMatch")}

        def fetch(cont: str | None) -> asyncio.Task[dict[str, Any]]:
            params = {"limit": self.page_size, "continue": cont, **(first if cont is None else rest)}
            return asyncio.ensure_future(self.store.client.request("GET", path, params=params))

        n = 0
        busy = 0.0
        waiting = fetch(None)
        try:
            while True:
                page = await waiting
                meta = page.get("metadata") or {}
                cont = meta.get("continue")
                if cont:
                    waiting = fetch(cont)
                items = page.get("items") or []
                if keep is not None:
                    items = [it for it in items if key_of(self.res, it) in keep]
                for it in items:
                    it.setdefault("apiVersion", self.res.api_version)
                    it.setdefault("kind", self.res.api_kind)
                n += len(items)
                async with self.store.lock:
                    t1 = time.monotonic()
                    self.store._apply_page(self.res, items, seen)
                    busy += time.monotonic() - t1
                del page, items
                if not cont:
                    return n, busy, meta.get("resourceVersion")
        finally:
            if not waiting.done():
                waiting.cancel()

    def _protobuf(self) -> bool:
        """Whether this informer reads its initial state of bound pods as protobuf (see protopod)."""
        return (
            self.res.kind == "Pod"
            and self.protobuf is not False
            and bool(self.store.protobuf_pods)
            and not self.label_selector
            and not self.field_selector
        )

    def _take_bound(
        self,
        raw: bytes,
        seen: set[str],
        as_json: list[tuple[str | None, str, str]],
        run: list[dict[str, Any]],
        built: list[Any],
    ) -> None:
        """One bound pod's protobuf: onto ``built`` as the object the store keeps when it can be
        built straight from the message (see proto_bound_pod), else onto ``run`` as its JSON dict,
        or onto ``as_json`` when it is partial and the store would read it whole (see protopod)."""
        ours = self.store.ours or frozenset()
        message = protopod.message(raw)
        pod = proto_bound_pod(message, raw, ours)
        if pod is not None:
            built.append(pod)
            return
        obj, partial = protopod.pod_of(message)
        if partial and type(usage_only_pod(obj, ours)) is not UsageOnlyPod:
            meta = obj["metadata"]
            key = key_of(self.res, obj)
            seen.add(key)
            as_json.append((meta.get("namespace"), meta.get("name", ""), key))
        else:
            run.append(obj)

    async def _stream_bound(self, seen: set[str], as_json: list[tuple[str | None, str, str]]) -> tuple[str, int, float]:
        """The bound pods by a streaming list in protobuf: its resourceVersion, the pods applied and
        the seconds it took to apply them."""
        timeout = random.randint(*self.watch_timeout)
        params: dict[str, Any] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
            "sendInitialEvents": True,
            "resourceVersionMatch": "NotOlderThan",
            "fieldSelector": "spec.nodeName!=",
        }
        path = self.res.path(self.namespace)
        busy = 0.0
        n = 0
        rv: str | None = None
        try:
            async with contextlib.aclosing(self.store.client.stream_frames(path, params, timeout)) as stream:
                async for frames in stream:
                    run: list[dict[str, Any]] = []
                    built: list[Any] = []
                    for frame in frames:
                        etype, _, raw = protopod.event(frame)
                        if etype == "ADDED":
                            self._take_bound(raw, seen, as_json, run, built)
                        elif etype == "BOOKMARK":
                            version, annotations = protopod.bookmark(raw)
                            if annotations.get(INITIAL_EVENTS_END) == "true":
                                rv = version
                                break
                        elif etype == "ERROR":
                            st = protopod.status(raw)
                            if st["code"] == 410 or st["reason"] in ("Expired", "Gone"):
                                raise Gone()
                            raise StreamingUnsupported(st["message"] or st["reason"] or "an error event")
                        else:  # the initial state is ADDED events, then its bookmark
                            raise StreamingUnsupported(f"a {etype} event inside the initial state")
                    n += len(run) + len(built)
                    if built:
                        busy += await self._apply_built(built, seen)
                    if run:
                        busy += await self._apply_run(run, seen)
                    if rv is not None:
                        break
        except ApiError as exc:
            if not exc.gone and exc.status in (400, 403, 404, 405, 422, 500, 501):
                raise StreamingUnsupported(str(exc)) from exc
            raise
        if rv is None:
            raise ConnectionError("the protobuf stream of pods ended before its initial state")
        return rv, n, busy

    async def _list_bound(self, seen: set[str], as_json: list[tuple[str | None, str, str]]) -> tuple[str, int, float]:
        """The bound pods by a paginated list in protobuf (the first from the watch cache, as
        ``_list``): its resourceVersion, the pods applied and the seconds it took to apply them."""
        path = self.res.path(self.namespace)
        params: dict[str, Any] = {"fieldSelector": "spec.nodeName!=", "limit": self.page_size}
        if not self.relists:
            params["resourceVersion"] = "0"
        busy = 0.0
        n = 0
        while True:
            body = await self.store.client.get_protobuf(path, params)
            rv, cont, items = protopod.pod_list(body)
            del body
            run: list[dict[str, Any]] = []
            built: list[Any] = []
            for raw in items:
                self._take_bound(raw, seen, as_json, run, built)
            del items
            n += len(run) + len(built)
            busy += await self._apply_built(built, seen)
            busy += await self._apply_run(run, seen)
            if not cont:
                return rv, n, busy
            params = {"fieldSelector": "spec.nodeName!=", "limit": self.page_size, "continue": cont}

    async def _initial_protobuf(self) -> None:
        """The initial state of the pods, the bound ones in Kubernetes' protobuf encoding (see
        protopod): a streaming list of the pods on a node as protobuf, which ends at a
        resourceVersion (a list of them where the server cannot stream); then, as JSON and from
        that same version, a list of the pods on no node and of the bound pods read whole that the
        protobuf could not give in full (by name when they are few). The watch that follows starts
        at that version. Raises NotProtobuf when the server does not send pods as protobuf (the
        informer then reads them as JSON)."""
        t0 = time.monotonic()
        seen: set[str] = set()
        as_json: list[tuple[str | None, str, str]] = []  # bound pods read whole: namespace, name, key
        try:
            if self.store.watch_list and self.streaming:
                try:
                    rv, n, busy = await self._stream_bound(seen, as_json)
                except StreamingUnsupported as exc:
                    self.streaming = False
                    log.info("%s: no streaming list (%s); listing instead", self.res.kind, exc)
                    seen.clear()
                    as_json.clear()
                    rv, n, busy = await self._list_bound(seen, as_json)
            else:
                rv, n, busy = await self._list_bound(seen, as_json)
        except protopod.ProtobufError as exc:
            raise NotProtobuf(str(exc)) from exc
        t1 = time.monotonic()
        at = {"resourceVersion": rv, "resourceVersionMatch": "Exact"}
        unbound, took, _ = await self._list_pages({"fieldSelector": "spec.nodeName=", **at}, seen)
        busy += took
        if len(as_json) <= _BY_NAME:
            for namespace, name, _key in as_json:
                _, took, _ = await self._list_pages(
                    {"fieldSelector": f"metadata.name={name}", **at}, seen, namespace=namespace
                )
                busy += took
        else:
            _, took, _ = await self._list_pages(
                {"fieldSelector": "spec.nodeName!=", **at}, seen, keep={key for _, _, key in as_json}
            )
            busy += took
        async with self.store.lock:
            self.store._drop_unseen(self.res, seen)
        self.rv = rv
        self.synced.set()
        log.info(
            "%s: read %d bound as protobuf in %.2fs, then %d unbound and %d bound as JSON in %.2fs "
            "(%.2fs of it all applying)",
            self.res.kind,
            n,
            t1 - t0,
            unbound,
            len(as_json),
            time.monotonic() - t1,
            busy,
        )

    async def _watch(self, initial: bool = False) -> None:
        """Watch from ``self.rv``; with ``initial``, a streaming list (KEP-3157) instead: the server
        sends the current state as ADDED events from its watch cache, one object at a time, ends it
        with a bookmark annotated ``k8s.io/initial-events-end``, and goes on as a watch. Nothing is
        held whole (a 140,000-pod list is ~450 MB of JSON) and each object is applied as it comes,
        while the server encodes the next. Objects the cache holds that the initial state did not
        name are deleted at its end, as after a list."""
        timeout = random.randint(*self.watch_timeout)
        params: dict[str, Any] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
            **self._selectors(),
        }
        seen: set[str] = set()
        t0 = time.monotonic()
        busy = 0.0
        if initial:
            params.update(sendInitialEvents=True, resourceVersionMatch="NotOlderThan")
        else:
            params["resourceVersion"] = self.rv
        path = self.res.path(self.namespace)
        try:
            async for batch in self.store.client.stream_batches(path, params, timeout):
                run: list[dict[str, Any]] = []  # initial ADDED objects, applied under one hold of the lock
                for ev in batch:
                    etype = ev.get("type")
                    obj = ev.get("object") or {}
                    if initial and etype == "ADDED":
                        obj.setdefault("apiVersion", self.res.api_version)
                        obj.setdefault("kind", self.res.api_kind)
                        run.append(obj)
                        continue
                    if run:
                        busy += await self._apply_run(run, seen)
                        run = []
                    if etype == "ERROR":
                        if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                            raise Gone()
                        if initial:
                            raise StreamingUnsupported(obj.get("message") or obj.get("reason") or "error event")
                        raise ApiError(int(obj.get("code") or 500), obj, "WATCH", path)
                    rv = _rv(obj)
                    if etype == "BOOKMARK":
                        self.bookmarks += 1
                        if initial:
                            ann = (obj.get("metadata") or {}).get("annotations") or {}
                            if ann.get(INITIAL_EVENTS_END) != "true":
                                continue  # a progress bookmark inside the initial state: not a place to resume
                            async with self.store.lock:
                                self.store._drop_unseen(self.res, seen)
                            initial = False
                            self.synced.set()
                            log.info(
                                "%s: streamed %d in %.2fs (%.2fs of it applying)",
                                self.res.kind,
                                len(seen),
                                time.monotonic() - t0,
                                busy,
                            )
                            seen = set()
                        if rv:
                            self.rv = rv
                        continue
                    obj.setdefault("apiVersion", self.res.api_version)
                    obj.setdefault("kind", self.res.api_kind)
                    if initial and etype != DELETED:
                        seen.add(key_of(self.res, obj))
                    async with self.store.lock:
                        self.store._apply(self.res, cast(str, etype), obj)  # (an event has a type)
                    self.events += 1
                    if rv and not initial:  # inside the initial state only its end is a place to resume
                        self.rv = rv
                if run:
                    busy += await self._apply_run(run, seen)
        except ApiError as exc:
            if initial and not exc.gone and exc.status in (400, 403, 404, 405, 422, 500, 501):
                raise StreamingUnsupported(str(exc)) from exc
            raise

    async def _apply_built(self, built: list[Any], seen: set[str]) -> float:
        """Apply pods built from their protobuf as one page; the seconds it took."""
        async with self.store.lock:
            t1 = time.monotonic()
            apply = self.store._apply_built
            for obj in built:
                seen.add(obj.key)
                apply(self.res, obj)
            took = time.monotonic() - t1
        self.events += len(built)
        return took

    async def _apply_run(self, run: list[dict[str, Any]], seen: set[str]) -> float:
        """Apply initial objects as one page; the seconds it took."""
        async with self.store.lock:
            t1 = time.monotonic()
            self.store._apply_page(self.res, run, seen)
            took = time.monotonic() - t1
        self.events += len(run)
        return took


class KubeStore:
    """The Store protocol over a Kubernetes API server."""

    def __init__(self, client: KubeClient, keep_raw: bool = True) -> None:
        self.client = client
        self.keep_raw = keep_raw
        self.objects: dict[str, dict[str, Any]] = {}
        self.raw: dict[str, dict[str, dict[str, Any]]] = {}
        self._handlers: dict[str, list[Handler]] = {}
        self._listeners: list[Callable[[str, str, Any], None]] = []
        self.informers: dict[str, Informer] = {}
        self._tombstones: dict[str, set[str]] = {}
        self.lock = asyncio.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.version = 0  # bumped on every applied change (like MemoryStore.version)
        self.write_timeout = 120.0
        self.conflict_retries = 8
        # requests in flight at most when a controller creates several objects (create_many)
        self.create_concurrency = 64
        # Deferred creates (the controller process turns this on): create_many returns at once and
        # the syncing thread goes on to the next key while the requests run; the results are
        # applied later, in that same thread (take_created), under the reconcile's lock.
        self.defer_creates = False
        self.owner: Any = None  # what create_many's deferred results are filed under (the key syncing)
        self._deferred: dict[Any, list[tuple[concurrent.futures.Future[list[Any]], list[Any]]]] = {}
        # Objects of deferred creates not yet taken, by (kind, key): what get() answers meanwhile.
        self._pending: dict[tuple[str, str], Any] = {}
        # (Job key, resourceVersion, task) -> its pod template as written and as modelled (_with_template)
        self._templates: dict[tuple[str, str | None, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        # Called on the event loop each time a deferred write ends (the controller process wakes).
        self.on_written: Callable[[], None] | None = None
        self.conflicts = 0
        # Streaming lists (watch with sendInitialEvents): on by default from Kubernetes 1.32 (a
        # server from before them ignores the parameter and would never end the initial state);
        # asked of the server at start unless set (see _streams_lists).
        self.watch_list: bool | None = None
        # A server that streams answers the probe's empty selection at once, from its watch cache;
        # past this the informers list (always possible), rather than hold the start-up longer.
        self.watch_list_probe_timeout = 2.0
        # With keep_raw off: the scheduler names whose pods are read whole; other schedulers' pods
        # are kept as node usage only (see usage_only_pod). None reads every pod whole.
        self.ours: frozenset[str] | None = None
        # Whether the pod informer reads its initial state of bound pods as protobuf (see
        # protopod): decided at start unless set (with keep_raw off, ours set and the protobuf
        # package).
        self.protobuf_pods: bool | None = None
        # Store kind -> whether the server serves it with a status subresource, from discovery at
        # start and corrected at run time (see has_status); a kind not found there: the table's flag.
        self.status_subresource: dict[str, bool] = {}
        self._rediscovered: dict[str, float] = {}  # api version -> when discovery was last read again
        # Writes the server refused: (kind, verb, HTTP status) -> how many; each also goes to every
        # hook (the processes count them in their metrics).
        self.refusals: collections.Counter[tuple[str, str, int]] = collections.Counter()
        self.refusal_hooks: list[Callable[[str, str, int], None]] = []

    # ------------------------------------------------------------------ informers
    def inform(self, kind: str, **opts: Any) -> Informer:
        if kind not in self.informers:
            self.informers[kind] = Informer(self, kind_info(kind), **opts)
            self.objects.setdefault(kind, {})
            self.raw.setdefault(kind, {})
        return self.informers[kind]

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.watch_list is None:
            self.watch_list, _ = await asyncio.gather(self._streams_lists(), self.discover())
        else:
            await self.discover()
        if self.protobuf_pods is None:
            # (streamed where the server sends streaming lists, else listed in pages)
            self.protobuf_pods = not self.keep_raw and self.ours is not None and protopod.available()
        for inf in self.informers.values():
            if inf._task is None:
                inf.start()

    async def _streams_lists(self) -> bool:
        """Whether the server sends a watch's initial state, asked of the server itself rather than
        read from /version (a server built from source answers an empty major and minor there, and
        a gate can be turned off on any version): a streaming list of an informed kind's objects
        named ``_PROBE_NAME``, which none is, so the answer is the end-of-initial-events bookmark
        alone. An error (event or HTTP status), or no bookmark within the probe's timeout (a server
        from before streaming lists serves a plain watch, which says nothing here), means no."""
        inf = next((self.informers[k] for k in _PROBE_KINDS if k in self.informers), None)
        if inf is None and self.informers:
            inf = next(iter(self.informers.values()))
        if inf is None:
            return False
        old = await self._before_streaming_lists()
        if old is not None:
            # (it would serve the probe a plain watch, which never ends an initial state: no wait)
            log.info("no streaming lists (the server is %s, from before them): informers list instead", old)
            return False
        wait = self.watch_list_probe_timeout
        params = {
            "watch": True,
            "sendInitialEvents": True,
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": True,
            "fieldSelector": f"metadata.name={_PROBE_NAME}",
            "timeoutSeconds": int(wait) + 1,
        }
        why = f"no end of the initial state within {wait:g}s"
        try:
            async with (
                asyncio.timeout(wait),
                contextlib.aclosing(self.client.stream(inf.res.path(inf.namespace), params, wait)) as events,
            ):
                async for ev in events:
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        why = str(obj.get("message") or obj.get("reason") or "an error event")
                        break
                    ann = (obj.get("metadata") or {}).get("annotations") or {}
                    if ev.get("type") == "BOOKMARK" and ann.get(INITIAL_EVENTS_END) == "true":
                        log.debug("the server sends streaming lists")
                        return True
                else:
                    why = "the stream ended before the initial state did"
        except TimeoutError:
            pass
        except Exception as exc:  # refused (4xx: the gate is off), or no answer: list, as any server allows
            why = str(exc) or type(exc).__name__
        log.info("no streaming lists (%s): informers list instead", why)
        return False

    async def _before_streaming_lists(self) -> str | None:
        """The server's version when its /version names one from before streaming lists
        (Kubernetes 1.27), else None: a version it does not state (a source build answers an
        empty major and minor), or a newer one, is left to the probe."""
        try:
            info = await self.client.request("GET", "/version", timeout=5)
            major = int(str(info.get("major", "")).rstrip("+"))
            minor = int(str(info.get("minor", "")).rstrip("+"))
        except Exception:  # no answer, or no numbers: the probe decides
            return None
        return f"v{major}.{minor}" if (major, minor) < (1, 27) else None

    # ------------------------------------------------------------------ status subresources
    def has_status(self, res: Kind) -> bool:
        """Whether ``res`` is served with a status subresource: as the server's discovery says
        (Volcano's PodGroup CRD has none, lavaflow's has one), else as the table of kinds says."""
        return self.status_subresource.get(res.kind, res.status)

    async def discover(self, versions: Iterable[str] | None = None) -> None:
        """Read which resources of ``versions`` (default: those of the informed kinds) have a status
        subresource. A group/version that cannot be read keeps the table's flags."""
        if versions is None:
            versions = {kind_info(k).api_version for k in self.informers}
        await asyncio.gather(*(self._discover_version(v) for v in sorted(set(versions))))

    async def _discover_version(self, api_version: str) -> None:
        try:
            served = await served_resources(self.client, api_version)
        except Exception as exc:  # not served (no CRD), not readable, or no answer
            log.debug("discovery of %s: %s; status subresources as lavaflow's CRDs have them", api_version, exc)
            return
        for res in API_KINDS.values():
            if res.api_version != api_version or res.plural not in served:
                continue
            has = f"{res.plural}/status" in served
            if has == self.has_status(res):
                self.status_subresource[res.kind] = has
            elif res.kind in self.status_subresource:
                self._set_status(res, has, "discovery says so now")
            else:
                self.status_subresource[res.kind] = has
                log.info("%s: %s", _kind_name(res), _status_way(has))

    def _set_status(self, res: Kind, has: bool, why: str) -> None:
        self.status_subresource[res.kind] = has
        log.warning("%s: %s (%s; its CRD was replaced?)", _kind_name(res), _status_way(has), why)

    async def _status_gone(self, res: Kind, key: str, exc: ApiError) -> bool:
        """A write to the status subresource of ``key`` was answered ``exc``: True (and the kind's
        status is written on the object from now on) when that is a 404 while the object exists,
        that is, the subresource is gone."""
        if not exc.not_found or not self.has_status(res):
            return False
        if await self._get_remote(res, key) is None:
            return False
        self._set_status(res, False, f"{exc.method} {exc.path} answered 404 while the object exists")
        return True

    async def _status_back(self, res: Kind) -> bool:
        """A status written on the object did not stay there: True when discovery, read again (at
        most every _REDISCOVER seconds per group/version), now lists a status subresource."""
        now = time.monotonic()
        if now - self._rediscovered.get(res.api_version, -_REDISCOVER) < _REDISCOVER:
            return False
        self._rediscovered[res.api_version] = now
        await self._discover_version(res.api_version)
        return self.has_status(res)

    def refused(self, kind: str, key: str, verb: str, exc: ApiError) -> None:
        """A write the API server refused: an error line naming the object, the verb and the
        HTTP status, counted in ``refusals`` and handed to the hooks."""
        self.refusals[(kind, verb, exc.status)] += 1
        log.error(
            "API server refused to %s %s %s: HTTP %d %s: %s (%s %s)",
            verb,
            kind,
            key,
            exc.status,
            exc.reason or "",
            exc.message or "",
            exc.method,
            exc.path,
        )
        for hook in self.refusal_hooks:
            try:
                hook(kind, verb, exc.status)
            except Exception:  # a metrics bug must not hide the refusal
                log.exception("refusal hook failed")

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers.values())), timeout)
            return True
        except TimeoutError:
            return False

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    async def stop(self) -> None:
        for inf in self.informers.values():
            await inf.stop()

    def add_listener(self, fn: Callable[[str, str, Any], None]) -> None:
        """fn(kind, event, obj) after every applied change (used to wake loops)."""
        self._listeners.append(fn)

    # ------------------------------------------------------------------ cache
    def _notify(self, kind: str, event: str, obj: Any, old: Any) -> None:
        self.version += 1
        for h in self._handlers.get(kind, ()):
            try:
                h(event, obj, old)
            except Exception:  # a handler bug must not kill the informer
                log.exception("%s handler failed on %s", kind, event)
        for fn in self._listeners:
            fn(kind, event, obj)

    def _apply(self, res: Kind, event: str, raw: dict[str, Any]) -> None:
        kind = res.kind
        meta = raw.get("metadata") or {}
        key = _key_in(res, meta)
        objs = self.objects.get(kind)
        if objs is None:
            objs = self.objects[kind] = {}
        raws = self.raw.get(kind)
        if raws is None:
            raws = self.raw[kind] = {}
        uid = meta.get("uid", "")
        cur = objs.get(key)
        cur_uid = cur.metadata.uid if cur is not None else None
        if event == DELETED:
            self._tombstones.get(kind, set()).discard(uid)
            if cur is None or (uid and cur_uid and uid != cur_uid):
                return
            objs.pop(key, None)
            raws.pop(key, None)
            if cur.metadata.deletion_timestamp is None:
                cur.metadata.deletion_timestamp = (
                    codec.parse_time((raw.get("metadata") or {}).get("deletionTimestamp")) or 0.0
                )
            self._notify(kind, DELETED, cur, None)
            return
        if uid and uid in self._tombstones.get(kind, ()):
            return
        if cur is not None and cur_uid == uid and self._same_or_newer(kind, key, cur, raw):
            return
        if self.keep_raw:
            obj = _decode(res, raw)
        else:
            obj = usage_only_pod(raw, self.ours) if self.ours is not None and kind == "Pod" else None
            if obj is None:
                slim = _SLIM.get(kind)
                obj = _decode(res, raw if slim is None else slim(raw))
                if obj is not None:
                    compact(obj)
        if obj is None:
            return
        self._put(kind, key, obj, cur, uid, raw)

    def _put(self, kind: str, key: str, obj: Any, cur: Any, uid: str, raw: dict[str, Any] | None) -> None:
        """Hold ``obj`` (decoded, of uid ``uid``) under ``key`` in place of ``cur``: a different
        object of that name is deleted first."""
        objs, raws = self.objects[kind], self.raw[kind]
        cur_uid = cur.metadata.uid if cur is not None else None
        if cur is not None and cur_uid and uid and cur_uid != uid:
            objs.pop(key, None)
            raws.pop(key, None)
            self._notify(kind, DELETED, cur, None)
            cur = None
        objs[key] = obj
        if self.keep_raw and raw is not None:
            raws[key] = _strip(raw)
        self._notify(kind, ADDED if cur is None else MODIFIED, obj, cur)

    def _apply_built(self, res: Kind, obj: Any) -> None:
        """``_apply`` of a pod added or changed that was built straight from its protobuf (see
        proto_bound_pod), so without its dict: the same checks, the same events."""
        kind = res.kind
        key = obj.key
        self.objects.setdefault(kind, {})
        self.raw.setdefault(kind, {})
        cur = self.objects[kind].get(key)
        meta = obj.metadata
        uid = meta.uid
        if uid and uid in self._tombstones.get(kind, ()):
            return
        if (
            cur is not None
            and cur.metadata.uid == uid
            and _newer_or_same(cur.metadata.resource_version, meta.resource_version)
        ):
            return
        self._put(kind, key, obj, cur, uid, None)

    def _same_or_newer(self, kind: str, key: str, cur: Any, raw: dict[str, Any]) -> bool:
        have = cur.metadata.resource_version
        return _newer_or_same(have, _rv(raw))

    def _apply_page(self, res: Kind, items: list[dict[str, Any]], seen: set[str]) -> None:
        """One page of a (re)list: each object delivered as the difference with the cache."""
        objs = self.objects.setdefault(res.kind, {})
        items.reverse()
        while items:  # each raw object freed once applied: a one-page list of a big cluster is GiBs
            raw = items.pop()
            key = key_of(res, raw)
            seen.add(key)
            self._apply(res, MODIFIED if key in objs else ADDED, raw)

    def _drop_unseen(self, res: Kind, seen: set[str]) -> None:
        """The end of a (re)list: what the cache holds and the list did not name is gone."""
        kind = res.kind
        for key in sorted(set(self.objects.get(kind, {})) - seen):
            cur = self.objects[kind][key]
            self._apply(
                res,
                DELETED,
                {"metadata": {"name": cur.name, "namespace": cur.metadata.namespace, "uid": cur.metadata.uid}},
            )
        self._tombstones.pop(kind, None)

    # ------------------------------------------------------------------ Store protocol: reads
    def get(self, kind: str, key: str) -> Any | None:
        if kind not in self.informers:
            raw = self._call(self._get_remote(kind_info(kind), key))
            return None if raw is None else codec.decode(kind_info(kind), raw)
        hit = self.objects.get(kind, {}).get(key)
        if hit is None and self._pending:
            return self._pending.get((kind, key))
        return hit

    def list(self, kind: str) -> list[Any]:
        return list(self.objects.get(kind, {}).values())

    def count(self, kind: str) -> int:
        return len(self.objects.get(kind, {}))

    def watch(self, kind: str, handler: Handler) -> None:
        self._handlers.setdefault(kind, []).append(handler)

    # ------------------------------------------------------------------ Store protocol: writes (sync)
    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self.loop
        if loop is None:
            raise RuntimeError("KubeStore has not been started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("synchronous KubeStore calls must come from a worker thread; use the a* methods")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(self.write_timeout)

    def create(self, obj: Any) -> Any:
        res = kind_info(kind_of(obj))
        raw = self._call(self._create_remote(res, obj))
        return self._after_write(res, raw)

    def create_many(self, objs: builtins.list[Any]) -> builtins.list[Any]:
        """Create ``objs`` with a bounded number of requests in flight, as Kubernetes' controllers
        create a ReplicaSet's pods: batches of 1, 2, 4, … up to ``create_concurrency``, the next
        batch sent only if the last one had no error (a server refusing every pod is not sent them
        all). The client's QPS limiter paces them. Results are applied in order; the first error
        is raised after that. With defer_creates, filed under ``owner`` and sent while the caller
        goes on (see take_created); returns [] then."""
        if self.defer_creates and objs:
            self._file(self._create_batches(objs), objs, creates=True)
            return []
        if len(objs) <= 1:
            return [self.create(obj) for obj in objs]
        done = self._call(self._create_batches(objs))
        out = []
        first: BaseException | None = None
        for obj, raw in zip(objs, done):
            if isinstance(raw, BaseException):
                first = first or raw
                continue
            out.append(self._after_write(kind_info(kind_of(obj)), raw))
        if first is not None:
            raise first
        if len(done) < len(objs):  # (stopped after a failed batch: raised above)
            raise RuntimeError("create_many stopped early")
        return out

    def create_later(self, obj: Any) -> Any:
        """With defer_creates, filed under ``owner`` like create_many's creates, and ``obj`` itself
        returned at once: until its result is taken, get() answers ``obj`` for its key (the
        caller's sync sees what it created). Else a create."""
        if not self.defer_creates:
            return self.create(obj)
        self._file(_results(self._create_remote(kind_info(kind_of(obj)), obj)), [obj], creates=True)
        return obj

    def update_later(self, obj: Any) -> Any:
        """With defer_creates, filed with the key's deferred creates and applied with them (in
        take_created); else an update."""
        if not self.defer_creates:
            return self.update(obj)
        self._file(_results(self._update_remote(kind_info(kind_of(obj)), obj)), [obj], creates=False)
        return None

    def _file(self, coro: Any, objs: builtins.list[Any], creates: bool) -> None:
        """Send ``coro`` (writes of ``objs``) on the event loop, filed under ``owner``."""
        loop = self.loop
        if loop is None:
            coro.close()
            raise RuntimeError("KubeStore has not been started")
        fut = asyncio.run_coroutine_threadsafe(self._then_tell(coro), loop)
        self._deferred.setdefault(self.owner, []).append((fut, objs))
        if creates:
            for obj in objs:
                self._pending[(kind_of(obj), obj.key)] = obj

    async def _then_tell(self, coro: Any) -> Any:
        """``coro``'s result, then ``on_written`` (on the event loop): a deferred write ended."""
        try:
            return await coro
        finally:
            if self.on_written is not None:
                self.on_written()

    def deferred_owners(self) -> builtins.list[Any]:
        """The owners with deferred writes not yet taken, oldest first."""
        return list(self._deferred)

    def writing(self, owner: Any) -> bool:
        """Whether a deferred write of ``owner`` is still under way (taking it would wait)."""
        return any(not fut.done() for fut, _ in self._deferred.get(owner, ()))

    def written_owners(self) -> builtins.list[Any]:
        """The owners whose deferred writes have all ended (taking them does not wait), oldest first."""
        return [o for o, writes in self._deferred.items() if all(fut.done() for fut, _ in writes)]

    def take_created(self, owner: Any) -> BaseException | None:
        """Wait for ``owner``'s deferred writes (creates, updates) and apply their results in order,
        as create_many and update do; the first error (after every result is applied), or None."""
        first: BaseException | None = None
        for fut, objs in self._deferred.pop(owner, []):
            try:
                done = fut.result(self.write_timeout)
            except BaseException as exc:  # noqa: BLE001 - the batch as a whole failed (timeout)
                done = [exc]
            for i, obj in enumerate(objs):
                pending: Any = self._pending.get((kind_of(obj), obj.key))  # (Any: `is` must not narrow obj to None)
                if pending is obj:
                    del self._pending[(kind_of(obj), obj.key)]
                if i >= len(done):  # stopped after a failed batch (its error is first)
                    first = first or RuntimeError("create_many stopped early")
                    continue
                raw = done[i]
                if isinstance(raw, BaseException):
                    first = first or raw
                    continue
                self._after_write(kind_info(kind_of(obj)), raw)
        return first

    async def _create_batches(self, objs: builtins.list[Any]) -> builtins.list[Any]:
        results: builtins.list[Any] = []
        size = 1
        while len(results) < len(objs):
            batch = objs[len(results) : len(results) + size]
            got = await asyncio.gather(
                *(self._create_remote(kind_info(kind_of(o)), o) for o in batch), return_exceptions=True
            )
            results.extend(got)
            if any(isinstance(g, BaseException) for g in got):
                break
            size = min(2 * size, self.create_concurrency)
        return results

    def update(self, obj: Any, old: Any = None) -> Any:
        res = kind_info(kind_of(obj))
        raw = self._call(self._update_remote(res, obj))
        return self._after_write(res, raw)

    def delete(self, kind: str, key: str) -> Any | None:
        res = kind_info(kind)
        raw = self._call(self._delete_remote(res, key))
        return self._after_delete(res, key, raw)

    # ------------------------------------------------------------------ async writes
    async def acreate(self, obj: Any) -> Any:
        res = kind_info(kind_of(obj))
        return self._after_write(res, await self._create_remote(res, obj))

    async def aupdate(self, obj: Any) -> Any:
        res = kind_info(kind_of(obj))
        return self._after_write(res, await self._update_remote(res, obj))

    async def adelete(self, kind: str, key: str) -> Any | None:
        res = kind_info(kind)
        return self._after_delete(res, key, await self._delete_remote(res, key))

    def _after_write(self, res: Kind, raw: dict[str, Any]) -> Any:
        raw.setdefault("apiVersion", res.api_version)
        raw.setdefault("kind", res.api_kind)
        key = key_of(res, raw)
        if res.kind in self.informers:
            self._apply(res, MODIFIED if key in self.objects.get(res.kind, {}) else ADDED, raw)
            hit = self.objects[res.kind].get(key)
            if hit is not None:
                return hit
        return codec.decode(res, raw)

    def observe(self, kind: str, raw: dict[str, Any]) -> Any | None:
        """Take an object the server returned (e.g. to a status patch) as the newest known version
        of it, as if its watch event had arrived (which is then skipped). Call with ``lock`` held."""
        if kind not in self.informers or not isinstance(raw, dict) or not raw.get("metadata"):
            return None
        return self._after_write(kind_info(kind), raw)

    def _after_delete(self, res: Kind, key: str, raw: dict[str, Any] | None) -> Any | None:
        cur = self.objects.get(res.kind, {}).get(key)
        if raw is None:
            return None
        if res.kind not in self.informers:
            return codec.decode(res, raw) if raw.get("kind") == res.api_kind else cur
        meta = raw.get("metadata") or {}
        lingering = raw.get("kind") == res.api_kind and (
            meta.get("finalizers")
            or (
                res.kind == "Pod" and (raw.get("spec") or {}).get("nodeName") and meta.get("deletionGracePeriodSeconds")
            )
        )
        if lingering:
            raw.setdefault("apiVersion", res.api_version)
            self._apply(res, MODIFIED, raw)
            return self.objects[res.kind].get(key, cur)
        if cur is not None:
            self._tombstones.setdefault(res.kind, set()).add(cur.metadata.uid)
            self._apply(
                res,
                DELETED,
                {"metadata": {"name": cur.name, "namespace": cur.metadata.namespace, "uid": cur.metadata.uid}},
            )
        return cur

    # ------------------------------------------------------------------ remote calls
    async def _get_remote(self, res: Kind, key: str) -> dict[str, Any] | None:
        try:
            return await self.client.request("GET", res.path_for_key(key))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def create_body(self, res: Kind, obj: Any) -> dict[str, Any]:
        body = codec.encode(obj, res)
        if res.kind == "Pod":
            body = self._with_template(obj, body)
        body.get("metadata", {}).pop("resourceVersion", None)
        return body

    def _with_template(self, pod: Any, body: dict[str, Any]) -> dict[str, Any]:
        """A Volcano Job's pod keeps every field of its task template, modelled or not."""
        ann = pod.metadata.annotations
        job_name, task_name = ann.get(JOB_NAME_KEY), ann.get(TASK_SPEC_KEY)
        if not job_name or not task_name:
            return body
        job_key = f"{pod.namespace}/{job_name}"
        raw_job = self.raw.get("Job", {}).get(job_key)
        if raw_job is None:
            return body
        parts = self._template_parts(job_key, raw_job, task_name)
        if parts is None:
            return body
        base, old = parts
        merged = codec.merge3(
            base,
            old,
            {"metadata": body.get("metadata", {}), "spec": body.get("spec", {})},
        )
        out = dict(body)
        out["metadata"] = merged["metadata"]
        out["spec"] = merged["spec"]
        return out

    def _template_parts(
        self, job_key: str, raw_job: dict[str, Any], task_name: str
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A Job's task template as written (``base``) and as lavaflow's model reads it (``old``),
        worked out once per version of the Job and shared by its pods (read-only)."""
        memo_key = (job_key, _rv(raw_job), task_name)
        hit = self._templates.get(memo_key)
        if hit is not None:
            return hit
        for t in (raw_job.get("spec") or {}).get("tasks") or []:
            if t.get("name") == task_name:
                tmpl = t.get("template") or {}
                old = codec.encode(PodTemplateSpec.model_validate(tmpl))
                parts = (
                    {"metadata": dict(tmpl.get("metadata") or {}), "spec": tmpl.get("spec") or {}},
                    {"metadata": old.get("metadata", {}), "spec": old.get("spec", {})},
                )
                if len(self._templates) >= _TEMPLATES_KEPT:
                    self._templates.clear()
                self._templates[memo_key] = parts
                return parts
        return None

    async def _create_remote(self, res: Kind, obj: Any) -> dict[str, Any]:
        body = self.create_body(res, obj)
        ns = obj.namespace if res.namespaced else None
        try:
            raw = await self.client.request("POST", res.path(ns), body=body)
        except ApiError as exc:
            if exc.already_exists:
                raise AlreadyExists(f"{res.kind} {obj.key} already exists") from None
            self.refused(res.kind, obj.key, "create", exc)
            raise
        want = body.get("status")
        if want and _kept(_without_empty(want), raw.get("status")):
            return raw  # (a new pod: its status is the server's Pending, as sent)
        if want and not self.has_status(res):
            await self._status_back(res)  # the server dropped the status: a subresource now?
        if want and self.has_status(res):
            raw.setdefault("apiVersion", res.api_version)
            raw.setdefault("kind", res.api_kind)
            got = codec.encode(codec.decode(res, raw) or obj, res).get("status")
            if got != want:
                status_body = dict(raw)
                status_body["status"] = codec.merge3(raw.get("status") or {}, got or {}, want)
                path = res.path(ns, raw["metadata"]["name"], "status")
                try:
                    raw = await self.client.request("PUT", path, body=status_body)
                except ApiError as exc:
                    # no subresource after all: the object was created with its status
                    if not await self._status_gone(res, obj.key, exc):
                        self.refused(res.kind, obj.key, "update", exc)
                        raise
        return raw

    async def _update_remote(self, res: Kind, obj: Any) -> dict[str, Any]:
        key = obj.key
        base = self.raw.get(res.kind, {}).get(key) if self.keep_raw else None
        if base is None:
            base = await self._get_remote(res, key)
            if base is None:
                raise KeyError(f"{res.kind} {key} not found")
        new_d = codec.encode(obj, res)
        new_d.get("metadata", {}).pop("resourceVersion", None)
        # The caller's change is what differs from the version it read (the informer's copy). On a
        # conflict that change is applied again onto the server's newer object, so fields someone
        # else changed meanwhile (e.g. an annotation a training script patched) are kept.
        base = dict(base)
        base.setdefault("apiVersion", res.api_version)
        base.setdefault("kind", res.api_kind)
        old_model = codec.decode(res, base)
        old_d = codec.encode(old_model, res) if old_model is not None else {}
        old_d.get("metadata", {}).pop("resourceVersion", None)
        main_old, main_new = codec.without(old_d, "status"), codec.without(new_d, "status")
        status_changed = old_d.get("status") != new_d.get("status")
        for attempt in range(self.conflict_retries):
            base = dict(base)
            base.setdefault("apiVersion", res.api_version)
            base.setdefault("kind", res.api_kind)
            result = base
            to_status = False
            try:
                sub = self.has_status(res)
                if main_old != main_new or (status_changed and not sub):
                    # without a status subresource the status goes with the object
                    body = codec.merge3(base, main_old if sub else old_d, main_new if sub else new_d)
                    result = await self.client.request("PUT", res.path_for_key(key), body=body)
                    if status_changed and not sub and not _kept(body.get("status"), result.get("status")):
                        sub = await self._status_back(res)  # dropped: through a subresource now?
                if sub and status_changed:
                    to_status = True
                    body = codec.merge3(result, old_d, new_d)
                    body.setdefault("metadata", {})["resourceVersion"] = _rv(result)
                    result = await self.client.request("PUT", res.path_for_key(key, "status"), body=body)
                return result
            except ApiError as exc:
                if to_status and await self._status_gone(res, key, exc):
                    base = result  # the status goes with the object now
                    continue
                if exc.not_found:
                    raise KeyError(f"{res.kind} {key} not found") from None
                if not exc.conflict or attempt == self.conflict_retries - 1:
                    self.refused(res.kind, key, "update", exc)
                    raise
                self.conflicts += 1
                await asyncio.sleep(min(0.01 * 2**attempt, 0.5) * random.random())
                fresh = await self._get_remote(res, key)
                if fresh is None:
                    raise KeyError(f"{res.kind} {key} not found") from None
                base = fresh
        raise RuntimeError("unreachable")

    async def _delete_remote(self, res: Kind, key: str, grace: int | None = None) -> dict[str, Any] | None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            return await self.client.request("DELETE", res.path_for_key(key), body=body)
        except ApiError as exc:
            if exc.not_found:
                return None
            self.refused(res.kind, key, "delete", exc)
            raise

    # ------------------------------------------------------------------ raw helpers
    async def patch(
        self, kind: str, key: str, patch: dict[str, Any], status: bool = False, strategic: bool = False
    ) -> dict[str, Any]:
        """A merge (or strategic merge) patch of ``key``; with ``status``, of its status: through
        the status subresource where the kind has one (see has_status), else on the object itself.
        Raises ApiError (a 404: the object is gone); any other refusal is reported (see refused)."""
        res = kind_info(kind)
        content_type = STRATEGIC_PATCH if strategic else MERGE_PATCH
        answer: dict[str, Any] = {}
        for _ in range(3):  # (a subresource found gone, or back, is tried once the other way)
            sub = "status" if status and self.has_status(res) else None
            try:
                answer = await self.client.request(
                    "PATCH", res.path_for_key(key, sub), body=patch, content_type=content_type
                )
            except ApiError as exc:
                if sub and await self._status_gone(res, key, exc):
                    continue
                if not exc.not_found:
                    self.refused(res.kind, key, "patch", exc)
                raise
            if status and not sub and not strategic and not _kept(patch.get("status"), answer.get("status")):
                if await self._status_back(res):
                    continue
            return answer
        return answer
