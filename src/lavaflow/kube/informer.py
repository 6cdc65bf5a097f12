"""The informer: list + watch of one kind into a KubeStore.

An informer lists its kind (paginated), then watches from the list's resourceVersion with
bookmarks, remembering the last resourceVersion seen so a dropped stream resumes where it stopped;
a 410 Gone (the version was compacted away) triggers a fresh list, whose differences with the
cache are delivered as ADDED/MODIFIED/DELETED events. Where the server can, the initial state
comes as a streaming list (a watch with sendInitialEvents), and the scheduler's bound pods as
protobuf (see protopod). What it reads goes into the store under the store's lock, through the
store's cache methods (``_apply``, ``_apply_page``, ``_apply_built``, ``_drop_unseen``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any, cast

from ..api.kinds import Kind
from ..store.base import DELETED
from . import protopod
from .client import ApiError, NotProtobuf
from .codec import key_of, resource_version
from .slim import UsageOnlyPod, proto_bound_pod, usage_only_pod
from .tasks import cancel_and_wait

if TYPE_CHECKING:
    from .store import KubeStore

log = logging.getLogger("lavaflow.kube")


class StreamingUnsupported(Exception):
    """The API server cannot send a watch's initial state (sendInitialEvents)."""


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Gone(Exception):
    pass


_BY_NAME = 16  # bound pods the protobuf could not give in full, listed one by one up to this many


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
                    rv = resource_version(obj)
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
