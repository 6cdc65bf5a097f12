"""A test double for the Kubernetes API: an in-process API server.

``ApiDouble`` is an aiohttp server on 127.0.0.1 that behaves like a
kube-apiserver for the resources lavaflow uses: list (with pagination and
selectors) and watch with resourceVersions, bookmarks and 410 Gone after a
compaction; create/get/update/patch/delete with optimistic concurrency (409
Conflict on a stale resourceVersion); status subresources; pods/binding (409
for a pod that is already bound) and pods/eviction; Leases and Events like any
object. It serves every group/version of the table of kinds — the built-in ones
behind feature gates too (``scheduling.k8s.io/v1alpha1`` Workloads,
``v1alpha2`` Workloads and PodGroups) — unless told not to:
``unserve(api_version)`` answers 404 for all of that group/version, as a server
with the feature gate or runtime-config off does. ``without_status_subresource(kind)``
serves a kind as a CRD without a status subresource (Volcano's PodGroup): ``.../status``
answers 404 and writes to the object change its status. Discovery documents (``GET /api/v1``,
``GET /apis/{group}/{version}``) list what is served. Faults can be injected:
``fail_next(kind, verb, status, n)``, ``hold(kind, verb, seconds)`` (a slow server, which
records how many such requests were in flight at once), ``compact()`` (every open watch
gets a 410 and must relist), ``fail_share(share)`` (a seeded share of all requests answered 429,
500 or 503) and ``drop_watches()`` (every open watch ends, as a dropped connection).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import itertools
import json
import random
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..api.core import PodPhase
from ..api.kinds import API_KINDS, Kind
from .kube_protobuf import pod_list_bytes, watch_frame

if TYPE_CHECKING:  # pragma: no cover
    import concurrent.futures

    from aiohttp import web

    from ..kube.webhook import WebhookServer

T = TypeVar("T")
# What a watch's queue carries: (resourceVersion, event type, object), "GONE" after a compaction,
# None when the stream ends.
_WatchItem = tuple[int, str, dict[str, Any]] | Literal["GONE"] | None
# ApiDouble.admit: admit(kind, operation, obj, old) -> obj, or an error message
Admitter = Callable[[str, str, dict[str, Any], dict[str, Any] | None], dict[str, Any] | str]
_Key = tuple[str | None, str]  # (namespace or None, name)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


def merge_patch(target: Any, patch: Any, strategic: bool = False) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif strategic and k == "conditions" and isinstance(v, list) and isinstance(out.get(k), list):
            merged = [dict(c) for c in out[k]]
            for c in v:
                for i, have in enumerate(merged):
                    if have.get("type") == c.get("type"):
                        merged[i] = {**have, **c}
                        break
                else:
                    merged.append(dict(c))
            out[k] = merged
        else:
            out[k] = merge_patch(out.get(k), v, strategic)
    return out


def _match_labels(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "==" in term or "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def _match_fields(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _field(obj, k) == v:
                return False
        elif "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            if _field(obj, k) != v:
                return False
    return True


class _Route:
    def __init__(self, res: Kind, namespace: str | None, name: str | None, sub: str | None) -> None:
        self.res, self.namespace, self.name, self.sub = res, namespace, name, sub


class ApiDouble:
    """An in-process stand-in for kube-apiserver (see the module docstring)."""

    def __init__(self, bookmark_interval: float = 0.5, history: int = 200_000) -> None:
        self.bookmark_interval = bookmark_interval
        self.history = history
        self.rv = itertools.count(1000)
        self.current_rv = 1000
        self.objects: dict[str, dict[tuple[str | None, str], dict[str, Any]]] = defaultdict(dict)
        self.log: dict[str, list[tuple[int, str, dict[str, Any]]]] = defaultdict(list)
        self.floor: dict[str, int] = defaultdict(int)
        self.watchers: dict[str, list[asyncio.Queue[_WatchItem]]] = defaultdict(list)
        self.faults: dict[tuple[str, str], list[int]] = defaultdict(list)
        # (share of requests, statuses, generator): a seeded share of every request fails (fail_share)
        self.chaos: tuple[float, tuple[int, ...], random.Random] | None = None
        self.chaos_failed = 0
        self.counts: dict[str, int] = defaultdict(int)  # verb/kind -> requests
        # (kind, verb) -> seconds each such request is held before it is answered (see hold), and
        # the most of them in flight at once in each stretch between two moments with none
        self.holds: dict[tuple[str, str], float] = {}
        self.held_peaks: dict[tuple[str, str], list[int]] = defaultdict(list)
        self._holding: dict[tuple[str, str], list[int]] = {}  # (kind, verb) -> [in flight, peak]
        self.bindings: list[tuple[str, str]] = []  # (pod key, node) of every successful binding
        self.binding_attempts: dict[str, int] = defaultdict(int)
        self.admit: Admitter | None = None  # admit(kind, operation, obj, old) -> obj, or an error message (str)
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._plurals: dict[tuple[str, str], Kind] = {}
        self.unserved: set[str] = set()  # group/versions answered with 404 (see unserve)
        self.no_status: set[str] = set()  # kinds served without their status subresource
        # /version's answer, and whether a watch may ask for its initial state (sendInitialEvents,
        # on from 1.32): False answers it with the ERROR event a server on an etcd without
        # progress requests sends.
        # (A version of empty strings is a source build's: a server built without version stamps
        # answers major "" and minor "".) ``knows_watch_list`` False: a server from before
        # streaming lists, which ignores the parameters and serves a plain watch (the current
        # objects as ADDED events, then changes: the initial state never ends).
        self.version: tuple[int | str, int | str] = (1, 36)
        self.watch_list = True
        self.knows_watch_list = True
        # Whether pods are watched in Kubernetes' protobuf encoding when a client asks for it, as
        # a real server does; False answers 406 Not Acceptable, as it does for custom resources.
        self.protobuf_pods = True
        self.protobuf_watches = 0  # watches served in protobuf
        self.protobuf_lists = 0  # list pages served in protobuf
        for r in API_KINDS.values():
            self._plurals[(r.api_version, r.plural)] = r

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ApiDouble:
        """Serve from a background thread (its own event loop)."""
        self._thread = threading.Thread(target=self._serve, name="api-double", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("API double did not start")
        return self

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._main())
        loop.close()

    async def _main(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._stop = asyncio.Event()
        self._started.set()
        await self._stop.wait()
        for qs in self.watchers.values():
            for q in qs:
                q.put_nowait(None)
        await self._runner.cleanup()

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the server's loop (thread-safe access to its state)."""
        if self.loop is None:
            return fn(*args)
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(self._acall(fn, *args), self.loop)
        return fut.result(10)

    async def _acall(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    def kubeconfig(self, path: str) -> str:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "double", "user": {"token": "test"}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": "double"}}],
            "current-context": "double",
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        return path

    # ------------------------------------------------------------------ faults and inspection
    def unserve(self, api_version: str) -> None:
        """Serve nothing of ``api_version`` (e.g. ``scheduling.k8s.io/v1alpha1``) from now on: every
        request to it is a 404, as on a kube-apiserver where it is not enabled."""
        self.call(lambda: self.unserved.add(api_version))

    def without_status_subresource(self, kind: str) -> None:
        """Serve ``kind`` (a store kind, e.g. ``PodGroup``) from now on as a CRD without a status
        subresource, as Volcano's PodGroup CRD is: ``.../status`` answers 404, writes to the object
        itself change its status, and discovery lists no ``plural/status``."""
        self.call(lambda: self.no_status.add(kind))

    def with_status_subresource(self, kind: str) -> None:
        """Serve ``kind``'s status subresource again (as the table of kinds has it)."""
        self.call(lambda: self.no_status.discard(kind))

    def _has_status(self, res: Kind) -> bool:
        return res.status and res.kind not in self.no_status

    def fail_next(self, kind: str, verb: str, status: int = 409, n: int = 1) -> None:
        """The next ``n`` requests ``verb`` (get/list/create/update/patch/delete/bind/evict) on ``kind`` fail."""
        self.call(lambda: self.faults[(kind, verb)].extend([status] * n))

    def fail_share(self, share: float, statuses: tuple[int, ...] = (429, 500, 503), seed: int = 0) -> None:
        """From now on a seeded ``share`` of all requests to the API's resources (reads, writes,
        watches) fail with one of ``statuses``, as an overloaded server or a proxy in front of it
        answers; 0 stops it. 429s carry ``Retry-After: 1``."""

        def _do() -> None:
            self.chaos = (share, tuple(statuses), random.Random(seed)) if share > 0 else None

        self.call(_do)

    def drop_watches(self) -> None:
        """End every open watch stream now, without an error (a connection a proxy or a restarted
        server closed): clients watch again from the last version they saw."""

        def _do() -> None:
            for qs in self.watchers.values():
                for q in qs:
                    q.put_nowait(None)

        self.call(_do)

    def hold(self, kind: str, verb: str, seconds: float) -> None:
        """Answer every request ``verb`` on ``kind`` ``seconds`` late (a slow server), and record in
        ``held_peaks[(kind, verb)]`` how many were in flight at most, once per stretch that ends
        with none in flight: a client sending in slow-start batches leaves 1, 2, 4, ..."""
        self.call(lambda: self.holds.__setitem__((kind, verb), seconds))

    def compact(self) -> None:
        """Forget all history: watches from an older resourceVersion get 410 Gone."""

        def _do() -> None:
            for plural in list(self.log):
                self.floor[plural] = self.current_rv
                self.log[plural].clear()
            for qs in self.watchers.values():
                for q in qs:
                    q.put_nowait("GONE")

        self.call(_do)

    def snapshot(self, kind: str) -> list[dict[str, Any]]:
        res = API_KINDS[kind]
        return self.call(lambda: [copy.deepcopy(o) for o in self.objects[self._bucket(res)].values()])

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        res = API_KINDS[kind]
        ns, _, name = key.partition("/") if res.namespaced else (None, "", key)
        return self.call(lambda: copy.deepcopy(self.objects[self._bucket(res)].get((ns, name))))

    def put_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object directly (test setup)."""
        res = self._plurals_by_kind(obj)
        return self.call(self._store_put, res, copy.deepcopy(obj))

    def _plurals_by_kind(self, obj: dict[str, Any]) -> Kind:
        for r in API_KINDS.values():
            if r.api_version == obj.get("apiVersion") and r.api_kind == obj.get("kind"):
                return r
        raise KeyError(f"{obj.get('apiVersion')} {obj.get('kind')}")

    # ------------------------------------------------------------------ storage
    @staticmethod
    def _bucket(res: Kind) -> str:
        return f"{res.api_version}/{res.plural}"

    def _next_rv(self) -> str:
        self.current_rv = next(self.rv)
        return str(self.current_rv)

    def _emit(self, res: Kind, etype: str, obj: dict[str, Any]) -> None:
        b = self._bucket(res)
        rv = int(obj["metadata"]["resourceVersion"])
        snap = copy.deepcopy(obj)
        log = self.log[b]
        log.append((rv, etype, snap))
        if len(log) > self.history:
            drop = len(log) - self.history
            self.floor[b] = log[drop - 1][0]
            del log[:drop]
        for q in self.watchers[b]:
            q.put_nowait((rv, etype, snap))

    def _store_put(self, res: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace") if res.namespaced else None
        if res.namespaced and not ns:
            ns = meta["namespace"] = "default"
        existing = self.objects[self._bucket(res)].get((ns, meta["name"]))
        meta.setdefault("uid", existing["metadata"]["uid"] if existing else str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", existing["metadata"]["creationTimestamp"] if existing else _now())
        meta["resourceVersion"] = self._next_rv()
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.api_kind)
        self.objects[self._bucket(res)][(ns, meta["name"])] = obj
        self._emit(res, "MODIFIED" if existing else "ADDED", obj)
        return copy.deepcopy(obj)

    # ------------------------------------------------------------------ routing
    def _route(self, path: str) -> _Route | None:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return None
        if parts[0] == "api" and len(parts) >= 2:
            gv, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        ns = None
        if len(rest) >= 2 and rest[0] == "namespaces" and (len(rest) >= 3):
            ns, rest = rest[1], rest[2:]
        if not rest or gv in self.unserved:
            return None
        res = self._plurals.get((gv, rest[0]))
        if res is None:
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub == "status" and not self._has_status(res):
            return None
        return _Route(res, ns, name, sub)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """The APIResourceList of ``/api/v1`` or ``/apis/{group}/{version}``, if served."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) == 2:
            gv = parts[1]
        elif parts[:1] == ["apis"] and len(parts) == 3:
            gv = f"{parts[1]}/{parts[2]}"
        else:
            return None
        kinds = [r for r in API_KINDS.values() if r.api_version == gv]
        if not kinds or gv in self.unserved:
            return None
        resources = []
        for r in kinds:
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            resources.append({"name": r.plural, "namespaced": r.namespaced, "kind": r.api_kind, "verbs": verbs})
            subs = (["status"] if self._has_status(r) else []) + (["binding", "eviction"] if r.kind == "Pod" else [])
            for sub in subs:
                kind, sub_verbs = (
                    (r.api_kind, ["get", "patch", "update"]) if sub == "status" else (sub.title(), ["create"])
                )
                resources.append(
                    {"name": f"{r.plural}/{sub}", "namespaced": r.namespaced, "kind": kind, "verbs": sub_verbs}
                )
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    def _fault(self, kind: str, verb: str) -> int | None:
        q = self.faults.get((kind, verb))
        if q:
            return q.pop(0)
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if request.path == "/version":
            major, minor = self.version
            git = f"v{major}.{minor}.0" if major != "" else "v0.0.0-master+8e16b12"
            return web.json_response({"major": str(major), "minor": str(minor), "gitVersion": git})
        if request.method == "GET":
            found = self._discovery(request.path)
            if found is not None:
                self.counts["discovery"] += 1
                return web.json_response(found)
        route = self._route(request.path)
        if route is None:
            return web.json_response(_status(404, "NotFound", f"the server could not find {request.path}"), status=404)
        res = route.res
        method = request.method
        q = request.query
        verb = {
            "GET": "get" if route.name else ("watch" if q.get("watch") in ("1", "true") else "list"),
            "POST": {"binding": "bind", "eviction": "evict"}.get(route.sub or "", "create"),
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }.get(method, method.lower())
        self.counts[f"{verb}/{res.kind}"] += 1
        held = self.holds.get((res.kind, verb))
        if held is not None:
            await self._held((res.kind, verb), held)
        code = self._fault(res.kind, verb)
        if code is None and self.chaos is not None:
            share, statuses, rng = self.chaos
            if rng.random() < share:
                code = statuses[rng.randrange(len(statuses))]
                self.chaos_failed += 1
        if code is not None:
            reason = {
                409: "Conflict",
                410: "Expired",
                429: "TooManyRequests",
                500: "InternalError",
                404: "NotFound",
                403: "Forbidden",
                422: "Invalid",
                503: "ServiceUnavailable",
            }.get(code, "Failure")
            headers = {"Retry-After": "1"} if code == 429 else None
            return web.json_response(
                _status(code, reason, f"injected {code} for {verb} {res.kind}"), status=code, headers=headers
            )
        body = None
        if method in ("POST", "PUT", "PATCH"):
            try:
                body = await request.json()
            except ValueError:
                return web.json_response(_status(400, "BadRequest", "body is not JSON"), status=400)
        if verb == "watch":
            return await self._watch(request, route)
        protobuf = "application/vnd.kubernetes.protobuf" in request.headers.get("Accept", "")
        if protobuf and (verb != "list" or res.kind != "Pod" or not self.protobuf_pods):
            message = f"only the following media types are accepted: application/json (not for {verb} {res.plural})"
            return web.json_response(_status(406, "NotAcceptable", message), status=406)
        try:
            status, payload = self._dispatch(route, verb, body, dict(q), request.headers.get("Content-Type", ""))
        except KeyError as exc:
            return web.json_response(_status(400, "BadRequest", f"missing field {exc}"), status=400)
        if protobuf and status == 200:
            self.protobuf_lists += 1
            meta = payload["metadata"]
            data = pod_list_bytes(payload["items"], meta["resourceVersion"], meta.get("continue", ""))
            return web.Response(body=data, status=200, headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
        return web.json_response(payload, status=status)

    async def _held(self, what: tuple[str, str], seconds: float) -> None:
        counter = self._holding.setdefault(what, [0, 0])
        counter[0] += 1
        counter[1] = max(counter[1], counter[0])
        try:
            await asyncio.sleep(seconds)
        finally:
            counter[0] -= 1
            if not counter[0]:
                self.held_peaks[what].append(counter[1])
                counter[1] = 0

    def _dispatch(self, r: _Route, verb: str, body: Any, q: dict[str, str], ctype: str) -> tuple[int, dict[str, Any]]:
        res = r.res
        bucket = self.objects[self._bucket(res)]
        ns = r.namespace if res.namespaced else None
        if verb == "patch" and "apply-patch" in ctype and (ns, r.name or "") not in bucket:
            verb = "create"  # server-side apply of an object that does not exist yet (else: a merge)
        if verb == "list":
            items = [
                o
                for (ons, _), o in sorted(bucket.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                if (ns is None or ons == ns)
                and _match_labels((o.get("metadata") or {}).get("labels") or {}, q.get("labelSelector"))
                and _match_fields(o, q.get("fieldSelector"))
            ]
            start = int(q.get("continue") or 0)
            limit = int(q.get("limit") or 0) or len(items) or 1
            page = items[start : start + limit]
            meta: dict[str, Any] = {"resourceVersion": str(self.current_rv)}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            return 200, {
                "kind": f"{res.api_kind}List",
                "apiVersion": res.api_version,
                "metadata": meta,
                "items": copy.deepcopy(page),
            }
        if verb == "create":
            meta = body.setdefault("metadata", {})
            if res.namespaced:
                meta["namespace"] = ns or meta.get("namespace") or "default"
            if not meta.get("name"):
                if not meta.get("generateName"):
                    return 422, _status(422, "Invalid", "metadata.name or metadata.generateName is required")
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            key = (meta.get("namespace") if res.namespaced else None, meta["name"])
            if key in bucket:
                return 409, _status(409, "AlreadyExists", f'{res.plural} "{meta["name"]}" already exists')
            for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            if self.admit is not None:
                verdict = self.admit(res.kind, "CREATE", body, None)
                if isinstance(verdict, str):
                    return 422, _status(422, "Invalid", verdict)
                body = verdict
            if res.kind == "Pod":  # (.value: a stored document holds plain JSON types)
                body.setdefault("status", {}).setdefault("phase", PodPhase.PENDING.value)
            elif self._has_status(res) and res.kind not in ("Node", "Namespace"):
                body.pop("status", None)
            return 201, self._store_put(res, body)
        key = (ns, r.name or "")
        cur = bucket.get(key)
        if verb == "bind":
            return self._bind(res, key, cur, body)
        if verb == "evict":
            if cur is None:
                return 404, _status(404, "NotFound", f'pods "{r.name}" not found')
            self._delete(res, key, cur)
            return 201, _status(201, "", "evicted") | {"status": "Success"}
        if cur is None:
            return 404, _status(404, "NotFound", f'{res.plural} "{r.name}" not found')
        if verb == "get":
            return 200, copy.deepcopy(cur)
        if verb == "delete":
            return 200, self._delete(res, key, cur)
        if verb == "update":
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != cur["metadata"]["resourceVersion"]:
                return 409, _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {res.plural} "{r.name}": the object has been modified; please apply your changes to the latest version and try again',
                )
            new = copy.deepcopy(body)
            new["metadata"] = {
                **new.get("metadata", {}),
                **{k: cur["metadata"][k] for k in ("uid", "creationTimestamp", "name")},
            }
            if res.namespaced:
                new["metadata"]["namespace"] = cur["metadata"].get("namespace")
            if self.admit is not None and r.sub is None:
                verdict = self.admit(res.kind, "UPDATE", new, copy.deepcopy(cur))
                if isinstance(verdict, str):
                    return 422, _status(422, "Invalid", verdict)
                new = verdict
            new = self._split_status(res, r.sub, cur, new)
            return 200, self._store_put(res, new)
        if verb == "patch":
            strategic = "strategic" in ctype
            new = merge_patch(copy.deepcopy(cur), body, strategic)
            want = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
            if want and want != cur["metadata"]["resourceVersion"]:
                return 409, _status(409, "Conflict", "the object has been modified")
            new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            new = self._split_status(res, r.sub, cur, new)
            return 200, self._store_put(res, new)
        return 405, _status(405, "MethodNotAllowed", verb)

    def _split_status(self, res: Kind, sub: str | None, cur: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Main resource writes keep the old status; status writes keep everything else."""
        if not self._has_status(res) or res.kind in ("Namespace",):
            return new
        if sub == "status":
            out = copy.deepcopy(cur)
            out["status"] = new.get("status", {})
            return out
        new["status"] = copy.deepcopy(cur.get("status", {}))
        return new

    def _delete(self, res: Kind, key: _Key, cur: dict[str, Any]) -> dict[str, Any]:
        bucket = self.objects[self._bucket(res)]
        bucket.pop(key, None)
        cur = copy.deepcopy(cur)
        cur["metadata"]["deletionTimestamp"] = _now()
        cur["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(res, "DELETED", cur)
        return cur

    def _bind(
        self, res: Kind, key: _Key, cur: dict[str, Any] | None, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.binding_attempts[f"{key[0]}/{key[1]}"] += 1
        if cur is None:
            return 404, _status(404, "NotFound", f'pods "{key[1]}" not found')
        node = ((body or {}).get("target") or {}).get("name")
        if not node:
            return 400, _status(400, "BadRequest", "binding has no target")
        if (cur.get("spec") or {}).get("nodeName"):
            return 409, _status(
                409, "Conflict", f'pod {key[1]} is already assigned to node "{cur["spec"]["nodeName"]}"'
            )
        if (self.objects[self._bucket(API_KINDS["Node"])]).get((None, node)) is None:
            return 404, _status(404, "NotFound", f'nodes "{node}" not found')
        new = copy.deepcopy(cur)
        new["spec"]["nodeName"] = node
        conds = [c for c in new.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"]
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()})
        new["status"]["conditions"] = conds
        self._store_put(res, new)
        self.bindings.append((f"{key[0]}/{key[1]}", node))
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    # ------------------------------------------------------------------ watch
    async def _watch(self, request: web.Request, r: _Route) -> web.StreamResponse:
        from aiohttp import web

        res = r.res
        b = self._bucket(res)
        q = request.query
        ns = r.namespace if res.namespaced else None
        rv_param = q.get("resourceVersion") or "0"
        timeout = float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        lsel, fsel = q.get("labelSelector"), q.get("fieldSelector")

        def visible(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            return (
                (ns is None or meta.get("namespace") == ns)
                and _match_labels(meta.get("labels") or {}, lsel)
                and _match_fields(obj, fsel)
            )

        if "application/vnd.kubernetes.protobuf" in request.headers.get("Accept", ""):
            if res.kind != "Pod" or not self.protobuf_pods:
                message = f"only the following media types are accepted: application/json (not for {res.plural})"
                return web.json_response(_status(406, "NotAcceptable", message), status=406)
            self.protobuf_watches += 1
            resp = web.StreamResponse(
                status=200, headers={"Content-Type": "application/vnd.kubernetes.protobuf;stream=watch"}
            )
            await resp.prepare(request)

            async def send(ev: dict[str, Any]) -> None:
                await resp.write(watch_frame(ev["type"], ev["object"]))

        else:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)

            async def send(ev: dict[str, Any]) -> None:
                await resp.write(json.dumps(ev).encode() + b"\n")

        queue: asyncio.Queue[_WatchItem] = asyncio.Queue()
        self.watchers[b].append(queue)
        try:
            if q.get("sendInitialEvents") in ("1", "true") and self.knows_watch_list:
                if not self.watch_list:
                    message = "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"
                    await send({"type": "ERROR", "object": _status(500, "InternalError", message)})
                    return resp
                for obj in list(self.objects[b].values()):
                    if visible(obj):
                        await send({"type": "ADDED", "object": obj})
                start = self.current_rv
                end = {"resourceVersion": str(start), "annotations": {"k8s.io/initial-events-end": "true"}}
                await send(
                    {
                        "type": "BOOKMARK",
                        "object": {"kind": res.api_kind, "apiVersion": res.api_version, "metadata": end},
                    }
                )
                rv_param = str(start)
            start = int(rv_param)
            if start == 0:
                for obj in list(self.objects[b].values()):
                    if visible(obj):
                        await send({"type": "ADDED", "object": obj})
                start = self.current_rv
            elif start < self.floor[b]:
                await send(
                    {
                        "type": "ERROR",
                        "object": _status(410, "Expired", f"too old resource version: {start} ({self.floor[b]})"),
                    }
                )
                return resp
            else:
                for rv, etype, obj in list(self.log[b]):
                    if rv > start and visible(obj):
                        await send({"type": etype, "object": obj})
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(queue.get(), min(left, self.bookmark_interval))
                except TimeoutError:
                    if bookmarks:
                        await send(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": res.api_kind,
                                    "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(self.current_rv)},
                                },
                            }
                        )
                    continue
                if item is None:
                    break
                if item == "GONE":
                    await send({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
                    break
                rv, etype, obj = item
                if rv > start and visible(obj):
                    await send({"type": etype, "object": obj})
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers[b].remove(queue)
        return resp


def webhook_admitter(server: WebhookServer) -> Admitter:
    """An ``ApiDouble.admit`` hook that runs a WebhookServer's mutating then validating reviews."""
    from ..kube.webhook import HOOKS, apply_json_patch

    by_kind: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for h in HOOKS:  # mutating ones first, as the API server calls them
        by_kind[h.kind.kind].append((h.path, h.operations))

    def admit(kind: str, op: str, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any] | str:
        for path, operations in by_kind.get(kind, []):
            if op not in operations:
                continue
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": str(uuid.uuid4()),
                    "operation": op,
                    "object": obj,
                    "oldObject": old,
                    "namespace": (obj.get("metadata") or {}).get("namespace"),
                },
            }
            resp = server.handle(path, review)["response"]
            if not resp["allowed"]:
                refused: str = resp["status"]["message"]
                return refused
            if resp.get("patch"):
                import base64

                obj = apply_json_patch(obj, json.loads(base64.b64decode(resp["patch"])))
        return obj

    return admit
