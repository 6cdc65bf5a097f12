"""The Kubernetes Workload API (KEP-4671) for ``lavaflow scheduler``.

The API is built into kube-apiserver (1.35: ``scheduling.k8s.io/v1alpha1`` Workloads; 1.36:
``scheduling.k8s.io/v1alpha2`` PodGroups), served only where its feature gate (GenericWorkload)
and runtime-config are on. At start the scheduler asks for each version's objects once; a 404 or
403 leaves that version off (logged). Served, it watches them and hands its cache, for each gang
instance its pods name (api/workload_api.py), an internal PodGroup the core schedules as any gang;
the pods join it in memory (nothing is written to them). A pod that names a Workload or PodGroup
the scheduler has not seen waits outside any group (as under kube-scheduler) and joins when it
appears.

Status: a v1alpha1 Workload has none, so nothing is written to it — an unschedulable gang gets a
Warning ``Unschedulable`` Event on its Workload (once its minCount pods exist, once until it is
placed) and its pending pods the
core's ``PodScheduled=False`` condition. A v1alpha2 PodGroup gets the same Event and its
``PodGroupScheduled`` condition through the status subresource (a strategic merge patch of that one
condition: the server merges conditions by type, so others are left alone). The core's own phase of a gang stays in this process; a
restarted scheduler starts every gang ``Pending``, and one with bound pods is taken over as admitted
(see the failover notes in docs/kubernetes.md), so its bound pods are not counted twice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from ..api import workload_api as wapi
from ..api.kinds import kind_info as resource
from ..api.volcano import GROUP_NAME_ANNOTATION, PodGroup, PodGroupPhase
from ..store.base import DELETED
from . import codec
from .client import ApiError

if TYPE_CHECKING:
    from .scheduler_process import KubeScheduler

log = logging.getLogger("lavaflow.kube")
SOURCES = (
    (wapi.WORKLOAD_KIND, "scheduling.k8s.io/v1alpha1 Workloads (Kubernetes 1.35)"),
    (wapi.PODGROUP_KIND, "scheduling.k8s.io/v1alpha2 PodGroups (Kubernetes 1.36)"),
)


class WorkloadGangs:
    api = "scheduling.k8s.io"
    maps_pods = True

    def __init__(self, sched: KubeScheduler) -> None:
        self.sched = sched
        self.kinds: list[str] = []  # the source kinds the API server serves
        self.refs: dict[str, wapi.GangRef] = {}  # gang key -> the gang
        self.members: dict[str, set[str]] = {}  # gang key -> keys of its pods
        self.by_source: dict[tuple[str, str], set[str]] = {}  # (kind, key) of a Workload/PodGroup -> gangs
        self.fed: set[str] = set()  # gangs whose internal PodGroup the cache holds
        self.decided_status: dict[str, dict[str, Any]] = {}  # gang key -> internal status the core decided
        self.wanted: dict[str, dict[str, Any]] = {}  # v1alpha2 PodGroup key -> condition waiting to be written
        self.dirty: set[str] = set()
        self.reported: set[str] = set()  # gangs whose Unschedulable Event went out (until placed)

    @property
    def enabled(self) -> bool:
        return bool(self.kinds)

    # ------------------------------------------------------------------ start
    async def discover(self) -> list[str]:
        """Watch each version the API server serves (call before the store starts)."""
        # Both versions are asked at once (start-up waits for these answers); handled in order.
        answers = await asyncio.gather(
            *(self.sched.client.request("GET", resource(kind).path(), params={"limit": 1}) for kind, _ in SOURCES),
            return_exceptions=True,
        )
        for (kind, what), answer in zip(SOURCES, answers, strict=True):
            if isinstance(answer, BaseException) and not isinstance(answer, ApiError):
                raise answer  # not an answer of the server (connection lost ...): as before
            if isinstance(answer, ApiError):
                exc = answer
                if exc.not_found:
                    log.info(
                        "%s are not served (feature gate GenericWorkload or runtime-config off): not watched", what
                    )
                else:
                    log.warning("%s cannot be read (%s): not watched", what, exc)
                continue
            self.kinds.append(kind)
            self.sched.store.inform(kind)
            self.sched.store.watch(kind, functools.partial(self._on_source, kind))
            log.info("watching %s (gangs of the Kubernetes Workload API)", what)
        return self.kinds

    # ------------------------------------------------------------------ cache feed
    def pod_message(self, job_uid: str, message: str) -> str:
        """A member's PodScheduled=False message: the session's reason, as it is."""
        return message

    def owns(self, key: str) -> bool:
        return key in self.fed

    def on_pod(self, event: str, pod: Any) -> Any:
        """The pod as the cache should see it: a pod naming a gang the scheduler knows joins it."""
        ref = wapi.gang_of(pod) if self.kinds else None
        if ref is None or ref.source[0] not in self.kinds:  # that version is not served: the pod waits
            return pod
        key = ref.key
        self.dirty.add(key)
        if event == DELETED:
            self.members.get(key, set()).discard(pod.key)
            return pod
        self.members.setdefault(key, set()).add(pod.key)
        if key not in self.refs:
            self.refs[key] = ref
            self.by_source.setdefault(ref.source, set()).add(key)
            self._feed(key)
        if key not in self.fed or pod.metadata.annotations.get(GROUP_NAME_ANNOTATION) == ref.internal_name:
            return pod
        meta = pod.metadata.model_copy(
            update={"annotations": {**pod.metadata.annotations, GROUP_NAME_ANNOTATION: ref.internal_name}}
        )
        return pod.model_copy(update={"metadata": meta})

    def _on_source(self, kind: str, event: str, obj: Any, old: Any) -> None:
        for key in sorted(self.by_source.get((kind, obj.key), ())):
            was = key in self.fed
            self._feed(key, gone=event == DELETED)
            if (key in self.fed) != was:  # the gang appeared or went: its pods join or leave it
                for pod_key in sorted(self.members.get(key, ())):
                    pod = self.sched.store.get("Pod", pod_key)
                    if pod is not None:
                        self.sched.on_pod("MODIFIED", pod, None)
            self.dirty.add(key)

    def _feed(self, key: str, gone: bool = False) -> None:
        ref = self.refs[key]
        source = None if gone else self.sched.store.get(*ref.source)
        policy = wapi.policy_in(source, ref) if source is not None else None
        cache = self.sched.cache
        if policy is None:
            if key in self.fed:
                self.fed.discard(key)
                stub = PodGroup.model_validate({"metadata": {"name": ref.internal_name, "namespace": ref.namespace}})
                cache.on_podgroup(stub, True)
            self.decided_status.pop(key, None)
            self.reported.discard(key)
            return
        status = self.decided_status.get(key) or {"phase": PodGroupPhase.PENDING.value}
        cache.on_podgroup(wapi.internal_podgroup(ref, source, policy, status))
        self.fed.add(key)

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        """A status the core decided for a PodGroup: True if it is one of ours (then kept here)."""
        if key not in self.fed:
            return False
        self.decided_status[key] = status
        self._feed(key)
        self.dirty.add(key)
        return True

    def adopt(self, pg: Any, status: dict[str, Any]) -> bool:
        """A gang of ours a previous leader started to bind: as a status the core decided."""
        return self.decided(pg.key, status)

    # ------------------------------------------------------------------ events and status
    def after_cycle(self) -> None:
        """Events for newly unschedulable gangs, v1alpha2 PodGroup conditions (store lock held)."""
        if not self.kinds:
            return
        now = time.time()
        for key in sorted(self.dirty):
            self._refresh(key, now)
        self.dirty.clear()

    def _refresh(self, key: str, now: float) -> None:
        ref = self.refs.get(key)
        job = self.sched.cache.jobs.get(key)
        if ref is None or key not in self.fed or job is None or job.pg is None:
            return
        placed = job.ready_num
        need = max(job.min_available, 1)
        scheduled = placed >= need
        why = None
        if job.condition is not None and job.condition[0] == "Unschedulable":
            why = job.condition[2] or job.condition[1]
        gang = job.pg.metadata.annotations.get(wapi.POLICY_ANNOTATION) == "gang"
        kind, source_key = ref.source
        if scheduled:
            self.reported.discard(key)
        elif why and gang and key not in self.reported and len(job.tasks) >= need:
            # (only once minCount pods exist: before, the reason is that some are still being
            # created — "10/2 tasks in gang unschedulable" — and the Event, recorded once, would
            # keep saying so after they all came)
            self.reported.add(key)
            self.sched.writer.event_later(
                kind, source_key, "Warning", wapi.UNSCHEDULABLE_REASON, wapi.unschedulable_message(ref, why)
            )
        if kind != wapi.PODGROUP_KIND:
            return  # a v1alpha1 Workload has no status
        group = self.sched.store.get(kind, source_key)
        if group is None:
            return
        # times as the store holds them (seconds); RFC 3339 on the way out
        if scheduled:
            cond = wapi.scheduled_condition(True, f"{placed} of minimum {need} pods placed", now, group)
        elif why:
            cond = wapi.scheduled_condition(False, why, now, group)
        else:
            return
        have = self.wanted.get(source_key) or wapi.current_scheduled_condition(group)
        if cond == have:
            return
        self.wanted[source_key] = cond
        self.sched.dispatch.status((kind, source_key), functools.partial(self._write, source_key))

    async def _write(self, key: str) -> None:
        """A strategic merge patch of the one condition: the server merges status.conditions by
        type, so conditions other components write (DisruptionTarget) are never overwritten from
        this process's possibly older view of them."""
        from .gang_source import forget_written, unsent

        cond = self.wanted.get(key)
        if cond is None or self.sched.writer.is_fenced("status", key):
            return
        try:
            body = {"status": {"conditions": [codec._times_out(cond)]}}
            raw = await self.sched.store.patch(wapi.PODGROUP_KIND, key, body, status=True, strategic=True)
        except Exception as exc:  # gone, refused or a dropped connection: decided again next cycle
            unsent(wapi.PODGROUP_KIND, key, exc)

            def back() -> None:
                if forget_written(self.wanted, key, cond):
                    self.dirty.update(self.by_source.get((wapi.PODGROUP_KIND, key), ()))

            self.sched.writer.under_lock(back)
            return
        self.sched.writer.observe(
            wapi.PODGROUP_KIND, raw, then=functools.partial(forget_written, self.wanted, key, cond)
        )
