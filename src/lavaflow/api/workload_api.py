"""The Kubernetes Workload API (KEP-4671, gang scheduling): lavaflow's third gang API, besides
Volcano's PodGroup and scheduler-plugins' (api/x_k8s_podgroup.py).

Two versions exist, and they differ in where a gang is described and how a pod names it
(read from kubernetes/api, branches release-1.35 and release-1.36; see docs/kubernetes.md):

* Kubernetes 1.35, ``scheduling.k8s.io/v1alpha1``: a ``Workload`` lists ``spec.podGroups[]``
  (``name``, ``policy`` = ``basic: {}`` or ``gang: {minCount: N}``; at most 8) and an optional
  ``spec.controllerRef``; it has no status. A pod names its group with ``spec.workloadRef``
  (``name`` of the Workload, ``podGroup``, optional ``podGroupReplicaKey``): the pods of one
  podGroup with one replica key form one gang, each distinct key its own.
* Kubernetes 1.36, ``scheduling.k8s.io/v1alpha2``: a ``Workload`` holds only templates
  (``spec.podGroupTemplates[]``, ``schedulingPolicy``); the runtime unit is a ``PodGroup`` object
  (``spec.schedulingPolicy``, optional ``spec.podGroupTemplateRef.workload``, and a status with
  ``conditions`` — ``PodGroupScheduled``); a pod names it with ``spec.schedulingGroup.podGroupName``
  (``workloadRef`` is gone from the pod).

lavaflow schedules every such group through its own core, unchanged: each gang stands for an
internal (Volcano-form) PodGroup — minMember = minCount for ``gang``, 1 for ``basic`` (its pods are
then placed one by one, as any pod) — whose name says where it came from and cannot collide with a
PodGroup of the other APIs (``:`` is in no Kubernetes name):

* v1alpha1: ``workload:<workload>:<podGroup>`` or ``workload:<workload>:<podGroup>:<replicaKey>``;
* v1alpha2: ``podgroup:<PodGroup name>``.

This module holds the object models and the pure mappings both backends use; the simulator keeps the
internal PodGroups in its store (sim/workload_api.py), the Kubernetes scheduler only in its cache
(kube/workload_api.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from . import validation as api
from .gang_source import GANG_API_ANNOTATION  # (its value on a stand-in: the apiVersion)
from .meta import K8sModel, TypedObject
from .volcano import GROUP_NAME_ANNOTATION, PodGroup
from .x_k8s_podgroup import check_queue, queue_of

API_V1ALPHA1 = "scheduling.k8s.io/v1alpha1"
API_V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
# store kinds (the wire kinds are Workload, Workload and PodGroup)
WORKLOAD_KIND = "Workload"  # v1alpha1
WORKLOAD_V2_KIND = "WorkloadV1alpha2"
PODGROUP_KIND = "SchedulingPodGroup"  # v1alpha2 PodGroup
MAX_POD_GROUPS = 8  # WorkloadMaxPodGroups / WorkloadMaxPodGroupTemplates

# On the internal PodGroup that stands for a gang of this API (besides GANG_API_ANNOTATION).
WORKLOAD_ANNOTATION = "lavaflow.io/workload"
POD_GROUP_ANNOTATION = "lavaflow.io/workload-pod-group"
REPLICA_KEY_ANNOTATION = "lavaflow.io/workload-replica-key"
POLICY_ANNOTATION = "lavaflow.io/workload-policy"

SCHEDULED_CONDITION = "PodGroupScheduled"  # v1alpha2 PodGroup status condition
UNSCHEDULABLE_REASON = "Unschedulable"
SCHEDULED_REASON = "Scheduled"


# ------------------------------------------------------------------ object models
class GangSchedulingPolicy(K8sModel):
    min_count: int | None = None


class PodGroupPolicy(K8sModel):
    """v1alpha1 ``PodGroupPolicy`` / v1alpha2 ``PodGroupSchedulingPolicy``: exactly one of the two."""

    basic: dict[str, Any] | None = None
    gang: GangSchedulingPolicy | None = None


class TypedLocalObjectReference(K8sModel):
    api_group: str | None = None
    kind: str = ""
    name: str = ""


class WorkloadPodGroup(K8sModel):
    name: str = ""
    policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)


class WorkloadSpec(K8sModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroup] = Field(default_factory=list)


class Workload(TypedObject):
    """``scheduling.k8s.io/v1alpha1`` Workload (Kubernetes 1.35). No status in this version."""

    api_version: str = API_V1ALPHA1
    kind: str = "Workload"
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


class PodGroupTemplate(K8sModel):
    name: str = ""
    scheduling_policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)


class WorkloadSpecV1alpha2(K8sModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: list[PodGroupTemplate] = Field(default_factory=list)


class WorkloadV1alpha2(TypedObject):
    """``scheduling.k8s.io/v1alpha2`` Workload (Kubernetes 1.36): templates only; the scheduler
    reads the PodGroups made from them."""

    api_version: str = API_V1ALPHA2
    kind: str = "Workload"
    spec: WorkloadSpecV1alpha2 = Field(default_factory=WorkloadSpecV1alpha2)


class WorkloadTemplateReference(K8sModel):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(K8sModel):
    workload: WorkloadTemplateReference | None = None


class SchedulingPodGroupSpec(K8sModel):
    pod_group_template_ref: PodGroupTemplateReference | None = None
    scheduling_policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)
    priority_class_name: str | None = None


class Condition(K8sModel):
    """metav1.Condition."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Any = None
    observed_generation: int | None = None


class SchedulingPodGroupStatus(K8sModel):
    conditions: list[Condition] = Field(default_factory=list)


class SchedulingPodGroup(TypedObject):
    """``scheduling.k8s.io/v1alpha2`` PodGroup (Kubernetes 1.36): one runtime gang."""

    api_version: str = API_V1ALPHA2
    kind: str = "PodGroup"
    spec: SchedulingPodGroupSpec = Field(default_factory=SchedulingPodGroupSpec)
    status: SchedulingPodGroupStatus = Field(default_factory=SchedulingPodGroupStatus)


# ------------------------------------------------------------------ which gang a pod is in
@dataclass(frozen=True)
class GangRef:
    """One gang instance as a pod names it: (v1alpha1) a Workload's podGroup and replica key, or
    (v1alpha2) a PodGroup object."""

    api_version: str
    namespace: str
    pod_group: str  # v1alpha1: the podGroup's name in the Workload; v1alpha2: the PodGroup's name
    workload: str = ""  # v1alpha1 only
    replica_key: str = ""  # v1alpha1 only

    @property
    def internal_name(self) -> str:
        if self.api_version == API_V1ALPHA2:
            return f"podgroup:{self.pod_group}"
        name = f"workload:{self.workload}:{self.pod_group}"
        return f"{name}:{self.replica_key}" if self.replica_key else name

    @property
    def key(self) -> str:
        """``namespace/name`` of the internal PodGroup (the core's job key)."""
        return f"{self.namespace}/{self.internal_name}"

    @property
    def source(self) -> tuple[str, str]:
        """(store kind, key) of the API object that holds the gang's policy."""
        if self.api_version == API_V1ALPHA2:
            return PODGROUP_KIND, f"{self.namespace}/{self.pod_group}"
        return WORKLOAD_KIND, f"{self.namespace}/{self.workload}"

    def describe(self) -> str:
        if self.api_version == API_V1ALPHA2:
            return f"PodGroup {self.namespace}/{self.pod_group}"
        out = f"podGroup {self.pod_group!r} of Workload {self.namespace}/{self.workload}"
        return f"{out} (replica key {self.replica_key!r})" if self.replica_key else out


def ref_of(pod: Any) -> GangRef | None:
    """The gang a pod names through its spec (workloadRef or schedulingGroup), if any."""
    spec = pod.spec
    wr = spec.workload_ref
    if wr is not None and wr.name and wr.pod_group:
        return GangRef(API_V1ALPHA1, pod.namespace, wr.pod_group, wr.name, wr.pod_group_replica_key or "")
    sg = spec.scheduling_group
    if sg is not None and sg.pod_group_name:
        return GangRef(API_V1ALPHA2, pod.namespace, sg.pod_group_name)
    return None


def gang_of(pod: Any) -> GangRef | None:
    """The gang a pod belongs to: the one its spec names, unless a Volcano group annotation names
    another group (it names the group explicitly, and takes precedence, as for scheduler-plugins'
    label)."""
    ref = ref_of(pod)
    if ref is None:
        return None
    group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
    if group is not None and group != ref.internal_name:
        return None
    return ref


def refers_to_workload_api(pod: Any) -> bool:
    """True when the pod's spec names a group of this API (lavaflow's PodGroup controller makes
    no PodGroup for it: the scheduler maps it)."""
    spec = pod.spec
    return spec.workload_ref is not None or spec.scheduling_group is not None


def policy_in(source: Any, ref: GangRef) -> PodGroupPolicy | None:
    """The policy of the gang ``ref`` in its API object (None: the Workload has no such podGroup)."""
    if isinstance(source, SchedulingPodGroup):
        return source.spec.scheduling_policy
    for g in source.spec.pod_groups:
        if g.name == ref.pod_group:
            policy: PodGroupPolicy | None = g.policy
            return policy
    return None


def min_member_of(policy: PodGroupPolicy) -> int:
    """gang: minCount; basic: 1 (each pod on its own)."""
    if policy.gang is not None:
        return max(policy.gang.min_count or 0, 1)
    return 1


def is_gang(policy: PodGroupPolicy) -> bool:
    return policy.gang is not None


def internal_podgroup(
    ref: GangRef, source: Any, policy: PodGroupPolicy, status: Mapping[str, Any] | None = None
) -> PodGroup:
    """The internal PodGroup the scheduler core works on for one gang instance."""
    annotations = {
        GANG_API_ANNOTATION: ref.api_version,
        POLICY_ANNOTATION: "gang" if is_gang(policy) else "basic",
        POD_GROUP_ANNOTATION: ref.pod_group,
    }
    if ref.workload:
        annotations[WORKLOAD_ANNOTATION] = ref.workload
    if ref.replica_key:
        annotations[REPLICA_KEY_ANNOTATION] = ref.replica_key
    spec: dict[str, Any] = {"minMember": min_member_of(policy), "queue": queue_of(source)}
    if isinstance(source, SchedulingPodGroup) and source.spec.priority_class_name:
        spec["priorityClassName"] = source.spec.priority_class_name
    doc: dict[str, Any] = {
        "metadata": {
            "name": ref.internal_name,
            "namespace": ref.namespace,
            "uid": f"{source.metadata.uid or ''}:{ref.internal_name}",
            "creationTimestamp": source.metadata.creation_timestamp,
            "annotations": annotations,
        },
        "spec": spec,
    }
    if status is not None:
        doc["status"] = dict(status)
    return PodGroup.model_validate(doc)


def is_stand_in(pg: Any) -> bool:
    """True for an internal PodGroup that stands for a gang of this API."""
    return pg.metadata.annotations.get(GANG_API_ANNOTATION) in (API_V1ALPHA1, API_V1ALPHA2)


def ref_of_stand_in(pg: Any) -> GangRef:
    a = pg.metadata.annotations
    return GangRef(
        a[GANG_API_ANNOTATION],
        pg.namespace,
        a.get(POD_GROUP_ANNOTATION, ""),
        a.get(WORKLOAD_ANNOTATION, ""),
        a.get(REPLICA_KEY_ANNOTATION, ""),
    )


# ------------------------------------------------------------------ status (v1alpha2 PodGroup only)
def scheduled_condition(scheduled: bool, message: str, now: Any, old: SchedulingPodGroup) -> dict[str, Any]:
    """The ``PodGroupScheduled`` condition: True once the gang's minCount pods are placed, else
    False with reason ``Unschedulable`` and the gang's reason. lastTransitionTime is kept while the
    status does not change."""
    status = "True" if scheduled else "False"
    reason = SCHEDULED_REASON if scheduled else UNSCHEDULABLE_REASON
    have = next((c for c in old.status.conditions if c.type == SCHEDULED_CONDITION), None)
    when = have.last_transition_time if have is not None and have.status == status else now
    return {
        "type": SCHEDULED_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
    }


def status_with(old: SchedulingPodGroup, condition: dict[str, Any] | None) -> dict[str, Any]:
    """The PodGroup's status (JSON form) with ``condition`` in place of its PodGroupScheduled one;
    other conditions (DisruptionTarget, ...) and fields are kept."""
    cur = current_status(old)
    conds = [c for c in cur.get("conditions", []) if c.get("type") != SCHEDULED_CONDITION]
    if condition is not None:
        conds.append(condition)
    out = dict(cur)
    if conds:
        out["conditions"] = conds
    else:
        out.pop("conditions", None)
    return out


def current_status(pg: SchedulingPodGroup) -> dict[str, Any]:
    return pg.status.model_dump(by_alias=True, exclude_none=True, mode="json")


def current_scheduled_condition(pg: SchedulingPodGroup) -> dict[str, Any] | None:
    """The PodGroup's ``PodGroupScheduled`` condition in the form :func:`scheduled_condition`
    gives (None if it has none)."""
    return next((c for c in current_status(pg).get("conditions", []) if c.get("type") == SCHEDULED_CONDITION), None)


def unschedulable_message(ref: GangRef, why: str) -> str:
    return f"{ref.describe()}: {why}"


# ------------------------------------------------------------------ validation
def _check_policy(policy: PodGroupPolicy, path: str, out: list[api.Problem]) -> None:
    """Exactly one of basic and gang; gang.minCount a positive int32 (kube-apiserver's rules)."""
    if policy.basic is None and policy.gang is None:
        out.append(
            api.Problem(path, "exactly one of `basic`, `gang` is required; set `basic: {}` or `gang: {minCount: N}`.")
        )
        return
    if policy.basic is not None and policy.gang is not None:
        out.append(api.Problem(path, "exactly one of `basic`, `gang` is required, but both are set."))
        return
    if policy.gang is not None:
        n = policy.gang.min_count
        if n is None:
            out.append(api.Problem(f"{path}.gang.minCount", "minCount is required for a gang policy."))
        elif n < 1:
            out.append(api.Problem(f"{path}.gang.minCount", f"minCount is {n}; it must be greater than 0."))
        else:
            api.check_int32(n, f"{path}.gang.minCount", out, "minCount")


def _check_controller_ref(ref: TypedLocalObjectReference | None, out: list[api.Problem]) -> None:
    if ref is None:
        return
    for fld in ("kind", "name"):
        if not getattr(ref, fld):
            out.append(api.Problem(f"spec.controllerRef.{fld}", f"{fld} is required in controllerRef."))


def _check_groups(names: list[str], policies: list[PodGroupPolicy], field: str, policy_field: str) -> list[api.Problem]:
    out: list[api.Problem] = []
    if not names:
        out.append(api.Problem(f"spec.{field}", f"{field} must have at least one item."))
    elif len(names) > MAX_POD_GROUPS:
        out.append(
            api.Problem(f"spec.{field}", f"{field} has {len(names)} items; at most {MAX_POD_GROUPS} are allowed.")
        )
    seen: dict[str, int] = {}
    for i, (name, policy) in enumerate(zip(names, policies, strict=True)):
        path = f"spec.{field}[{i}]"
        why = api.label_error(name)
        if why:
            out.append(api.Problem(f"{path}.name", f"name {name!r} is not a valid DNS-1123 label: {why}."))
        elif name in seen:
            out.append(
                api.Problem(
                    f"{path}.name", f"duplicate name {name!r} (also spec.{field}[{seen[name]}]); names must be unique."
                )
            )
        else:
            seen[name] = i
        _check_policy(policy, f"{path}.{policy_field}", out)
    return out


def validate_workload(wl: Workload, queues: Mapping[str, Any] | None = None) -> list[api.Problem]:
    """kube-apiserver's checks of a v1alpha1 Workload (1 to 8 podGroups, unique DNS-label names,
    exactly one policy, minCount > 0, controllerRef kind and name) and the queue it names."""
    out: list[api.Problem] = []
    api.check_meta(wl, out)
    groups = wl.spec.pod_groups
    out += _check_groups([g.name for g in groups], [g.policy for g in groups], "podGroups", "policy")
    _check_controller_ref(wl.spec.controller_ref, out)
    check_queue(wl, queues, out)
    return out


def validate_workload_v1alpha2(wl: WorkloadV1alpha2) -> list[api.Problem]:
    out: list[api.Problem] = []
    api.check_meta(wl, out)
    tpl = wl.spec.pod_group_templates
    out += _check_groups(
        [t.name for t in tpl], [t.scheduling_policy for t in tpl], "podGroupTemplates", "schedulingPolicy"
    )
    _check_controller_ref(wl.spec.controller_ref, out)
    return out


def validate_podgroup(
    pg: SchedulingPodGroup,
    queues: Mapping[str, Any] | None = None,
    workloads: Mapping[str, WorkloadV1alpha2] | None = None,
) -> list[api.Problem]:
    """A v1alpha2 PodGroup: its policy; a podGroupTemplateRef names both parts, and (when the
    input's v1alpha2 Workloads are given) a template that exists; the queue it names."""
    out: list[api.Problem] = []
    api.check_meta(pg, out)
    _check_policy(pg.spec.scheduling_policy, "spec.schedulingPolicy", out)
    ref = pg.spec.pod_group_template_ref
    if ref is not None:
        w = ref.workload
        if w is None:
            out.append(api.Problem("spec.podGroupTemplateRef.workload", "workload is required in podGroupTemplateRef."))
        else:
            for fld, value in (("workloadName", w.workload_name), ("podGroupTemplateName", w.pod_group_template_name)):
                if not value:
                    out.append(api.Problem(f"spec.podGroupTemplateRef.workload.{fld}", f"{fld} is required."))
            if workloads is not None and w.workload_name and w.pod_group_template_name:
                wl = workloads.get(f"{pg.namespace}/{w.workload_name}")
                if wl is None:
                    out.append(
                        api.Problem(
                            "spec.podGroupTemplateRef.workload.workloadName",
                            f"no scheduling.k8s.io/v1alpha2 Workload {w.workload_name!r} in namespace {pg.namespace} in the input.",
                        )
                    )
                elif w.pod_group_template_name not in {t.name for t in wl.spec.pod_group_templates}:
                    out.append(
                        api.Problem(
                            "spec.podGroupTemplateRef.workload.podGroupTemplateName",
                            f"Workload {wl.key} has no podGroupTemplate {w.pod_group_template_name!r}.",
                        )
                    )
    check_queue(pg, queues, out)
    return out


def member_problems(
    spec: Any,
    namespace: str,
    workloads: Mapping[str, Workload],
    podgroups: set[str] | frozenset[str],
    base: str = "spec",
) -> list[api.Problem]:
    """A pod (template) spec whose workloadRef or schedulingGroup names a group the input lacks
    would wait for ever (the simulator's input is the whole world): said, naming the field.
    ``workloads``: the v1alpha1 Workloads by key; ``podgroups``: keys of the v1alpha2 PodGroups."""
    out: list[api.Problem] = []
    wr, sg = spec.workload_ref, spec.scheduling_group
    if wr is not None and sg is not None:
        out.append(
            api.Problem(
                f"{base}.schedulingGroup",
                "set either workloadRef (Kubernetes 1.35, scheduling.k8s.io/v1alpha1) or schedulingGroup "
                "(1.36, scheduling.k8s.io/v1alpha2), not both.",
            )
        )
        return out
    if wr is not None:
        path = f"{base}.workloadRef"
        for fld, value, check in (
            ("name", wr.name, api.subdomain_error),
            ("podGroup", wr.pod_group, api.label_error),
        ):
            why = check(value)
            if why:
                out.append(api.Problem(f"{path}.{fld}", f"{fld} {value!r} is not valid: {why}."))
        if wr.pod_group_replica_key:
            why = api.label_error(wr.pod_group_replica_key)
            if why:
                out.append(
                    api.Problem(
                        f"{path}.podGroupReplicaKey",
                        f"podGroupReplicaKey {wr.pod_group_replica_key!r} is not a valid DNS-1123 label: {why}.",
                    )
                )
        if out:
            return out
        wl = workloads.get(f"{namespace}/{wr.name}")
        if wl is None:
            out.append(
                api.Problem(
                    f"{path}.name",
                    f"no scheduling.k8s.io/v1alpha1 Workload {wr.name!r} in namespace {namespace} in the input "
                    "(the pod would wait for it for ever)",
                )
            )
        elif wr.pod_group not in {g.name for g in wl.spec.pod_groups}:
            have = ", ".join(repr(g.name) for g in wl.spec.pod_groups) or "none"
            out.append(
                api.Problem(
                    f"{path}.podGroup",
                    f"Workload {wl.key} has no podGroup {wr.pod_group!r} (it has {have}); the pod would wait for ever",
                )
            )
    elif sg is not None:
        path = f"{base}.schedulingGroup.podGroupName"
        name = sg.pod_group_name or ""
        why = api.subdomain_error(name)
        if why:
            out.append(api.Problem(path, f"podGroupName {name!r} is not valid: {why}."))
        elif f"{namespace}/{name}" not in podgroups:
            out.append(
                api.Problem(
                    path,
                    f"no scheduling.k8s.io/v1alpha2 PodGroup {name!r} in namespace {namespace} in the input "
                    "(the pod would wait for it for ever)",
                )
            )
    return out
