"""The parts of core/v1 Pod and Node (and friends) that scheduling needs.

Field names follow Kubernetes exactly (camelCase in YAML); see
https://kubernetes.io/docs/reference/kubernetes-api/ for their meaning.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from .meta import K8sModel, ResourceList, TypedObject
from .phases import PodPhase as PodPhase

# --- selectors -------------------------------------------------------------


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(K8sModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class NodeSelectorRequirement(K8sModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(K8sModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(K8sModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(K8sModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(default_factory=list)


class PodAffinityTerm(K8sModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""


class WeightedPodAffinityTerm(K8sModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(default_factory=list)


class Affinity(K8sModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(K8sModel):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None


class Taint(K8sModel):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


# --- pods ------------------------------------------------------------------


def is_extended_resource(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: a domain-prefixed name outside kubernetes.io (e.g.
    ``nvidia.com/gpu``, ``volcano.sh/gpu-number``), not a ``requests.`` quota name."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


class ResourceRequirements(K8sModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)
    claims: list[Any] | None = None  # DRA: read only to warn that it is not implemented

    @model_validator(mode="after")
    def _as_the_api_server_checks(self) -> ResourceRequirements:
        """The API server's rules (ValidateResourceRequirements): extended resources and huge pages
        cannot be overcommitted, so their request equals their limit and a request needs a limit;
        extended resources come in whole units."""
        for field, values in (("requests", self.requests), ("limits", self.limits)):
            for name, q in values.items():
                if is_extended_resource(name) and q != q.to_integral_value():
                    raise ValueError(f"{field}[{name}]: must be a whole number, got {_plain(q)}")
        for name, q in self.requests.items():
            strict = is_extended_resource(name) or name.startswith("hugepages-")
            limit = self.limits.get(name)
            if limit is None:
                if strict:
                    raise ValueError(f"limits[{name}]: must be set for a resource that cannot be overcommitted")
            elif strict and q != limit:
                raise ValueError(f"requests[{name}]: must equal its limit of {_plain(limit)}, got {_plain(q)}")
        return self  # (a request above its limit: validation.check_pod_spec)


def _plain(q: Any) -> str:
    return format(q.normalize(), "f")


class EnvVar(K8sModel):
    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = None


class ContainerPort(K8sModel):
    container_port: int
    name: str | None = None
    protocol: str = "TCP"
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class VolumeMount(K8sModel):
    name: str = ""
    mount_path: str = ""
    read_only: bool | None = None
    sub_path: str | None = None
    sub_path_expr: str | None = None
    mount_propagation: str | None = None
    recursive_read_only: str | None = None


class Container(K8sModel):
    name: str = ""
    image: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    ports: list[ContainerPort] = Field(default_factory=list)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    restart_policy: str | None = None  # "Always" marks a sidecar init container
    # None when the manifest gives none (so that a pod without mounts dumps as before); a job
    # plugin mounts what it keeps for the job (svc's hosts at /etc/volcano, ssh's keys, the mpi
    # plugin's host discovery at /etc/mpi)
    volume_mounts: list[VolumeMount] | None = None


class TopologySpreadConstraint(K8sModel):
    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    label_selector: LabelSelector | None = None
    min_domains: int | None = None


class PersistentVolumeClaimVolumeSource(K8sModel):
    claim_name: str = ""
    read_only: bool | None = None


class KeyToPath(K8sModel):
    key: str
    path: str
    mode: int | None = None


class ConfigMapVolumeSource(K8sModel):
    name: str = ""
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(K8sModel):
    secret_name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class Volume(K8sModel):
    """A pod volume. The sources lavaflow reads or writes are modelled; any other source
    (emptyDir, hostPath, ...) is kept as given, so a pod a job plugin adds a volume to
    is sent with its template's volumes whole."""

    model_config = ConfigDict(**{**K8sModel.model_config, "extra": "allow"})

    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None  # the ssh job plugin's keys


class WorkloadReference(K8sModel):
    """``spec.workloadRef`` (Kubernetes 1.35, feature gate GenericWorkload): the pod's group in a
    ``scheduling.k8s.io/v1alpha1`` Workload. See api/workload_api.py."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str | None = None


class PodSchedulingGroup(K8sModel):
    """``spec.schedulingGroup`` (Kubernetes 1.36, replacing workloadRef): the pod's
    ``scheduling.k8s.io/v1alpha2`` PodGroup. See api/workload_api.py."""

    pod_group_name: str | None = None


class PodSpec(K8sModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    scheduler_name: str | None = None
    node_name: str | None = None
    restart_policy: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    overhead: ResourceList = Field(default_factory=dict)
    resource_claims: list[Any] | None = None  # DRA: read only to warn that it is not implemented
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    volumes: list[Volume] = Field(default_factory=list)
    workload_ref: WorkloadReference | None = None
    scheduling_group: PodSchedulingGroup | None = None


class PodTemplateMeta(K8sModel):
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodTemplateSpec(K8sModel):
    metadata: PodTemplateMeta = Field(default_factory=PodTemplateMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class PodCondition(K8sModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Any = None


class PodStatus(K8sModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] = "Pending"
    conditions: list[PodCondition] = Field(default_factory=list)
    reason: str | None = None
    message: str | None = None
    start_time: Any = None
    exit_code: int | None = None  # lavaflow: first container's exit code, when known


class Pod(TypedObject):
    api_version: str = "v1"
    kind: str = "Pod"
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


# --- nodes -----------------------------------------------------------------


class NodeSpec(K8sModel):
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool = False


class NodeCondition(K8sModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None


class NodeStatus(K8sModel):
    capacity: ResourceList = Field(default_factory=dict)
    allocatable: ResourceList = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)


class Node(TypedObject):
    namespaced = False
    api_version: str = "v1"
    kind: str = "Node"
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    @property
    def allocatable(self) -> ResourceList:
        """Allocatable, falling back to capacity as the kubelet does."""
        return self.status.allocatable or self.status.capacity

    @property
    def ready(self) -> bool:
        for cond in self.status.conditions:
            if cond.type == "Ready":
                return cond.status == "True"
        return True


class Namespace(TypedObject):
    namespaced = False
    api_version: str = "v1"
    kind: str = "Namespace"


class ConfigMap(TypedObject):
    api_version: str = "v1"
    kind: str = "ConfigMap"
    data: dict[str, str] = Field(default_factory=dict)


class ServicePort(K8sModel):
    name: str | None = None
    port: int
    target_port: int | str | None = None
    protocol: str = "TCP"


class ServiceSpec(K8sModel):
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    selector: dict[str, str] = Field(default_factory=dict)
    ports: list[ServicePort] = Field(default_factory=list)
    publish_not_ready_addresses: bool | None = None


class Service(TypedObject):
    api_version: str = "v1"
    kind: str = "Service"
    spec: ServiceSpec = Field(default_factory=ServiceSpec)


class Secret(TypedObject):
    api_version: str = "v1"
    kind: str = "Secret"
    type: str = "Opaque"
    data: dict[str, str] = Field(default_factory=dict)  # base64, as the API stores it
    string_data: dict[str, str] = Field(default_factory=dict)


class ResourceQuotaSpec(K8sModel):
    hard: ResourceList = Field(default_factory=dict)
    scopes: list[str] = Field(default_factory=list)


class ResourceQuotaStatus(K8sModel):
    hard: ResourceList = Field(default_factory=dict)
    used: ResourceList = Field(default_factory=dict)


class ResourceQuota(TypedObject):
    """core/v1 ResourceQuota: the resourcequota scheduler plugin admits a namespace's jobs within ``spec.hard``."""

    api_version: str = "v1"
    kind: str = "ResourceQuota"
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus = Field(default_factory=ResourceQuotaStatus)


class VolumeNodeAffinity(K8sModel):
    required: NodeSelector | None = None


class ObjectReference(K8sModel):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class PersistentVolumeSpec(K8sModel):
    capacity: ResourceList = Field(default_factory=dict)
    node_affinity: VolumeNodeAffinity | None = None
    claim_ref: ObjectReference | None = None
    storage_class_name: str | None = None


class PersistentVolume(TypedObject):
    """core/v1 PersistentVolume: the predicates plugin reads ``spec.nodeAffinity`` of bound volumes."""

    namespaced = False
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


class PersistentVolumeClaimSpec(K8sModel):
    volume_name: str | None = None
    storage_class_name: str | None = None
    access_modes: list[str] = Field(default_factory=list)


class PersistentVolumeClaim(TypedObject):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
