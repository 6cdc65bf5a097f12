"""What the simulator stands in for: kube-controller-manager's workload controllers.

Deployments, ReplicaSets, StatefulSets and batch/v1 Jobs in the input create
their pods (replicas / parallelism) with an owner reference, so the PodGroup
controller can gang them by the owner's group-min-member annotation.

A pod of a Deployment, ReplicaSet or StatefulSet that is evicted (reclaim,
preemption, a failed node) or deleted while it has not finished is replaced,
under the same name, as their controllers do; such pods run until deleted
unless they carry a duration (services do not finish on their own).
"""

from __future__ import annotations

from ..api.core import Pod
from ..controllers.base import Controller
from ..store.base import Forbidden

KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "BatchJob")
# Owners whose lost pods are replaced; their pods run until deleted by default.
REPLACING = ("Deployment", "ReplicaSet", "StatefulSet")


class WorkloadController(Controller):
    def __init__(self, store, clock) -> None:
        super().__init__(store, clock)
        self.created: dict[str, set[str]] = {}
        self.names: dict[str, dict[int, str]] = {}  # owner key -> slot -> its pod's name, when not <owner>-<slot>
        self.forbidden: dict[str, set[str]] = {}  # namespace -> owners a pod create was refused for
        for kind in KINDS:
            store.watch(kind, lambda ev, obj, old, kind=kind: self._on_owner(kind, ev, obj))
        store.watch("Pod", self._on_pod)

    def retry_forbidden(self, namespace: str) -> None:
        for key in self.forbidden.pop(namespace, set()):
            self.mark(key)

    def _on_pod(self, event: str, pod, old) -> None:
        if event != "DELETED" or pod.status.phase not in ("Pending", "Running", ""):
            return
        for ref in pod.metadata.owner_references:
            if ref.controller and ref.kind in REPLACING:
                key = f"{ref.kind}:{pod.namespace}/{ref.name}"
                owner = self.store.get(ref.kind, f"{pod.namespace}/{ref.name}")
                created = self.created.get(key)
                if owner is not None and owner.metadata.uid == ref.uid and created is not None and pod.name in created:
                    created.discard(pod.name)  # the owner is short of a pod: recreate it
                    self.mark(key)

    def _on_owner(self, kind: str, event: str, obj) -> None:
        key = f"{kind}:{obj.key}"
        if event == "DELETED":
            for name in sorted(self.created.pop(key, set())):
                self.store.delete("Pod", f"{obj.namespace}/{name}")
            return
        self.mark(key)

    def sync(self, key: str) -> None:
        kind, _, okey = key.partition(":")
        owner = self.store.get(kind, okey)
        if owner is None:
            return
        count = owner.spec.parallelism if kind == "BatchJob" else owner.spec.replicas
        created = self.created.setdefault(key, set())
        api_kind = "Job" if kind == "BatchJob" else kind
        tmpl = owner.spec.template
        names = self.names.setdefault(key, {})
        for i in range(max(count, 0)):
            name = names.get(i, f"{owner.name}-{i}")
            if name in created:
                continue
            generate = None
            if self.store.get("Pod", f"{owner.namespace}/{name}") is not None:
                if kind == "StatefulSet":
                    continue  # its pods' names are fixed: the slot waits (kube's controller retries)
                # Kubernetes names these pods from a generateName (<owner>-<random>), so two owners'
                # pods never meet; the short names here can (Deployment x and batch Job x): this
                # slot's pod is named by the store's generateName instead.
                name, generate = "", f"{owner.name}-"
            annotations = dict(tmpl.metadata.annotations)
            pod = Pod.model_validate(
                {
                    "metadata": {
                        "name": name,
                        "generateName": generate,
                        "namespace": owner.namespace,
                        "labels": dict(tmpl.metadata.labels),
                        "annotations": annotations,
                        "ownerReferences": [
                            {
                                "apiVersion": owner.api_version,
                                "kind": api_kind,
                                "name": owner.name,
                                "uid": owner.metadata.uid,
                                "controller": True,
                            }
                        ],
                    }
                }
            ).model_copy(update={"spec": tmpl.spec.model_copy()})
            try:
                self.store.create(pod)
            except Forbidden:  # past a ResourceQuota: tried again when usage goes down
                self.forbidden.setdefault(owner.namespace, set()).add(key)
                break
            names[i] = pod.metadata.name
            created.add(pod.metadata.name)
