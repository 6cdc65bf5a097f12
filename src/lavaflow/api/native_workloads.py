"""Native Kubernetes workload controllers whose pods lavaflow can gang-schedule:
apps/v1 Deployment, ReplicaSet, StatefulSet and batch/v1 Job."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .core import PodTemplateSpec, Taint
from .meta import K8sModel, ResourceList, TypedObject


class ReplicatedSpec(K8sModel):
    replicas: int = 1
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class Deployment(TypedObject):
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    spec: ReplicatedSpec = Field(default_factory=ReplicatedSpec)


class ReplicaSet(TypedObject):
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"
    spec: ReplicatedSpec = Field(default_factory=ReplicatedSpec)


class StatefulSet(TypedObject):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    spec: ReplicatedSpec = Field(default_factory=ReplicatedSpec)


class BatchJobSpec(K8sModel):
    parallelism: int = 1
    completions: int | None = None
    backoff_limit: int = Field(default=6, ge=0)
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class JobCondition(K8sModel):
    type: str  # Complete | Failed
    status: str = "True"
    reason: str | None = None
    message: str | None = None
    last_transition_time: Any = None


class BatchJobStatus(K8sModel):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    start_time: Any = None
    completion_time: Any = None
    conditions: list[JobCondition] = Field(default_factory=list)


class BatchJob(TypedObject):
    """batch/v1 Job (named BatchJob to keep it apart from Volcano's Job)."""

    api_version: str = "batch/v1"
    kind: str = "Job"
    spec: BatchJobSpec = Field(default_factory=BatchJobSpec)
    status: BatchJobStatus = Field(default_factory=BatchJobStatus)


class NumaLayout(K8sModel):
    """A NodeGroup's NUMA layout: each node gets a Numatopology with its CPUs split evenly."""

    nodes: int = Field(default=1, ge=1)  # NUMA nodes per node
    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = "none"
    cpu_manager_policy: Literal["none", "static"] = "static"


class NodeGroupSpec(K8sModel):
    count: int = 1
    capacity: ResourceList = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    numa: NumaLayout | None = None


class NodeGroup(TypedObject):
    """sim.lavaflow.io/v1alpha1 NodeGroup: shorthand for ``count`` identical nodes."""

    namespaced = False
    api_version: str = "sim.lavaflow.io/v1alpha1"
    kind: str = "NodeGroup"
    spec: NodeGroupSpec = Field(default_factory=NodeGroupSpec)
