"""What the simulator stands in for: kube-controller-manager's workload controllers.

Deployments, ReplicaSets, StatefulSets and batch/v1 Jobs in the input create
their pods (replicas / parallelism) with an owner reference, so the PodGroup
controller can gang them by the owner's group-min-member annotation.
"""

from __future__ import annotations

from ..api.core import Pod
from ..controllers.base import Controller

KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "BatchJob")


class WorkloadController(Controller):
    def __init__(self, store, clock) -> None:
        super().__init__(store, clock)
        self.created: dict[str, set[str]] = {}
        for kind in KINDS:
            store.watch(kind, lambda ev, obj, old, kind=kind: self._on_owner(kind, ev, obj))

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
        for i in range(max(count, 0)):
            name = f"{owner.name}-{i}"
            if name in created:
                continue
            annotations = dict(tmpl.metadata.annotations)
            pod = Pod.model_validate(
                {
                    "metadata": {
                        "name": name,
                        "namespace": owner.namespace,
                        "labels": dict(tmpl.metadata.labels),
                        "annotations": annotations,
                        "ownerReferences": [
                            {"apiVersion": owner.api_version, "kind": api_kind, "name": owner.name, "uid": owner.metadata.uid, "controller": True}
                        ],
                    }
                }
            ).model_copy(update={"spec": tmpl.spec.model_copy()})
            created.add(name)
            self.store.create(pod)
