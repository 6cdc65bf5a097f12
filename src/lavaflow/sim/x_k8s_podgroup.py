"""scheduler-plugins PodGroups (``scheduling.x-k8s.io/v1alpha1``) in the simulator.

The simulator's store plays the API server, so the translation is kept there, where every report
sees it: for each such PodGroup this controller keeps an internal PodGroup of the same namespace and
name (annotated ``lavaflow.io/gang-api``) that the scheduler, the queue controller and the results
work on; it puts the group's labelled pods into it (the ``scheduling.k8s.io/group-name`` annotation,
as Volcano's PodGroup controller does for pods without a group); and it writes the group's status
back onto the scheduler-plugins object in that API's form. When a group has waited longer than its
scheduleTimeoutSeconds it records a ``ScheduleTimeout`` Warning Event naming the gang's reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..api import x_k8s_podgroup as xpg
from ..api.volcano import GROUP_NAME_ANNOTATION, PodGroup
from ..controllers.base import Clock, Controller
from ..store.base import DELETED

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..store.base import Store

EventSink = Callable[[str, str, str, str, str], None]  # (kind, key, type, reason, message)


class CoschedulingPodGroups(Controller):
    def __init__(self, store: Store, clock: Clock, on_event: EventSink | None = None) -> None:
        super().__init__(store, clock)
        self.on_event = on_event
        self.members: dict[str, set[str]] = {}  # group key -> keys of its labelled pods
        self.timed_out: set[str] = set()  # groups whose timeout was reported (until they are placed)
        self._timer_at: dict[str, float] = {}
        store.watch(xpg.STORE_KIND, lambda ev, obj, old: self.mark(obj.key))
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", lambda ev, pg, old: self.mark(pg.key) if xpg.is_stand_in(pg) else None)

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        name = pod.metadata.labels.get(xpg.POD_GROUP_LABEL)
        if not name:
            return
        key = f"{pod.namespace}/{name}"
        if event == DELETED:
            self.members.get(key, set()).discard(pod.key)
        else:
            self.members.setdefault(key, set()).add(pod.key)
        self.mark(key)

    def sync(self, key: str) -> None:
        group = self.store.get(xpg.STORE_KIND, key)
        internal = self.store.get("PodGroup", key)
        if group is None:
            if internal is not None and xpg.is_stand_in(internal):
                self.store.delete("PodGroup", key)
            self.timed_out.discard(key)
            return
        if internal is not None and not xpg.is_stand_in(internal):
            return  # a Volcano PodGroup of this name (refused in the input; kept as it is)
        internal = upsert_stand_in(self.store, internal, xpg.internal_podgroup(group))
        pods = [p for p in (self.store.get("Pod", k) for k in sorted(self.members.get(key, ()))) if p is not None]
        for pod in pods:
            if xpg.group_of(pod) is not None:  # labelled, not yet in a group
                pod.metadata.annotations[GROUP_NAME_ANNOTATION] = group.name
                self.store.update(pod)
        now = self.clock()
        counts = _counts(pods)
        status = xpg.status_of(group, counts, now, internal.status.phase, xpg.owners_of(pods))
        if status != xpg.current_status(group):
            group.status = xpg.CoschedulingPodGroupStatus.model_validate(status)
            self.store.update(group)
        self._check_timeout(key, group, internal, counts)

    def _check_timeout(self, key: str, group: xpg.CoschedulingPodGroup, internal: PodGroup, counts: xpg.Counts) -> None:
        start = group.status.schedule_start_time
        waiting = xpg.waiting(group.spec.min_member, counts, group.status.phase)
        if not waiting or not isinstance(start, (int, float)):
            self.timed_out.discard(key)
            return
        deadline = float(start) + xpg.timeout_of(group)
        now = self.clock()
        if now < deadline:
            if self._timer_at.get(key) != deadline and math.isfinite(deadline):
                self._timer_at[key] = deadline
                self.schedule(deadline, key)
            return
        if key in self.timed_out:
            return
        self.timed_out.add(key)
        why = next(
            (
                c.message or c.reason
                for c in internal.status.conditions
                if c.type == "Unschedulable" and c.status == "True"
            ),
            None,
        )
        if self.on_event is not None:
            self.on_event(xpg.STORE_KIND, key, "Warning", xpg.TIMEOUT_REASON, xpg.timeout_message(group, why))


def upsert_stand_in(store: Any, internal: PodGroup | None, want: PodGroup) -> PodGroup:
    """The internal PodGroup standing in for another API's gang: created as ``want``, or its
    spec brought to ``want``'s (the other stand-in controllers use it too)."""
    if internal is None:
        created: PodGroup = store.create(want)
        return created
    if internal.spec != want.spec:
        internal.spec = want.spec
        store.update(internal)
    return internal


def _counts(pods: list[Any]) -> xpg.Counts:
    placed = running = succeeded = failed = 0
    for p in pods:
        phase = p.status.phase
        if phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
        elif p.spec.node_name:
            placed += 1
            running += phase == "Running"
    return xpg.Counts(len(pods), placed, running, succeeded, failed)
