"""scheduler-plugins PodGroups (``scheduling.x-k8s.io/v1alpha1``) for ``lavaflow scheduler``.

When the API server serves the CRD (checked once at start; a 404 or 403 leaves the feature off,
logged), the scheduler watches these PodGroups and hands its cache, for each one, the internal
PodGroup of the same namespace and name (:func:`lavaflow.api.x_k8s_podgroup.internal_podgroup`):
the core schedules it as any gang. Pods labelled ``scheduling.x-k8s.io/pod-group`` are given to the
cache as members of that group (in memory: nothing is written to the pods). The internal status
the core decides (Pending / Inqueue / Running ...) stays in this process — the API has no field
for it; a restarted scheduler takes it from the phase on the server — and the group's status is
written to its status subresource in the API's own form. A group waiting longer than its
scheduleTimeoutSeconds gets a ``ScheduleTimeout`` Warning Event, and its pending pods'
``PodScheduled=False`` message says so; the scheduler keeps trying it, as coscheduling does.

A Volcano PodGroup of the same namespace and name takes precedence (the scheduler-plugins one is
then ignored, with a warning).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from ..api import x_k8s_podgroup as xpg
from ..api.kinds import kind_info as resource
from ..api.volcano import GROUP_NAME_ANNOTATION
from ..scheduler.model import ALLOCATED, TaskStatus
from ..store.base import DELETED
from . import codec
from .client import ApiError

if TYPE_CHECKING:
    from .scheduler_process import KubeScheduler

log = logging.getLogger("lavaflow.kube")
KIND = xpg.STORE_KIND


class CoschedulingGroups:
    api = "scheduling.x-k8s.io"
    maps_pods = True

    def __init__(self, sched: KubeScheduler) -> None:
        self.sched = sched
        self.enabled = False
        self.decided_status: dict[str, dict[str, Any]] = {}  # key -> internal status the core decided
        self.wanted: dict[str, dict[str, Any]] = {}  # key -> status (this API's form) waiting to be written
        self.dirty: set[str] = set()
        self.waiting: set[str] = set()  # groups whose timeout runs
        self.timed_out: set[str] = set()
        self._shadowed: set[str] = set()

    # ------------------------------------------------------------------ start
    async def discover(self) -> bool:
        """Watch the kind if the API server serves it (call before the store starts)."""
        try:
            await self.sched.client.request("GET", resource(KIND).path(), params={"limit": 1})
        except ApiError as exc:
            if exc.not_found:
                log.info("scheduling.x-k8s.io/v1alpha1 PodGroups are not served (no CRD): not watched")
            else:
                log.warning("scheduling.x-k8s.io/v1alpha1 PodGroups cannot be read (%s): not watched", exc)
            return False
        self.enabled = True
        self.sched.store.inform(KIND)
        self.sched.store.watch(KIND, self._on_group)
        log.info("watching scheduling.x-k8s.io/v1alpha1 PodGroups (gangs of pods labelled %s)", xpg.POD_GROUP_LABEL)
        return True

    # ------------------------------------------------------------------ cache feed
    def owns(self, key: str) -> bool:
        """True for the key of a scheduler-plugins PodGroup the cache holds (no Volcano one of that name)."""
        store = self.sched.store
        return self.enabled and key in store.objects.get(KIND, ()) and store.get("PodGroup", key) is None

    def on_pod(self, event: str, pod: Any) -> Any:
        """The pod as the cache should see it: a labelled pod joins its group."""
        name = xpg.group_of(pod) if self.enabled else None
        if name is None:
            return pod
        self.dirty.add(f"{pod.namespace}/{name}")
        if event == DELETED:
            return pod
        meta = pod.metadata.model_copy(
            update={"annotations": {**pod.metadata.annotations, GROUP_NAME_ANNOTATION: name}}
        )
        return pod.model_copy(update={"metadata": meta})

    def _on_group(self, event: str, group: Any, old: Any) -> None:
        key = group.key
        cache = self.sched.cache
        if event == DELETED:
            self.decided_status.pop(key, None)
            self.wanted.pop(key, None)
            self.waiting.discard(key)
            self.timed_out.discard(key)
            if self.sched.store.get("PodGroup", key) is None:
                cache.on_podgroup(xpg.internal_podgroup(group), True)
            self._shadowed.discard(key)
            return
        if self.sched.store.get("PodGroup", key) is not None:
            if key not in self._shadowed:
                log.warning(
                    "PodGroup %s exists in scheduling.volcano.sh and scheduling.x-k8s.io: the Volcano one is used", key
                )
                self._shadowed.add(key)
            return
        status = self.decided_status.get(key) or {"phase": xpg.internal_phase_of(group)}
        cache.on_podgroup(xpg.internal_podgroup(group, status))
        self.dirty.add(key)

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        """A status the core decided for a PodGroup: True if it is one of ours (then kept here)."""
        if not self.owns(key):
            return False
        self.decided_status[key] = status
        group = self.sched.store.get(KIND, key)
        if group is not None:
            self.sched.cache.on_podgroup(xpg.internal_podgroup(group, status))
        self.dirty.add(key)
        return True

    def adopt(self, pg: Any, status: dict[str, Any]) -> bool:
        """A group of ours a previous leader started to bind: as a status the core decided."""
        return self.decided(pg.key, status)

    # ------------------------------------------------------------------ status write-back
    def after_cycle(self) -> None:
        """Status in this API's form for the groups that changed, and timeouts (store lock held)."""
        if not self.enabled:
            return
        now = time.time()
        for key in sorted(self.dirty | self.waiting):
            self._refresh(key, now)
        self.dirty.clear()

    def _refresh(self, key: str, now: float) -> None:
        group = self.sched.store.get(KIND, key)
        if group is None or not self.owns(key):
            self.waiting.discard(key)
            return
        job = self.sched.cache.jobs.get(key)
        counts = xpg.Counts()
        internal_phase = None
        if job is not None:
            c = job.counts
            counts = xpg.Counts(
                len(job.tasks),
                job.count(ALLOCATED),
                c[TaskStatus.RUNNING],
                c[TaskStatus.SUCCEEDED],
                c[TaskStatus.FAILED],
            )
            internal_phase = job.pg.status.phase if job.pg is not None else None
        status = xpg.status_of(group, counts, codec.rfc3339(now), internal_phase, xpg.owners_of([group]))
        have = self.wanted.get(key) or xpg.current_status(group)
        if status != have:
            self.wanted[key] = status
            self.sched.dispatch.status((KIND, key), functools.partial(self._write, key))
        if not xpg.waiting(group.spec.min_member, counts, status["phase"]):
            self.waiting.discard(key)
            self.timed_out.discard(key)
            return
        self.waiting.add(key)
        start = codec.parse_time(status.get("scheduleStartTime"))
        if key in self.timed_out or not isinstance(start, float) or now < start + xpg.timeout_of(group):
            return
        self.timed_out.add(key)
        why = None
        if job is not None and job.condition is not None and job.condition[0] == "Unschedulable":
            why = job.condition[2] or job.condition[1]
        self.sched.writer.event_later(KIND, key, "Warning", xpg.TIMEOUT_REASON, xpg.timeout_message(group, why))

    def pod_message(self, job_uid: str, message: str) -> str:
        """The PodScheduled=False message of a pending pod of the group (after its timeout, says so)."""
        if job_uid not in self.timed_out:
            return message
        group = self.sched.store.get(KIND, job_uid)
        return xpg.timeout_message(group, message) if group is not None else message

    async def _write(self, key: str) -> None:
        from .gang_source import forget_written, unsent

        status = self.wanted.get(key)
        if status is None or self.sched.writer.is_fenced("status", key):
            return
        try:
            raw = await self.sched.store.patch(KIND, key, {"status": status}, status=True)
        except Exception as exc:  # gone, refused or a dropped connection: decided again next cycle
            unsent(KIND, key, exc)

            def back() -> None:
                if forget_written(self.wanted, key, status):
                    self.dirty.add(key)

            self.sched.writer.under_lock(back)
            return
        self.sched.writer.observe(KIND, raw, then=functools.partial(forget_written, self.wanted, key, status))
