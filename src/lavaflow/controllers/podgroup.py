"""PodGroup controller: a PodGroup for pods of our scheduler that have none.

One PodGroup per controlling owner (Deployment, StatefulSet, ReplicaSet,
batch Job), else per pod, named ``podgroup-<owner or pod uid>``; minMember
comes from the owner's ``scheduling.volcano.sh/group-min-member`` annotation
(default 1) and minResources is the pod's request times minMember.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..api.selectors import pod_requests
from ..api.volcano import (
    GROUP_MIN_MEMBER_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    PodGroup,
)
from ..api.workload_api import refers_to_workload_api
from ..api.x_k8s_podgroup import POD_GROUP_LABEL
from .base import Controller

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..api.meta import OwnerReference
    from ..store.base import Store
    from .base import Clock


OWNER_KINDS = {"Deployment": "Deployment", "ReplicaSet": "ReplicaSet", "StatefulSet": "StatefulSet", "Job": "BatchJob"}


class PodGroupController(Controller):
    def __init__(self, store: Store, clock: Clock, scheduler_names: tuple[str, ...] = ("lavaflow", "volcano")) -> None:
        super().__init__(store, clock)
        self.scheduler_names = scheduler_names
        store.watch("Pod", self._on_pod)

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        if event == "ADDED" and self._needs_group(pod):
            self.mark(pod.key)

    def _needs_group(self, pod: Pod) -> bool:
        # Pods labelled with a scheduler-plugins PodGroup belong to that group, and pods naming a
        # group of the Kubernetes Workload API (workloadRef, schedulingGroup) to theirs: the
        # scheduler maps them; no PodGroup is made here.
        return (pod.spec.scheduler_name or "default-scheduler") in self.scheduler_names and (
            not pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)  # (an empty name names no group)
            and not pod.metadata.labels.get(POD_GROUP_LABEL)
            and not refers_to_workload_api(pod)
        )

    def _owner(self, pod: Pod) -> tuple[OwnerReference | None, Any]:
        for ref in pod.metadata.owner_references:
            if ref.controller or len(pod.metadata.owner_references) == 1:
                kind = OWNER_KINDS.get(ref.kind)
                if kind is None:
                    return ref, None
                return ref, self.store.get(kind, f"{pod.namespace}/{ref.name}")
        return None, None

    def sync(self, key: str) -> None:
        pod = self.store.get("Pod", key)
        if pod is None or not self._needs_group(pod):
            return
        ref, owner = self._owner(pod)
        uid = ref.uid if ref is not None and ref.uid else pod.metadata.uid
        name = f"podgroup-{uid}"
        min_member = 1
        if owner is not None:
            try:
                min_member = max(int(owner.metadata.annotations.get(GROUP_MIN_MEMBER_ANNOTATION, "1")), 0)
            except ValueError:
                min_member = 1
        pg_key = f"{pod.namespace}/{name}"
        if self.store.get("PodGroup", pg_key) is None:
            # (the pod's own annotation only, as Volcano's podgroup controller: the owner's
            # annotations give the gang size and volcano.sh/ ones are inherited, never the queue)
            queue = pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION)
            req = pod_requests(pod.spec)
            min_resources = {k: Decimal(repr(v)) * min_member for k, v in req.items()}
            inherited = {}
            if owner is not None:
                inherited = {k: v for k, v in owner.metadata.annotations.items() if k.startswith("volcano.sh/")}
            pg = PodGroup.model_validate(
                {
                    "metadata": {
                        "name": name,
                        "namespace": pod.namespace,
                        "annotations": inherited,
                        "ownerReferences": _owner_references(pod),
                    },
                    "spec": {
                        "minMember": min_member,
                        "queue": queue or "default",
                        "priorityClassName": pod.spec.priority_class_name,
                        "minResources": {k: str(v) for k, v in min_resources.items()},
                    },
                }
            )
            self.store.create(pg)
        pod.metadata.annotations[GROUP_NAME_ANNOTATION] = name
        self.store.update(pod)


def _owner_references(pod: Pod) -> list[dict[str, Any]]:
    """Volcano's newPGOwnerReferences: the pod's owner references when one of them is its
    controller, else a controller reference to the pod itself (so the PodGroup of a bare pod goes
    with the pod; lavaflow used to leave such a PodGroup without an owner)."""
    if any(r.controller for r in pod.metadata.owner_references):
        return [r.model_dump(by_alias=True) for r in pod.metadata.owner_references]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "uid": pod.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
