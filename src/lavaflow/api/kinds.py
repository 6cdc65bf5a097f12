"""The one table of kinds: for each kind lavaflow knows, its wire identity (apiVersion, kind),
where it lives in the Kubernetes API (plural, namespaced, status subresource), its model,
whether simulation input may hold it, and its admission rules (and whether the webhook serves
them). The loader, the simulator's input check, the Kubernetes store, client, test double and
webhook all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import admission
from .core import (
    ConfigMap,
    Namespace,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    ResourceQuota,
    Secret,
    Service,
)
from .native_workloads import BatchJob, Deployment, NodeGroup, ReplicaSet, StatefulSet
from .topology import HyperNode, Numatopology
from .volcano import Command, Job, JobFlow, JobTemplate, PodGroup, PriorityClass, Queue
from .workload_api import SchedulingPodGroup, Workload, WorkloadV1alpha2
from .x_k8s_podgroup import CoschedulingPodGroup


@dataclass(frozen=True)
class Kind:
    kind: str  # store kind (the model's class name)
    api_kind: str  # kind on the wire
    api_version: str
    plural: str
    namespaced: bool = True
    status: bool = False  # has a status subresource
    model: Any | None = None  # the pydantic model, if lavaflow reads the kind
    loadable: bool = False  # simulation input may hold it
    older_versions: tuple[str, ...] = ()  # further apiVersions the loader reads as this kind
    served: bool = True  # exists in the Kubernetes API (NodeGroup is the simulator's alone)
    webhook_ops: tuple[str, ...] = ()  # operations the validating webhook checks (none: not served)

    @property
    def admission(self) -> admission.Rules | None:
        """Volcano's admission rules for this kind (defaults and checks), if any."""
        return admission.RULES.get(self.kind)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    def base(self) -> str:
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        p = self.base()
        if self.namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{self.plural}"
        if name:
            p += f"/{name}"
            if sub:
                p += f"/{sub}"
        return p

    def path_for_key(self, key: str, sub: str | None = None) -> str:
        ns, name = split_key(key, self.namespaced)
        return self.path(ns, name, sub)


def split_key(key: str, namespaced: bool) -> tuple[str | None, str]:
    if namespaced:
        ns, _, name = key.partition("/")
        return ns, name
    return None, key


_VOLCANO_BATCH = "batch.volcano.sh/v1alpha1"
_VOLCANO_SCHEDULING = "scheduling.volcano.sh/v1beta1"
_FLOW = "flow.volcano.sh/v1alpha1"

ALL: tuple[Kind, ...] = (
    Kind("Pod", "Pod", "v1", "pods", True, True, Pod, loadable=True, webhook_ops=("CREATE",)),
    Kind("Node", "Node", "v1", "nodes", False, True, Node, loadable=True),
    Kind("Namespace", "Namespace", "v1", "namespaces", False, True, Namespace, loadable=True),
    Kind("ConfigMap", "ConfigMap", "v1", "configmaps", model=ConfigMap, loadable=True),
    Kind("Secret", "Secret", "v1", "secrets", model=Secret),
    Kind("Service", "Service", "v1", "services", True, True, Service),
    Kind("Event", "Event", "v1", "events"),
    Kind(
        "PodGroup",
        "PodGroup",
        _VOLCANO_SCHEDULING,
        "podgroups",
        True,
        True,
        PodGroup,
        loadable=True,
        webhook_ops=("CREATE",),
    ),
    Kind(
        "Queue",
        "Queue",
        _VOLCANO_SCHEDULING,
        "queues",
        False,
        True,
        Queue,
        loadable=True,
        webhook_ops=("CREATE", "UPDATE", "DELETE"),
    ),
    # scheduler-plugins' PodGroup (its CRD is not lavaflow's: watched only where it is served)
    Kind(
        "CoschedulingPodGroup",
        "PodGroup",
        "scheduling.x-k8s.io/v1alpha1",
        "podgroups",
        True,
        True,
        CoschedulingPodGroup,
        loadable=True,
    ),
    # the Kubernetes Workload API (KEP-4671; built in, served where its feature gate and
    # runtime-config are on): 1.35's Workload, 1.36's Workload templates and runtime PodGroups
    Kind("Workload", "Workload", "scheduling.k8s.io/v1alpha1", "workloads", True, False, Workload, loadable=True),
    Kind(
        "WorkloadV1alpha2",
        "Workload",
        "scheduling.k8s.io/v1alpha2",
        "workloads",
        True,
        False,
        WorkloadV1alpha2,
        loadable=True,
    ),
    Kind(
        "SchedulingPodGroup",
        "PodGroup",
        "scheduling.k8s.io/v1alpha2",
        "podgroups",
        True,
        True,
        SchedulingPodGroup,
        loadable=True,
    ),
    Kind("Job", "Job", _VOLCANO_BATCH, "jobs", True, True, Job, loadable=True, webhook_ops=("CREATE", "UPDATE")),
    Kind(
        "Command",
        "Command",
        "bus.volcano.sh/v1alpha1",
        "commands",
        model=Command,
        loadable=True,
        webhook_ops=("CREATE",),
    ),
    Kind("JobFlow", "JobFlow", _FLOW, "jobflows", True, True, JobFlow, loadable=True, webhook_ops=("CREATE", "UPDATE")),
    Kind(
        "JobTemplate",
        "JobTemplate",
        _FLOW,
        "jobtemplates",
        True,
        True,
        JobTemplate,
        loadable=True,
        webhook_ops=("CREATE", "UPDATE"),
    ),
    Kind(
        "PriorityClass",
        "PriorityClass",
        "scheduling.k8s.io/v1",
        "priorityclasses",
        False,
        model=PriorityClass,
        loadable=True,
        # older versions of the same object, still found in examples (Volcano's kubecon-2019 ones)
        older_versions=("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha1"),
    ),
    Kind("Deployment", "Deployment", "apps/v1", "deployments", True, True, Deployment, loadable=True),
    Kind("ReplicaSet", "ReplicaSet", "apps/v1", "replicasets", True, True, ReplicaSet, loadable=True),
    Kind("StatefulSet", "StatefulSet", "apps/v1", "statefulsets", True, True, StatefulSet, loadable=True),
    Kind("BatchJob", "Job", "batch/v1", "jobs", True, True, BatchJob, loadable=True),
    Kind("NetworkPolicy", "NetworkPolicy", "networking.k8s.io/v1", "networkpolicies"),
    Kind(
        "PersistentVolumeClaim",
        "PersistentVolumeClaim",
        "v1",
        "persistentvolumeclaims",
        True,
        True,
        PersistentVolumeClaim,
        loadable=True,
    ),
    Kind(
        "PersistentVolume", "PersistentVolume", "v1", "persistentvolumes", False, True, PersistentVolume, loadable=True
    ),
    Kind(
        "HyperNode",
        "HyperNode",
        "topology.volcano.sh/v1alpha1",
        "hypernodes",
        False,
        True,
        HyperNode,
        loadable=True,
        webhook_ops=("CREATE", "UPDATE"),
    ),
    Kind(
        "Numatopology",
        "Numatopology",
        "nodeinfo.volcano.sh/v1alpha1",
        "numatopologies",
        False,
        model=Numatopology,
        loadable=True,
    ),
    Kind("ResourceQuota", "ResourceQuota", "v1", "resourcequotas", True, True, ResourceQuota, loadable=True),
    Kind("Lease", "Lease", "coordination.k8s.io/v1", "leases"),
    Kind("PodDisruptionBudget", "PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True, True),
    # so that the CRDs of deploy/crds can be applied through the client (`lavaflow install`, tests)
    Kind(
        "CustomResourceDefinition",
        "CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
        True,
    ),
    # what `lavaflow install` applies besides the CRDs, Deployments, Services and ConfigMaps
    Kind("ServiceAccount", "ServiceAccount", "v1", "serviceaccounts"),
    Kind("ClusterRole", "ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", False),
    Kind("ClusterRoleBinding", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    Kind(
        "MutatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    Kind(
        "ValidatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        False,
    ),
    # the simulator's shorthand for a group of identical nodes
    Kind(
        "NodeGroup",
        "NodeGroup",
        "sim.lavaflow.io/v1alpha1",
        "nodegroups",
        False,
        model=NodeGroup,
        loadable=True,
        served=False,
    ),
)

#: Kinds of the Kubernetes API, by store kind.
API_KINDS: dict[str, Kind] = {k.kind: k for k in ALL if k.served}
#: Kinds of the Kubernetes API, by (apiVersion, kind) on the wire.
BY_WIRE: dict[tuple[str, str], Kind] = {(k.api_version, k.api_kind): k for k in ALL if k.served}
#: What simulation input may hold: (apiVersion, kind) -> model, older apiVersions included.
LOADABLE: dict[tuple[str, str], Any] = {
    (version, k.api_kind): k.model for k in ALL if k.loadable for version in (k.api_version, *k.older_versions)
}
#: The current (apiVersion, kind) of each loadable kind (older versions left out).
LOADABLE_CURRENT: tuple[tuple[str, str], ...] = tuple((k.api_version, k.api_kind) for k in ALL if k.loadable)
#: Kinds whose admission rules the webhook serves.
WEBHOOK_KINDS: tuple[Kind, ...] = tuple(k for k in ALL if k.webhook_ops)


def kind_info(kind: str) -> Kind:
    """The API entry of a store kind (``"Job"``, ``"BatchJob"``, ...)."""
    try:
        return API_KINDS[kind]
    except KeyError:
        raise KeyError(f"lavaflow does not know where {kind!r} lives in the Kubernetes API") from None


def kind_of_manifest(doc: dict[str, Any]) -> Kind:
    key = (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
    if key not in BY_WIRE:
        raise KeyError(f"unsupported kind {key[1]!r} of {key[0]!r}")
    return BY_WIRE[key]
