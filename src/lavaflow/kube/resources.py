"""Where each store kind lives in the Kubernetes API."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    kind: str  # store kind (model class name)
    api_kind: str  # kind on the wire
    api_version: str
    plural: str
    namespaced: bool = True
    status: bool = False  # has a status subresource

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

    def model(self) -> Any | None:
        """The pydantic model class for this kind, if lavaflow has one."""
        return _model_of(self.kind)


@functools.cache
def _model_of(kind: str) -> Any | None:
    for mod in ("core", "volcano", "workloads", "topology", "x_k8s_podgroup"):
        m = importlib.import_module(f"lavaflow.api.{mod}")
        cls = getattr(m, kind, None)
        if isinstance(cls, type) and hasattr(cls, "model_validate"):
            return cls
    return None


def split_key(key: str, namespaced: bool) -> tuple[str | None, str]:
    if namespaced:
        ns, _, name = key.partition("/")
        return ns, name
    return None, key


_ALL = [
    Resource("Pod", "Pod", "v1", "pods", True, True),
    Resource("Node", "Node", "v1", "nodes", False, True),
    Resource("Namespace", "Namespace", "v1", "namespaces", False, True),
    Resource("ConfigMap", "ConfigMap", "v1", "configmaps"),
    Resource("Secret", "Secret", "v1", "secrets"),
    Resource("Service", "Service", "v1", "services", True, True),
    Resource("Event", "Event", "v1", "events"),
    Resource("PodGroup", "PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", True, True),
    Resource("Queue", "Queue", "scheduling.volcano.sh/v1beta1", "queues", False, True),
    # scheduler-plugins' PodGroup (its CRD is not lavaflow's: watched only where it is served)
    Resource("CoschedulingPodGroup", "PodGroup", "scheduling.x-k8s.io/v1alpha1", "podgroups", True, True),
    Resource("Job", "Job", "batch.volcano.sh/v1alpha1", "jobs", True, True),
    Resource("Command", "Command", "bus.volcano.sh/v1alpha1", "commands"),
    Resource("JobFlow", "JobFlow", "flow.volcano.sh/v1alpha1", "jobflows", True, True),
    Resource("JobTemplate", "JobTemplate", "flow.volcano.sh/v1alpha1", "jobtemplates", True, True),
    Resource("PriorityClass", "PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
    Resource("Deployment", "Deployment", "apps/v1", "deployments", True, True),
    Resource("ReplicaSet", "ReplicaSet", "apps/v1", "replicasets", True, True),
    Resource("StatefulSet", "StatefulSet", "apps/v1", "statefulsets", True, True),
    Resource("BatchJob", "Job", "batch/v1", "jobs", True, True),
    Resource("NetworkPolicy", "NetworkPolicy", "networking.k8s.io/v1", "networkpolicies"),
    Resource("PersistentVolumeClaim", "PersistentVolumeClaim", "v1", "persistentvolumeclaims", True, True),
    Resource("PersistentVolume", "PersistentVolume", "v1", "persistentvolumes", False, True),
    Resource("HyperNode", "HyperNode", "topology.volcano.sh/v1alpha1", "hypernodes", False, True),
    Resource("Numatopology", "Numatopology", "nodeinfo.volcano.sh/v1alpha1", "numatopologies", False),
    Resource("ResourceQuota", "ResourceQuota", "v1", "resourcequotas", True, True),
    Resource("Lease", "Lease", "coordination.k8s.io/v1", "leases"),
    Resource("PodDisruptionBudget", "PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True, True),
    # so that the CRDs of deploy/crds can be applied through the client (tests against a real server)
    Resource("CustomResourceDefinition", "CustomResourceDefinition", "apiextensions.k8s.io/v1", "customresourcedefinitions", False, True),
]

RESOURCES: dict[str, Resource] = {r.kind: r for r in _ALL}
BY_WIRE: dict[tuple[str, str], Resource] = {(r.api_version, r.api_kind): r for r in _ALL}


def resource(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise KeyError(f"lavaflow does not know where {kind!r} lives in the Kubernetes API") from None


def resource_of_manifest(doc: dict[str, Any]) -> Resource:
    key = (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
    if key not in BY_WIRE:
        raise KeyError(f"unsupported kind {key[1]!r} of {key[0]!r}")
    return BY_WIRE[key]
