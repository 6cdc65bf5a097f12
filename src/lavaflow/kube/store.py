"""KubeStore: the Store protocol over a Kubernetes API server, its cache fed by informers.

One informer per kind (see informer) lists and watches into the store's cache; what the store
keeps of each object is slim's (see slim). Writes go through the API server: the requests, and
where each kind's status is written, are its base StoreRemote's (see remote).

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
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..api.kinds import Kind, kind_info
from ..store.base import ADDED, DELETED, MODIFIED, Handler, kind_of
from . import codec, protopod
from .client import KubeClient
from .codec import key_in, key_of, resource_version
from .compact import compact
from .informer import INITIAL_EVENTS_END, Informer
from .remote import StoreRemote
from .slim import SLIM, decode_object, usage_only_pod

log = logging.getLogger("lavaflow.kube")
_T = TypeVar("_T")


async def _results(coro: Any) -> list[Any]:
    """``[result]`` or ``[exception]``: one write in the shape of _create_batches' results."""
    try:
        return [await coro]
    except Exception as exc:  # noqa: BLE001 - handed back to the syncing thread
        return [exc]


# The streaming-list probe (KubeStore._streams_lists): asked of the first of these kinds informed
# (built in and small), else of any; for objects of a name no object can have.
_PROBE_KINDS = ("PriorityClass", "Namespace", "Node", "Pod")
_PROBE_NAME = "-lavaflow-watch-list-probe-"


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


def _strip(raw: dict[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        raw = dict(raw)
        raw["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return raw


class KubeStore(StoreRemote):
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
        key = key_in(res, meta)
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
            obj = decode_object(res, raw)
        else:
            obj = usage_only_pod(raw, self.ours) if self.ours is not None and kind == "Pod" else None
            if obj is None:
                slim = SLIM.get(kind)
                obj = decode_object(res, raw if slim is None else slim(raw))
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
        return _newer_or_same(have, resource_version(raw))

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
