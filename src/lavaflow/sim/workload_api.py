"""The Kubernetes Workload API (KEP-4671) in the simulator.

The simulator's store plays the API server, so the translation is kept there, where every report
sees it: for each gang instance pods name — a v1alpha1 Workload's podGroup and replica key
(``spec.workloadRef``), or a v1alpha2 PodGroup (``spec.schedulingGroup``) — this controller keeps
an internal PodGroup (api/workload_api.py names it) that the scheduler, the queue controller and
the results work on, and puts the pods into it (the ``scheduling.k8s.io/group-name`` annotation).
A v1alpha1 Workload has no status, so nothing is written back to it; a gang the scheduler finds
unschedulable gets a Warning ``Unschedulable`` Event on its Workload (once, until it is placed),
and its pods the core's ``PodScheduled=False`` condition as any pending pod. A v1alpha2 PodGroup
gets its ``PodGroupScheduled`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..api import workload_api as wapi
from ..api.core import PodPhase
from ..api.volcano import GROUP_NAME_ANNOTATION, PodGroup
from ..controllers.base import Clock
from ..store.base import DELETED, Handler
from .stand_in import StandInGangs, upsert_stand_in

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..api.validation import Problem
    from ..store.base import Store
    from .gang_source import EventSink

EVENT_KIND = {wapi.WORKLOAD_KIND: "Workload", wapi.PODGROUP_KIND: "PodGroup"}
_SUCCEEDED, _FAILED = PodPhase.SUCCEEDED.value, PodPhase.FAILED.value  # (plain strs, read for every member pod)


class WorkloadGangs(StandInGangs):
    """The gang source of the Workload API (see gang_source): its own controller."""

    api = "scheduling.k8s.io"

    def __init__(self, store: Store, clock: Clock, on_event: EventSink | None = None) -> None:
        super().__init__(store, clock, on_event)
        self.refs: dict[str, wapi.GangRef] = {}  # gang key -> the gang
        self.members: dict[str, set[str]] = {}  # gang key -> keys of its pods
        self.by_source: dict[tuple[str, str], set[str]] = {}  # (kind, key) of a Workload/PodGroup -> gang keys
        self.reported: set[str] = set()  # gangs whose Unschedulable Event was recorded (until placed)
        self.early: dict[str, str | None] = {}  # gang -> reason seen while fewer than minCount pods existed
        for kind in (wapi.WORKLOAD_KIND, wapi.PODGROUP_KIND):
            store.watch(kind, cast(Handler, lambda ev, obj, old, kind=kind: self._on_source(kind, obj.key)))
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", lambda ev, pg, old: self.mark(pg.key) if wapi.is_stand_in(pg) else None)

    # ------------------------------------------------------------------ as a gang source
    @staticmethod
    def input_check(items: Sequence[Any]) -> WorkloadChecks:
        return WorkloadChecks(items)

    def is_stand_in(self, pg: PodGroup) -> bool:
        return wapi.is_stand_in(pg)

    def describe(self, entry: dict[str, Any], key: str) -> None:
        """A Workload API gang's origin (and a v1alpha2 PodGroup's status)."""
        stand_in = self.store.get("PodGroup", key)
        if stand_in is not None and wapi.is_stand_in(stand_in):  # (owns(key))
            entry["workload"] = workload_of(stand_in)
            src = self.store.get(*wapi.ref_of_stand_in(stand_in).source)
            if isinstance(src, wapi.SchedulingPodGroup):
                entry["workload"]["status"] = wapi.current_status(src)

    # ------------------------------------------------------------------ the stand-ins
    def _on_source(self, kind: str, key: str) -> None:
        for gang in sorted(self.by_source.get((kind, key), ())):
            self.mark(gang)

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        ref = wapi.gang_of(pod)
        if ref is None:
            return
        key = ref.key
        if event == DELETED:
            self.members.get(key, set()).discard(pod.key)
        else:
            self.members.setdefault(key, set()).add(pod.key)
            if key not in self.refs:
                self.refs[key] = ref
                self.by_source.setdefault(ref.source, set()).add(key)
        self.mark(key)

    def sync(self, key: str) -> None:
        ref = self.refs.get(key)
        if ref is None:
            return
        kind, source_key = ref.source
        source = self.store.get(kind, source_key)
        policy = wapi.policy_in(source, ref) if source is not None else None
        internal = self.store.get("PodGroup", key)
        if policy is None:  # the Workload (or its podGroup) or the PodGroup is gone: the pods wait
            if internal is not None and wapi.is_stand_in(internal):
                self.store.delete("PodGroup", key)
            self.reported.discard(key)
            self.early.pop(key, None)
            return
        internal = upsert_stand_in(self.store, internal, wapi.internal_podgroup(ref, source, policy))
        pods = [p for p in (self.store.get("Pod", k) for k in sorted(self.members.get(key, ()))) if p is not None]
        for pod in pods:
            if GROUP_NAME_ANNOTATION not in pod.metadata.annotations:
                pod.metadata.annotations[GROUP_NAME_ANNOTATION] = ref.internal_name
                self.store.update(pod)
        placed = sum(
            1 for p in pods if p.status.phase == _SUCCEEDED or (p.spec.node_name and p.status.phase != _FAILED)
        )
        scheduled = placed >= internal.spec.min_member
        why = next(
            (
                c.message or c.reason
                for c in internal.status.conditions
                if c.type == "Unschedulable" and c.status == "True"
            ),
            None,
        )
        # The Event waits for the gang's minCount pods to exist, and for a reason decided since:
        # until then the reason is pods still to come ("4/1 tasks in gang unschedulable: not
        # enough valid tasks ..."), and the one Event of the wait would go on saying so.
        if scheduled:
            self.reported.discard(key)
            self.early.pop(key, None)
        elif len(pods) < internal.spec.min_member:
            self.early[key] = why
        elif why and key not in self.reported and wapi.is_gang(policy) and why != self.early.get(key):
            self.early.pop(key, None)
            if self.on_event is not None:
                self.reported.add(key)
                self.on_event(
                    EVENT_KIND[kind],
                    source_key,
                    "Warning",
                    wapi.UNSCHEDULABLE_REASON,
                    wapi.unschedulable_message(ref, why),
                )
        if isinstance(source, wapi.SchedulingPodGroup):
            self._write_status(source, scheduled, why, placed, internal.spec.min_member)

    def _write_status(
        self, group: wapi.SchedulingPodGroup, scheduled: bool, why: str | None, placed: int, need: int
    ) -> None:
        """The v1alpha2 PodGroup's PodGroupScheduled condition (no condition before a decision)."""
        if scheduled:
            cond = wapi.scheduled_condition(True, f"{placed} of minimum {need} pods placed", self.clock(), group)
        elif why:
            cond = wapi.scheduled_condition(False, why, self.clock(), group)
        else:
            return
        status = wapi.status_with(group, cond)
        if status != wapi.current_status(group):
            group.status = wapi.SchedulingPodGroupStatus.model_validate(status)
            self.store.update(group)


class WorkloadChecks:
    """The input's Workloads and v1alpha2 PodGroups checked, and the pods (and pod templates)
    naming a gang of theirs."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.workloads = {it.obj.key: it.obj for it in items if isinstance(it.obj, wapi.Workload)}
        self.workloads_v2 = {it.obj.key: it.obj for it in items if isinstance(it.obj, wapi.WorkloadV1alpha2)}
        self.podgroups = {it.obj.key for it in items if isinstance(it.obj, wapi.SchedulingPodGroup)}

    def problems(self, obj: Any, queues: Mapping[str, Any]) -> list[Problem] | None:
        if isinstance(obj, wapi.Workload):
            return wapi.validate_workload(obj, queues)
        if isinstance(obj, wapi.WorkloadV1alpha2):
            return wapi.validate_workload_v1alpha2(obj)
        if isinstance(obj, wapi.SchedulingPodGroup):
            return wapi.validate_podgroup(obj, queues, self.workloads_v2)
        return None

    def pod_problems(self, pod: Any) -> list[Problem]:
        return wapi.member_problems(pod.spec, pod.namespace, self.workloads, self.podgroups)

    def template_problems(self, owner: Any, template: Any) -> list[Problem]:
        return wapi.member_problems(
            template.spec, owner.namespace, self.workloads, self.podgroups, "spec.template.spec"
        )


def workload_of(stand_in: Any) -> dict[str, Any]:
    """What the results say of a stand-in's origin (JSON)."""
    ref = wapi.ref_of_stand_in(stand_in)
    out: dict[str, Any] = {
        "apiVersion": ref.api_version,
        "policy": stand_in.metadata.annotations.get(wapi.POLICY_ANNOTATION),
    }
    if ref.api_version == wapi.API_V1ALPHA1:
        out.update({"workload": ref.workload, "podGroup": ref.pod_group})
        if ref.replica_key:
            out["podGroupReplicaKey"] = ref.replica_key
    else:
        out["podGroup"] = ref.pod_group
    return out
