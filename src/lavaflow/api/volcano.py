"""Volcano's API groups: batch.volcano.sh, scheduling.volcano.sh, bus.volcano.sh,
plus scheduling.k8s.io PriorityClass. Field names are Volcano's."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .core import PodTemplateSpec
from .meta import K8sModel, ResourceList, TypedObject
from .phases import (
    JOB_ACTIONS as JOB_ACTIONS,
    JOB_EVENTS as JOB_EVENTS,
    JOB_FINAL_PHASES as JOB_FINAL_PHASES,
    JOB_PHASES as JOB_PHASES,
    PODGROUP_PHASES as PODGROUP_PHASES,
    JobAction as JobAction,
    JobEvent as JobEvent,
    JobFlowPhase as JobFlowPhase,
    JobPhase as JobPhase,
    PodGroupPhase as PodGroupPhase,
)

# Annotation and label keys (Volcano's names).
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.volcano.sh/group-name"
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
GROUP_MIN_RESOURCES_ANNOTATION = "scheduling.volcano.sh/group-min-resources"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_VERSION_KEY = "volcano.sh/job-version"
JOB_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
TEMPLATE_UID_KEY = "volcano.sh/template-uid"
JOB_TYPE_LABEL = "volcano.sh/job-type"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_KEY = "volcano.sh/task-priority"
SLA_WAITING_TIME_KEY = "volcano.sh/sla-waiting-time"
NUMA_POLICY_KEY = "volcano.sh/numa-topology-policy"

BATCH_GROUP = "batch.volcano.sh/v1alpha1"
SCHEDULING_GROUP = "scheduling.volcano.sh/v1beta1"
BUS_GROUP = "bus.volcano.sh/v1alpha1"
FLOW_GROUP = "flow.volcano.sh/v1alpha1"

# --- batch.volcano.sh/v1alpha1 Job ----------------------------------------


JOB_PLUGINS = ("env", "svc", "ssh", "tensorflow", "mpi", "pytorch", "ray", "hcclrank")


class LifecyclePolicy(K8sModel):
    action: str | None = None
    event: str | None = None
    events: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    timeout: str | None = None


class DependsOn(K8sModel):
    name: list[str] = Field(default_factory=list)
    iteration: str = "all"


class PartitionPolicy(K8sModel):
    total_partitions: int = 0
    partition_size: int = 0
    min_partitions: int = 0


class NetworkTopologySpec(K8sModel):
    """Where a gang may be spread in the HyperNode tree (network-topology-aware plugin)."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> NetworkTopologySpec:
        # Volcano's webhooks refuse both bounds at once (which one would win is not defined).
        if self.highest_tier_allowed is not None and self.highest_tier_name:
            raise ValueError("highestTierAllowed and highestTierName cannot both be set: give one")
        return self


class TaskSpec(K8sModel):
    name: str = ""
    replicas: int = 0
    min_available: int | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    topology_policy: str | None = None
    max_retry: int = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class VolumeSpec(K8sModel):
    mount_path: str = ""
    volume_claim_name: str | None = None
    volume_claim: dict[str, Any] | None = None


class JobSpec(K8sModel):
    scheduler_name: str | None = None
    min_available: int = 0
    volumes: list[VolumeSpec] = Field(default_factory=list)
    tasks: list[TaskSpec] = Field(default_factory=list)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    plugins: dict[str, list[str]] = Field(default_factory=dict)
    running_estimate: str | None = None
    queue: str = ""
    max_retry: int = 0
    ttl_seconds_after_finished: int | None = None
    priority_class_name: str | None = None
    min_success: int | None = None
    network_topology: NetworkTopologySpec | None = None


class JobState(K8sModel):
    phase: str = ""
    reason: str | None = None
    message: str | None = None
    last_transition_time: Any = None


class JobStatus(K8sModel):
    state: JobState = Field(default_factory=JobState)
    min_available: int = 0
    task_status_count: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict)
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    version: int = 0
    retry_count: int = 0
    controlled_resources: dict[str, str] = Field(default_factory=dict)


class Job(TypedObject):
    api_version: str = BATCH_GROUP
    kind: str = "Job"
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)


# --- scheduling.volcano.sh/v1beta1 -----------------------------------------


class PodGroupCondition(K8sModel):
    type: str
    status: str = "True"
    transition_id: str | None = Field(default=None, alias="transitionID")  # (Volcano's spelling, not camelCase)
    last_transition_time: Any = None
    reason: str | None = None
    message: str | None = None


class PodGroupSpec(K8sModel):
    min_member: int = 0
    min_task_member: dict[str, int] = Field(default_factory=dict)
    queue: str = ""
    priority_class_name: str | None = None
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None


class PodGroupStatus(K8sModel):
    phase: str = PodGroupPhase.PENDING.value
    conditions: list[PodGroupCondition] = Field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(TypedObject):
    api_version: str = SCHEDULING_GROUP
    kind: str = "PodGroup"
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


class Guarantee(K8sModel):
    resource: ResourceList = Field(default_factory=dict)


class QueueSpec(K8sModel):
    weight: int = 0
    capability: ResourceList = Field(default_factory=dict)
    reclaimable: bool | None = None
    guarantee: Guarantee = Field(default_factory=Guarantee)
    deserved: ResourceList = Field(default_factory=dict)
    parent: str = ""
    priority: int = 0
    type: str | None = None
    dequeue_strategy: str | None = None
    affinity: dict[str, Any] | None = None
    extend_clusters: list[dict[str, Any]] = Field(default_factory=list)


class QueueStatus(K8sModel):
    state: str = ""
    unknown: int = 0
    pending: int = 0
    running: int = 0
    inqueue: int = 0
    completed: int = 0
    allocated: ResourceList = Field(default_factory=dict)


class Queue(TypedObject):
    namespaced = False
    api_version: str = SCHEDULING_GROUP
    kind: str = "Queue"
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)


class PriorityClass(TypedObject):
    namespaced = False
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str | None = None


# --- bus.volcano.sh/v1alpha1 Command ---------------------------------------


class Command(TypedObject):
    api_version: str = BUS_GROUP
    kind: str = "Command"
    action: str = ""
    target: dict[str, Any] | None = None
    reason: str | None = None
    message: str | None = None


# --- flow.volcano.sh/v1alpha1 JobTemplate / JobFlow ------------------------


class JobTemplate(TypedObject):
    """A Job spec to instantiate from a JobFlow."""

    api_version: str = FLOW_GROUP
    kind: str = "JobTemplate"
    spec: JobSpec = Field(default_factory=JobSpec)


class FlowDependsOn(K8sModel):
    targets: list[str] = Field(default_factory=list)
    probe: dict[str, Any] | None = None


class FlowPatch(K8sModel):
    spec: dict[str, Any] | None = None


class Flow(K8sModel):
    name: str
    depends_on: FlowDependsOn | None = None
    patch: FlowPatch | None = None


class JobFlowSpec(K8sModel):
    flows: list[Flow] = Field(default_factory=list)
    job_retain_policy: str = "retain"


class JobFlowState(K8sModel):
    phase: str = ""


class JobFlowStatus(K8sModel):
    pending_jobs: list[str] = Field(default_factory=list)
    running_jobs: list[str] = Field(default_factory=list)
    failed_jobs: list[str] = Field(default_factory=list)
    completed_jobs: list[str] = Field(default_factory=list)
    terminated_jobs: list[str] = Field(default_factory=list)
    state: JobFlowState = Field(default_factory=JobFlowState)


class JobFlow(TypedObject):
    api_version: str = FLOW_GROUP
    kind: str = "JobFlow"
    spec: JobFlowSpec = Field(default_factory=JobFlowSpec)
    status: JobFlowStatus = Field(default_factory=JobFlowStatus)
