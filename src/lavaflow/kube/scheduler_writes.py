"""The scheduler process's write side: what a cycle decided, sent to the API server.

``SchedulerWriter`` holds what was decided and is not yet written, and sends it through the
process's ``Dispatcher`` (bindings first, then status writes, then events):

* binds through ``pods/<name>/binding``, concurrently (``bind_workers``) under
  the client's rate limit, ahead of every other write. A pod being bound keeps its place in the
  cache (as Volcano's "assumed" pods; see ``inflight``) until the watch shows it bound; a failed
  bind puts it back from the API's view. The API server refuses to bind a bound pod,
  and a restarted scheduler lists pods before its first cycle, so no pod is
  bound twice and no node is overcommitted;
* evictions through the Eviction API (``pods/<name>/eviction``), at most ``evict_limit`` fast;
* PodGroup and Queue status through their status subresources (merge patches),
  coalesced per object. A PodGroup status the session decided is the cache's at
  once (as Volcano's cache keeps it), not only when the write comes back, so the
  next cycle neither enqueues the job again nor decides the same write twice;
* Kubernetes Events, and the pod condition ``PodScheduled=False`` with the
  gang's message (``"3/4 tasks in gang unschedulable: ..."``) so that
  ``kubectl describe pod`` explains a wait.

Its interface: ``send(decisions)`` after each cycle and ``bind_now`` for a binding decided
during one; ``pg_wanted`` and ``write_podgroup`` for Volcano PodGroups' status (their gang
source, volcano_podgroup, decides what goes there); for the other gang sources' own status
writes (see gang_source), ``is_fenced`` before a write, ``observe`` or ``under_lock`` to hand its
result to the cache, and ``event_later``. No write leaves while this process cannot prove it
holds the lease (``is_fenced``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..api.kinds import kind_info
from ..elastic.spec import RESIZED_OUT
from ..scheduler.cache import Decisions, SchedulerCache
from ..scheduler.model import Eviction, EvictionCause, TaskStatus
from . import codec
from .client import ApiError, Fenced, KubeClient
from .dispatch import Dispatcher, RateLimiter
from .gang_source import GangSource, forget_written, unsent
from .leader import LeaderElector
from .metrics import SchedulerMetrics
from .store import KubeStore

log = logging.getLogger("lavaflow.kube")

COMPONENT = "lavaflow-scheduler"


class SchedulerWriter:
    """The write side of one scheduler process (see the module's docstring)."""

    def __init__(
        self,
        client: KubeClient,
        store: KubeStore,
        cache: SchedulerCache,
        dispatch: Dispatcher,
        metrics: SchedulerMetrics,
        gang_sources: Sequence[GangSource],
        identity: str,
        elector: LeaderElector | None = None,
        emit_events: bool = True,
        evictions_per_second: float = 20.0,
        eviction_burst: int = 100,
    ) -> None:
        self.client = client
        self.store = store
        self.cache = cache
        self.dispatch = dispatch
        self.metrics = metrics
        self.gang_sources = gang_sources
        self.elector = elector
        self.emit_events = emit_events
        self.identity = identity
        self.inflight: dict[str, str] = {}  # pod key -> node, binding sent but not yet seen bound
        # Evictions leave at most this fast, whatever preempt and reclaim decide (no eviction storm).
        self.evict_limit = RateLimiter(evictions_per_second, eviction_burst)
        # statuses decided but not yet written (the newest per object)
        self.pg_wanted: dict[str, dict[str, Any]] = {}
        self.queue_wanted: dict[str, dict[str, Any]] = {}
        self.condition_wanted: dict[str, str] = {}
        self.bound = 0
        self.bind_failures = 0
        self._lock_work: list[Callable[[], object]] = []  # results of writes, applied to the cache under the store lock
        self._lock_worker: asyncio.Task[None] | None = None
        self.fenced = 0  # writes refused because the lease could not be proven held

    # ------------------------------------------------------------------ decisions in
    def send(self, d: Decisions) -> None:
        """Send what a cycle decided (called with the store lock held, after the session)."""
        for key, node in d.binds:
            self.bind_now(key, node)
        for key, eviction in d.evictions:
            self.dispatch.decision(functools.partial(self.evict, key, eviction))
        for kind, key, etype, reason, message in d.events:
            self.event_later(kind, key, etype, reason, message)
        for _key, kind, _message, count in d.resizes:
            self.metrics.elastic_resizes.labels(kind=kind.lower()).inc(count or 1)
        for key, status in d.podgroups:
            # each source in turn: the last (Volcano's) takes every PodGroup the others do not
            for source in self.gang_sources:
                if source.decided(key, status):
                    break
        for name, status in d.queues:
            if self.queue_wanted.get(name) != status:
                self.queue_wanted[name] = status
                self.dispatch.status(("Queue", name), functools.partial(self.write_queue, name))
        for source in self.gang_sources:
            source.after_cycle()
        for key, message in self._unschedulable_pods():
            self.condition_wanted[key] = message
            self.dispatch.status(("Pod", key), functools.partial(self.write_pod_condition, key))

    def bind_now(self, key: str, node: str) -> None:
        """A binding decided (in the session's thread, or after it): the cache sees the pod on
        ``node`` until the watch shows it bound (see ``inflight``); it leaves ahead of other writes."""
        self.inflight[key] = node
        self.dispatch.decision(functools.partial(self.bind, key, node))

    def _unschedulable_pods(self) -> list[tuple[str, str]]:
        """Pending pods of gangs the last session found unschedulable, whose PodScheduled condition
        does not say so yet (nor is about to). Every unschedulable gang is looked at, not only those
        whose PodGroup status changed: pods can reach the cache after their PodGroup's condition
        was written."""
        out = []
        for job in self.cache.jobs.values():
            cond = job.condition
            if cond is None or cond[0] != "Unschedulable":
                continue
            if job.valid_task_num() < job.min_available:
                # Not all its pods exist yet (its job controller is still creating them): as in
                # Volcano, which leaves such a gang out of the session, its PodGroup condition says
                # so and its pods are not written, once per batch of new pods.
                continue
            message = cond[2] or cond[1] or "Unschedulable"
            for source in self.gang_sources:
                message = source.pod_message(job.uid, message)
            for task in job.tasks.values():
                if task.status != TaskStatus.PENDING or task.uid in self.inflight or task.pod is None:
                    continue
                have = next((c for c in task.pod.status.conditions if c.type == "PodScheduled"), None)
                if have is not None and have.status == "False" and have.message == message:
                    continue
                if self.condition_wanted.get(task.uid) == message:
                    continue
                out.append((task.uid, message))
        return out

    async def settled(self, timeout: float = 10.0) -> None:
        """Wait until the results of the writes that ended are applied to the cache (tests)."""
        while self._lock_worker is not None and not self._lock_worker.done():
            await asyncio.wait_for(asyncio.shield(self._lock_worker), timeout)

    # ------------------------------------------------------------------ writes out
    def is_fenced(self, what: str, key: str) -> bool:
        """True (and the write is refused) when this process cannot prove it still holds the
        lease: a leader frozen or cut off for longer than the renew deadline must not write from
        its old view, since a standby may already lead (client-go's renew deadline, checked before
        every write rather than only by the renewal loop)."""
        if self.elector is None or self.elector.holding():
            return False
        self.fenced += 1
        self.metrics.fenced.labels(kind=what).inc()
        log.warning("not sending %s of %s: lease not renewed within %.1fs", what, key, self.elector.renew_deadline)
        return True

    def _may_send(self, what: str, key: str) -> bool:
        return not self.is_fenced(what, key)

    async def bind(self, key: str, node: str) -> None:
        if self.is_fenced("binding", key):
            await self._forget(key)
            return
        ns, name = key.split("/", 1)
        fence = None if self.elector is None else functools.partial(self._may_send, "binding", key)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        t0 = time.perf_counter()
        try:
            await self.client.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=body, fence=fence)
        except Fenced:
            await self._forget(key)
            return
        except Exception as exc:
            self.bind_failures += 1
            reason = str(exc.status) if isinstance(exc, ApiError) else type(exc).__name__
            self.metrics.bind_errors.labels(reason=reason).inc()
            if isinstance(exc, ApiError) and exc.status not in (404, 409):
                self.store.refused("Pod", key, "bind", exc)
            else:  # the pod is gone or already bound (races), or no answer
                log.warning("binding %s to %s failed: %s", key, node, exc)
            await self._forget(key)
            if isinstance(exc, ApiError) and not exc.not_found and not exc.status == 409:
                self.event_later(
                    "Pod", key, "Warning", "FailedScheduling", f"Binding to node {node} failed: {exc.message or exc}"
                )
            return
        self.metrics.bind_latency.observe(time.perf_counter() - t0)
        self.bound += 1
        pod = self.store.get("Pod", key)
        created = codec.parse_time(pod.metadata.creation_timestamp) if pod is not None else None
        self.metrics.bound_one(created if isinstance(created, float) else None)
        self.event_later("Pod", key, "Normal", "Scheduled", f"Successfully assigned {key} to {node}")

    async def _forget(self, key: str) -> None:
        """A bind that failed: the cache takes the pod back from the API's view."""
        async with self.store.lock:
            self.inflight.pop(key, None)
            pod = self.store.get("Pod", key)
            if pod is not None:
                for source in self.gang_sources:
                    if source.maps_pods:
                        pod = source.on_pod("MODIFIED", pod)
                self.cache.on_pod(pod)

    async def evict(self, key: str, reason: Eviction) -> None:
        wait = self.evict_limit.reserve()
        if wait > 0:
            self.metrics.evictions_delayed.inc()
            await asyncio.sleep(wait)
        if self.is_fenced("eviction", key):
            await self._forget(key)
            return
        ns, name = key.split("/", 1)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        if reason.cause is EvictionCause.RESIZE:
            # Tell the job controller this worker goes for a resize, not a failure.
            try:
                await self.store.patch("Pod", key, {"metadata": {"annotations": {RESIZED_OUT: reason.message[:200]}}})
            except ApiError as exc:  # (a refusal is reported by the store)
                if exc.not_found:
                    return
        try:
            fence = None if self.elector is None else functools.partial(self._may_send, "eviction", key)
            await self.client.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body=body, fence=fence)
        except Fenced:
            await self._forget(key)
            return
        except ApiError as exc:
            if exc.status == 409:
                log.warning("evicting %s: %s", key, exc)
            elif not exc.not_found:
                self.store.refused("Pod", key, "evict", exc)
            if not exc.not_found:
                await self._forget(key)
            return
        self.metrics.evictions.labels(reason=reason.cause.value).inc()
        if reason.cause in (EvictionCause.PREEMPT, EvictionCause.RECLAIM):
            self.metrics.preemptions.inc()
        self.event_later("Pod", key, "Normal", "Evict", f"Pod evicted by lavaflow: {reason.message}")

    def observe(self, kind: str, raw: dict[str, Any], then: Callable[[], object] | None = None) -> None:
        """The server's answer to a status write is the newest object: the cache takes it (with
        ``then()``) as soon as the store lock is free, without the writer waiting for it."""

        def apply() -> None:
            if then is not None:
                then()
            self.store.observe(kind, raw)

        self.under_lock(apply)

    def under_lock(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` with the store lock held, batched with the others waiting. A scheduling
        cycle holds the lock for its whole session (seconds on a large cluster): a status writer
        that waited for it after each write would finish only a handful of writes per cycle
        (about 6 per second at 87,000 PodGroups). Writers hand over and go on with the next."""
        self._lock_work.append(fn)
        if self._lock_worker is None or self._lock_worker.done():
            self._lock_worker = asyncio.get_running_loop().create_task(self._run_under_lock())

    async def _run_under_lock(self) -> None:
        while self._lock_work:
            async with self.store.lock:
                while self._lock_work:
                    batch, self._lock_work = self._lock_work, []
                    for fn in batch:
                        try:
                            fn()
                        except Exception:
                            log.exception("applying a write's result to the cache")

    async def write_podgroup(self, key: str) -> None:
        status = self.pg_wanted.get(key)
        if status is None or self.is_fenced("status", key):
            return
        old = self.store.get("PodGroup", key)
        try:
            raw = await self.store.patch("PodGroup", key, {"status": codec._times_out(status)}, status=True)
        except Exception as exc:  # gone, refused or a dropped connection: the next cycle decides again
            unsent("PodGroup", key, exc)

            def back() -> None:
                if forget_written(self.pg_wanted, key, status) and old is not None:
                    self.cache.on_podgroup(self.store.get("PodGroup", key) or old)

            self.under_lock(back)
            return
        self.observe("PodGroup", raw, then=functools.partial(forget_written, self.pg_wanted, key, status))
        cond = next((c for c in status.get("conditions", []) if c.get("status") == "True"), None)
        if cond is None:
            return
        before = None
        if old is not None:
            before = next((c for c in old.status.conditions if c.type == cond["type"] and c.status == "True"), None)
        if before is not None and (before.message or "") == (cond.get("message") or ""):
            return
        if cond["type"] == "Unschedulable":
            self.event_later(
                "PodGroup", key, "Warning", "Unschedulable", cond.get("message") or cond.get("reason") or ""
            )
        elif cond["type"] == "Scheduled":
            self.event_later(
                "PodGroup", key, "Normal", "Scheduled", cond.get("reason") or "tasks in gang are ready to be scheduled"
            )

    async def write_queue(self, name: str) -> None:
        status = self.queue_wanted.get(name)
        if status is None or self.is_fenced("status", name):
            return
        allocated = dict(status.get("allocated") or {})
        old = self.store.get("Queue", name)
        if old is not None:
            for k in old.status.allocated:
                allocated.setdefault(k, None)
        try:
            raw = await self.store.patch("Queue", name, {"status": {"allocated": allocated}}, status=True)
        except Exception as exc:  # the next cycle decides again
            unsent("Queue", name, exc)
            forget_written(self.queue_wanted, name, status)
            return
        self.observe("Queue", raw, then=functools.partial(forget_written, self.queue_wanted, name, status))

    async def write_pod_condition(self, key: str) -> None:
        message = self.condition_wanted.get(key)
        if message is None:
            return
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": codec.rfc3339(time.time()),
        }
        try:
            raw = await self.store.patch("Pod", key, {"status": {"conditions": [cond]}}, status=True, strategic=True)
        except Exception as exc:
            unsent("Pod", key, exc)
            forget_written(self.condition_wanted, key, message)
            return
        self.observe("Pod", raw, then=functools.partial(forget_written, self.condition_wanted, key, message))
        self.event_later("Pod", key, "Warning", "FailedScheduling", message)

    def event_later(self, kind: str, key: str, etype: str, reason: str, message: str) -> None:
        if self.emit_events:
            self.dispatch.event(functools.partial(self.event, kind, key, etype, reason, message))

    async def event(self, kind: str, key: str, etype: str, reason: str, message: str) -> None:
        if not self.emit_events:
            return
        await post_event(self.client, self.store, kind, key, etype, reason, message, COMPONENT, self.identity)


def with_status(pg: Any, status: dict[str, Any]) -> Any:
    """The PodGroup as the cache should see it while its new status is being written."""
    return pg.model_copy(update={"status": type(pg.status).model_validate(status)})


async def post_event(
    client: KubeClient,
    store: KubeStore | None,
    kind: str,
    key: str,
    etype: str,
    reason: str,
    message: str,
    component: str,
    instance: str,
    sem: asyncio.Semaphore | None = None,
) -> None:
    """Record a core/v1 Event about an object (best effort)."""
    res = kind_info(kind)
    ns, name = key.split("/", 1) if res.namespaced else ("default", key)
    obj = store.get(kind, key) if store is not None and kind in store.informers else None
    now = codec.rfc3339(time.time())
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": ns},
        "involvedObject": {
            "apiVersion": res.api_version,
            "kind": res.api_kind,
            "name": name,
            "namespace": ns if res.namespaced else None,
            "uid": obj.metadata.uid if obj is not None else None,
        },
        "reason": reason,
        "message": message[:1024],
        "type": etype,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    body["involvedObject"] = {k: v for k, v in body["involvedObject"].items() if v is not None}
    try:
        if sem is not None:
            async with sem:
                await client.request("POST", f"/api/v1/namespaces/{ns}/events", body=body)
        else:
            await client.request("POST", f"/api/v1/namespaces/{ns}/events", body=body)
    except ApiError as exc:  # refused, as client-go's recorder reports it: an error, not retried
        if store is not None:
            store.refused("Event", f"about {kind} {key}", "create", exc)
        else:
            log.error("event %s on %s %s refused: %s", reason, kind, key, exc)
    except Exception as exc:
        log.debug("event %s on %s %s: %s", reason, kind, key, exc)
