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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..api import x_k8s_podgroup as xpg
from ..api.core import PodPhase
from ..api.volcano import GROUP_NAME_ANNOTATION, PodGroup
from ..controllers.base import Clock
from ..store.base import DELETED
from .stand_in import StandInGangs, upsert_stand_in

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..api.validation import Problem
    from ..store.base import Store
    from .gang_source import EventSink


class CoschedulingPodGroups(StandInGangs):
    """The gang source of scheduler-plugins PodGroups (see gang_source): its own controller."""

    api = "scheduling.x-k8s.io"

    def __init__(self, store: Store, clock: Clock, on_event: EventSink | None = None) -> None:
        super().__init__(store, clock, on_event)
        self.members: dict[str, set[str]] = {}  # group key -> keys of its labelled pods
        self.timed_out: set[str] = set()  # groups whose timeout was reported (until they are placed)
        self._timer_at: dict[str, float] = {}
        store.watch(xpg.STORE_KIND, lambda ev, obj, old: self.mark(obj.key))
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", lambda ev, pg, old: self.mark(pg.key) if xpg.is_stand_in(pg) else None)

    # ------------------------------------------------------------------ as a gang source
    @staticmethod
    def input_check(items: Sequence[Any]) -> CoschedulingChecks:
        return CoschedulingChecks(items)

    def is_stand_in(self, pg: PodGroup) -> bool:
        return xpg.is_stand_in(pg)

    def describe(self, entry: dict[str, Any], key: str) -> None:
        """The group's own status, next to its stand-in's."""
        group = self.store.get(xpg.STORE_KIND, key)
        if group is not None:
            entry["coscheduling"] = {
                "apiVersion": group.api_version,
                "status": group.status.model_dump(by_alias=True, exclude_none=True, mode="json"),
            }

    # ------------------------------------------------------------------ the stand-ins
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
            self.on_event("PodGroup", key, "Warning", xpg.TIMEOUT_REASON, xpg.timeout_message(group, why))


class CoschedulingChecks:
    """The input's scheduler-plugins PodGroups checked, and the pods labelled with one."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.groups = {it.obj.key for it in items if isinstance(it.obj, xpg.CoschedulingPodGroup)}
        self.volcano_podgroups = {it.obj.key for it in items if isinstance(it.obj, PodGroup)}

    def problems(self, obj: Any, queues: Mapping[str, Any]) -> list[Problem] | None:
        if not isinstance(obj, xpg.CoschedulingPodGroup):
            return None
        return xpg.validate(obj, queues, self.volcano_podgroups)

    def pod_problems(self, pod: Any) -> list[Problem]:
        return xpg.member_problems(pod, self.groups)

    def template_problems(self, owner: Any, template: Any) -> list[Problem]:
        return []  # (a pod template's label is not checked)


# The pod phases as plain strs (see scheduler.model.NOT_ADMITTED): _counts visits every pod.
_SUCCEEDED, _FAILED, _RUNNING = PodPhase.SUCCEEDED.value, PodPhase.FAILED.value, PodPhase.RUNNING.value


def _counts(pods: list[Any]) -> xpg.Counts:
    placed = running = succeeded = failed = 0
    for p in pods:
        phase = p.status.phase
        if phase == _SUCCEEDED:
            succeeded += 1
        elif phase == _FAILED:
            failed += 1
        elif p.spec.node_name:
            placed += 1
            running += phase == _RUNNING
    return xpg.Counts(len(pods), placed, running, succeeded, failed)
