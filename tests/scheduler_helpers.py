"""Builders shared by the scheduler unit tests (nodes, queues, PodGroups, pods, a cache, one cycle)."""

from __future__ import annotations

from typing import Any

from conftest import resources
from lavaflow.api.core import Node, Pod
from lavaflow.api.volcano import PodGroup, PriorityClass, Queue
from lavaflow.scheduler.cache import DEFAULT_MAX_PODS, SchedulerCache
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.scheduler.framework.session import Session
from lavaflow.scheduler.scheduler import Scheduler

GI = 1024**3


def make_node(
    name: str,
    cpu: float | str = 4,
    mem: str = "8Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    pods: int | None = None,
) -> Node:
    alloc: dict[str, Any] = {"cpu": str(cpu), "memory": mem}
    if pods is not None:
        alloc["pods"] = str(pods)
    alloc.update({k: str(v) for k, v in (extra or {}).items()})
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or []), "unschedulable": unschedulable},
            "status": {
                "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def make_queue(
    name: str = "default",
    weight: int = 1,
    capability: dict[str, Any] | None = None,
    guarantee: dict[str, Any] | None = None,
    deserved: dict[str, Any] | None = None,
    state: str = "Open",
    priority: int = 0,
    creation: float = 0,
) -> Queue:
    spec: dict[str, Any] = {"weight": weight, "priority": priority}
    if capability:
        spec["capability"] = {k: str(v) for k, v in capability.items()}
    if guarantee:
        spec["guarantee"] = {"resource": {k: str(v) for k, v in guarantee.items()}}
    if deserved:
        spec["deserved"] = {k: str(v) for k, v in deserved.items()}
    return Queue.model_validate(
        {"metadata": {"name": name, "creationTimestamp": creation}, "spec": spec, "status": {"state": state}}
    )


def make_pg(
    name: str,
    min_member: int = 1,
    queue: str = "default",
    min_resources: dict[str, Any] | None = None,
    phase: str = "Inqueue",
    namespace: str = "default",
    priority_class: str | None = None,
    min_task_member: dict[str, int] | None = None,
    creation: float = 0,
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources:
        spec["minResources"] = {k: str(v) for k, v in min_resources.items()}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = dict(min_task_member)
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": creation},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def make_pod(
    name: str,
    group: str | None = None,
    cpu: float | str | None = 1,
    mem: str | None = "1Gi",
    node: str | None = None,
    phase: str = "Pending",
    namespace: str = "default",
    scheduler: str = "lavaflow",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    role: str | None = None,
    index: int | None = None,
    extra: dict[str, Any] | None = None,
    deleting: bool = False,
    creation: float = 0,
) -> Pod:
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = str(cpu)
    if mem is not None:
        requests["memory"] = mem
    requests.update({k: str(v) for k, v in (extra or {}).items()})
    ann = dict(annotations or {})
    if group is not None:
        ann["scheduling.k8s.io/group-name"] = group
    if role is not None:
        ann["volcano.sh/task-spec"] = role
    if index is not None:
        ann["volcano.sh/task-index"] = str(index)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": ann,
        "creationTimestamp": creation,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": resources(requests) if requests else {}}],
    }
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    return Pod.model_validate({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def make_priority_class(name: str, value: int, global_default: bool = False) -> PriorityClass:
    return PriorityClass.model_validate({"metadata": {"name": name}, "value": value, "globalDefault": global_default})


def make_cache(
    nodes=(),
    queues=None,
    pgs=(),
    pods=(),
    priority_classes=(),
) -> SchedulerCache:
    """A cache fed with the given objects (a ``default`` queue unless queues are given)."""
    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    for pc in priority_classes:
        cache.on_priority_class(pc)
    for n in nodes:
        cache.on_node(n)
    for q in queues if queues is not None else [make_queue("default")]:
        cache.on_queue(q)
    for pg in pgs:
        cache.on_podgroup(pg)
    for p in pods:
        cache.on_pod(p)
    return cache


def conf_of(conf_text: str | None):
    return load_scheduler_conf(conf_text, allow_kube_default=True)


def open_session(cache: SchedulerCache, conf_text: str | None = None) -> Session:
    ssn = Session(cache, load_scheduler_conf(conf_text, allow_kube_default=True))
    ssn.open()
    return ssn


def run_cycle(cache: SchedulerCache, conf_text: str | None = None, now: float = 0.0):
    """One scheduling cycle; returns (session, decisions taken from the cache)."""
    sched = Scheduler(cache, load_scheduler_conf(conf_text, allow_kube_default=True))
    ssn = sched.run_once(now)
    return ssn, cache.take_decisions()


def tiers_conf(*tiers: list[str], actions: str = "enqueue, allocate, backfill") -> str:
    """Conf text with the given plugin names per tier."""
    lines = [f'actions: "{actions}"', "tiers:"]
    for tier in tiers:
        lines.append("- plugins:" if tier else "- plugins: []")
        for p in tier:
            lines.append(f"  - name: {p}")
    return "\n".join(lines) + "\n"


def phases(decisions) -> dict[str, str]:
    """PodGroup key -> phase written this cycle (last write wins)."""
    return {k: s["phase"] for k, s in decisions.podgroups}


def bound(decisions) -> dict[str, str]:
    return dict(decisions.binds)


def fn(ssn, point, plugin):
    """The callback ``plugin`` registered on the session for extension point ``point``."""
    return ssn.fns[point][plugin]


def only(*plugins, actions="enqueue, allocate, backfill"):
    """Conf text with one tier of these plugins."""
    return tiers_conf(list(plugins), actions=actions)


PCS = [make_priority_class("high", 100), make_priority_class("low", 1)]
