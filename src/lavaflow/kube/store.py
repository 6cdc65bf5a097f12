"""KubeStore: the Store protocol over a Kubernetes API server, its cache fed by informers.

One informer per kind (see informer) lists and watches into the store's cache; what the store
keeps of each object is slim's (see slim). Writes go through the API server.

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
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from ..api.core import PodTemplateSpec
from ..api.kinds import API_KINDS, Kind, kind_info
from ..api.volcano import JOB_NAME_KEY, TASK_SPEC_KEY
from ..store.base import ADDED, DELETED, MODIFIED, Handler, kind_of
from . import codec, protopod
from .client import MERGE_PATCH, STRATEGIC_PATCH, ApiError, KubeClient
from .codec import key_in, key_of, resource_version
from .compact import compact
from .discovery import served_resources
from .informer import INITIAL_EVENTS_END, Informer
from .slim import SLIM, decode_object, usage_only_pod

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


# The streaming-list probe (KubeStore._streams_lists): asked of the first of these kinds informed
# (built in and small), else of any; for objects of a name no object can have.
_PROBE_KINDS = ("PriorityClass", "Namespace", "Node", "Pod")
_PROBE_NAME = "-lavaflow-watch-list-probe-"
_REDISCOVER = 30.0  # seconds between two readings of one group/version's discovery at run time
_TEMPLATES_KEPT = 1024  # Job task templates kept worked out for their pods' creates


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
        memo_key = (job_key, resource_version(raw_job), task_name)
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
                    body.setdefault("metadata", {})["resourceVersion"] = resource_version(result)
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
