"""The scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``): the gang API of the
coscheduling plugin, used by Kubeflow's trainer and JobSet when they gang-schedule with it.

lavaflow schedules such a group through its own core, unchanged: each one stands for an internal
(Volcano-form) PodGroup of the same namespace and name — minMember, minResources, a queue — and
its pods, labelled ``scheduling.x-k8s.io/pod-group: <name>``, are that group's tasks. The status is
written back in this API's own form (phase, running/succeeded/failed, scheduleStartTime,
occupiedBy). This module holds the object model and the pure mappings both backends use; the
simulator keeps the internal PodGroup in its store (``sim/x_k8s_podgroup.py``), the Kubernetes
scheduler only in its cache (``kube/x_k8s_podgroup.py``). See docs/kubernetes.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import Field

from . import validation as api
from .gang_source import GANG_API_ANNOTATION  # (its value on a stand-in: API_VERSION)
from .meta import K8sModel, ResourceList, TypedObject
from .volcano import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, PodGroup, PodGroupPhase

API_VERSION = "scheduling.x-k8s.io/v1alpha1"
STORE_KIND = "CoschedulingPodGroup"  # the store's name for this kind (the wire kind is PodGroup)
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# coscheduling's default wait (its permitWaitingTimeSeconds); Kubeflow's trainer defaults to it too.
DEFAULT_TIMEOUT_SECONDS = 60
TIMEOUT_REASON = "ScheduleTimeout"


class CoschedulingPhase(StrEnum):
    """The phases of the upstream CRD (apis/scheduling/v1alpha1 since scheduler-plugins v0.26.7,
    which dropped PreScheduling, Scheduled and status.scheduled; the old two are still read, from a
    group an older controller or lavaflow wrote, never written)."""

    PENDING = "Pending"
    SCHEDULING = "Scheduling"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


PHASES = tuple(p.value for p in CoschedulingPhase)
_NOT_ADMITTED = (CoschedulingPhase.PENDING, "PreScheduling", CoschedulingPhase.SCHEDULING)


class CoschedulingPodGroupSpec(K8sModel):
    min_member: int = 0
    min_resources: ResourceList | None = None
    schedule_timeout_seconds: int | None = None


class CoschedulingPodGroupStatus(K8sModel):
    phase: str | None = None
    occupied_by: str | None = None
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    # Simulated seconds in the simulator; RFC 3339 strings on a cluster.
    schedule_start_time: Any = None


class CoschedulingPodGroup(TypedObject):
    api_version: str = API_VERSION
    kind: str = "PodGroup"
    spec: CoschedulingPodGroupSpec = Field(default_factory=CoschedulingPodGroupSpec)
    status: CoschedulingPodGroupStatus = Field(default_factory=CoschedulingPodGroupStatus)


# ------------------------------------------------------------------ membership and mapping
def group_of(pod: Any) -> str | None:
    """The scheduler-plugins group a pod belongs to: its label, unless a Volcano group annotation
    (which takes precedence, as it names the group explicitly) is there too."""
    meta = pod.metadata
    name = meta.labels.get(POD_GROUP_LABEL)
    if not name or GROUP_NAME_ANNOTATION in meta.annotations:
        return None
    return str(name)


def queue_of(pg: Any) -> str:
    """The API has no queue: ``scheduling.volcano.sh/queue-name`` on the PodGroup (annotation or
    label) picks one, else the ``default`` queue (the Workload API's gangs use the same rule)."""
    meta = pg.metadata
    return meta.annotations.get(QUEUE_NAME_ANNOTATION) or meta.labels.get(QUEUE_NAME_ANNOTATION) or "default"


def check_queue(obj: Any, queues: Mapping[str, Any] | None, out: list[api.Problem]) -> None:
    """The queue :func:`queue_of` picks must exist (when the queues are known)."""
    if queues is None:
        return
    name = queue_of(obj)
    if name not in queues:
        out.append(
            api.Problem(
                f"metadata.annotations[{QUEUE_NAME_ANNOTATION}]",
                f"Queue {name!r} does not exist; existing queues are: {', '.join(sorted(queues)) or 'none'}.",
            )
        )


def timeout_of(pg: CoschedulingPodGroup) -> int:
    """scheduleTimeoutSeconds; unset or 0 means coscheduling's default, 60 s."""
    t = pg.spec.schedule_timeout_seconds
    return t if t else DEFAULT_TIMEOUT_SECONDS


def internal_podgroup(pg: CoschedulingPodGroup, status: Mapping[str, Any] | None = None) -> PodGroup:
    """The internal PodGroup the scheduler core works on: minMember -> minMember (the gang's
    minAvailable), minResources -> minResources (the enqueue gate), queue per :func:`queue_of`."""
    meta = pg.metadata
    doc: dict[str, Any] = {
        "metadata": {
            "name": meta.name,
            "namespace": pg.namespace,
            "uid": meta.uid,
            "creationTimestamp": meta.creation_timestamp,
            "annotations": {**meta.annotations, GANG_API_ANNOTATION: API_VERSION},
            "labels": dict(meta.labels),
        },
        "spec": {"minMember": pg.spec.min_member, "queue": queue_of(pg)},
    }
    if pg.spec.min_resources:
        doc["spec"]["minResources"] = {k: str(v) for k, v in pg.spec.min_resources.items()}
    if status is not None:
        doc["status"] = dict(status)
    return PodGroup.model_validate(doc)


def is_stand_in(pg: PodGroup) -> bool:
    """True for an internal PodGroup that stands for a scheduler-plugins one."""
    return pg.metadata.annotations.get(GANG_API_ANNOTATION) == API_VERSION


def internal_phase_of(pg: CoschedulingPodGroup) -> PodGroupPhase:
    """The internal phase a (re)started scheduler assumes from the status on the server: a group
    that ran (Running and after) was admitted (Inqueue: allocate completes it, admission does not
    count its bound pods twice); one still Pending or Scheduling needs admission (Pending) unless
    some of its pods are bound, which the scheduler finds from the pods (a gang a leader had
    started to bind: docs/kubernetes.md, failover)."""
    phase = pg.status.phase or CoschedulingPhase.PENDING
    return PodGroupPhase.PENDING if phase in _NOT_ADMITTED else PodGroupPhase.INQUEUE


# ------------------------------------------------------------------ status in this API's form
@dataclass(frozen=True)
class Counts:
    members: int = 0  # pods labelled with the group
    placed: int = 0  # bound to a node and not finished (running included)
    running: int = 0
    succeeded: int = 0
    failed: int = 0


def phase_of(min_member: int, c: Counts, internal_phase: str | None = None) -> CoschedulingPhase:
    """The group's phase, by the rules of scheduler-plugins' PodGroup controller: Pending while
    fewer than minMember pods exist; then Scheduling until minMember run (or ran to success), placed
    or not; Running when they do; Finished when minMember succeeded; Failed when a pod failed and
    the pods that ran make minMember. Unknown (which the CRD defines for a gang part placed that
    cannot be completed) as the core says it: some pods run but the gang is broken."""
    need = max(min_member, 1)
    if c.succeeded >= need:
        return CoschedulingPhase.FINISHED
    if c.members < need:
        return CoschedulingPhase.PENDING
    if c.failed and c.failed + c.running + c.succeeded >= need:
        return CoschedulingPhase.FAILED
    if internal_phase == PodGroupPhase.UNKNOWN:
        return CoschedulingPhase.UNKNOWN
    if c.running + c.succeeded >= need:
        return CoschedulingPhase.RUNNING
    return CoschedulingPhase.SCHEDULING


def status_of(
    pg: CoschedulingPodGroup, c: Counts, now: Any, internal_phase: str | None = None, occupied_by: str | None = None
) -> dict[str, Any]:
    """The status to write (JSON form). scheduleStartTime is when the group first had its
    minMember pods and lavaflow started to try it (``now`` then), kept afterwards; occupiedBy names
    the members' owners (``namespace/name``, sorted, comma-separated), set once."""
    phase = phase_of(pg.spec.min_member, c, internal_phase)
    old = pg.status
    start = old.schedule_start_time
    if start is None and phase != CoschedulingPhase.PENDING:
        start = now
    out: dict[str, Any] = {"phase": phase, "running": c.running, "succeeded": c.succeeded, "failed": c.failed}
    if start is not None:
        out["scheduleStartTime"] = start
    occupied = old.occupied_by or occupied_by
    if occupied:
        out["occupiedBy"] = occupied
    return out


def current_status(pg: CoschedulingPodGroup) -> dict[str, Any]:
    return pg.status.model_dump(by_alias=True, exclude_none=True, mode="json")


def owners_of(pods: list[Any]) -> str | None:
    refs = sorted({f"{p.namespace}/{r.name}" for p in pods for r in p.metadata.owner_references})
    return ",".join(refs) or None


def waiting(min_member: int, c: Counts, phase: str | None) -> bool:
    """Whether the gang waits to be placed (its timeout runs): Scheduling, with fewer than
    minMember of its pods placed (placed ones waiting for their kubelets do not wait on lavaflow)."""
    return phase == CoschedulingPhase.SCHEDULING and c.placed + c.succeeded < max(min_member, 1)


def timeout_message(pg: CoschedulingPodGroup, why: str | None) -> str:
    msg = f"PodGroup {pg.namespace}/{pg.name} not scheduled within scheduleTimeoutSeconds ({timeout_of(pg)}s)"
    return f"{msg}: {why}" if why else msg


# ------------------------------------------------------------------ validation
def member_problems(pod: Any, groups: set[str]) -> list[api.Problem]:
    """A pod labelled with a group that is not in the input (``groups``: their keys) would wait for
    ever (the simulator's input is the whole world): said, naming the label."""
    name = group_of(pod)
    if name is None or f"{pod.namespace}/{name}" in groups:
        return []
    return [
        api.Problem(
            f"metadata.labels[{POD_GROUP_LABEL}]",
            f"no scheduling.x-k8s.io PodGroup {name!r} in namespace {pod.namespace} in the input (the pod would wait for it for ever)",
        )
    ]


def validate(
    pg: CoschedulingPodGroup,
    queues: Mapping[str, Any] | None = None,
    volcano_podgroups: set[str] | frozenset[str] = frozenset(),
) -> list[api.Problem]:
    """What the CRD's schema refuses (negative or non-int32 numbers, bad quantities), a queue
    named on the PodGroup that does not exist, and a Volcano PodGroup of the same namespace and name
    (``volcano_podgroups``: their keys): both would be the same gang."""
    out: list[api.Problem] = []
    api.check_meta(pg, out)
    if pg.key in volcano_podgroups:
        out.append(
            api.Problem(
                "metadata.name",
                f"a scheduling.volcano.sh PodGroup {pg.key} is in the input too; a gang is named once per "
                "namespace, so rename one of them.",
            )
        )
    if pg.spec.min_member < 0:
        out.append(api.Problem("spec.minMember", f"minMember is {pg.spec.min_member}; it must not be negative."))
    else:
        api.check_int32(pg.spec.min_member, "spec.minMember", out, "minMember")
    t = pg.spec.schedule_timeout_seconds
    if t is not None:
        if t < 0:
            out.append(
                api.Problem("spec.scheduleTimeoutSeconds", f"scheduleTimeoutSeconds is {t}; it must not be negative.")
            )
        else:
            api.check_int32(t, "spec.scheduleTimeoutSeconds", out, "scheduleTimeoutSeconds")
    if pg.spec.min_resources:
        api.check_resources(pg.spec.min_resources, "spec.minResources", out, "minResources")
    check_queue(pg, queues, out)
    return out
