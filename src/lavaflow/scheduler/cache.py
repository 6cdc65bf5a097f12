"""The scheduler cache: the scheduler's incremental view of the cluster.

Backends feed it object events (``on_*``); it keeps TaskInfo/JobInfo/QueueInfo
objects and the node arrays up to date without rebuilding them each cycle.
Decisions a session commits (binds, evictions, status writes) are queued in
``decisions`` for the backend to apply: the core itself performs no I/O. A
backend that can bind while the session goes on (as Volcano's asynchronous
binder does) sets ``on_bind``, which then receives each bind as its job's
statement commits instead of ``decisions.binds``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.core import Node, Pod, PodPhase
from ..api.selectors import pod_requests
from ..api.volcano import (
    GROUP_NAME_ANNOTATION,
    PREEMPTABLE_KEY,
    TASK_INDEX_KEY,
    TASK_PRIORITY_KEY,
    TASK_SPEC_KEY,
    PodGroup,
    PriorityClass,
    Queue,
)
from .model import Eviction, JobInfo, NodeSet, QueueInfo, TaskInfo, TaskStatus
from .resources import PODS, ResourceIndex, pad

HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_MAX_PODS = 110
SYSTEM_CRITICAL = ("system-cluster-critical", "system-node-critical")
# Kinds fed to on_object: read by network-topology-aware, numa-aware and resourcequota.
PLUGIN_KIND_OF = {
    "network-topology-aware": ("HyperNode",),
    "numa-aware": ("Numatopology",),
    "resourcequota": ("ResourceQuota",),
    "drf": ("ResourceQuota",),  # namespace weights
    "predicates": ("PersistentVolumeClaim", "PersistentVolume"),  # volume node affinity
    "nodeorder": ("Service",),  # PodTopologySpread's default constraints for the pods a Service selects
}
PLUGIN_KINDS = tuple(dict.fromkeys(k for kinds in PLUGIN_KIND_OF.values() for k in kinds))


def timestamp(value: Any) -> float:
    """Creation timestamps: simulated seconds, or RFC 3339 strings on a cluster."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    try:
        return _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


# The statuses as module constants: reading an enum member off its class costs several times a
# global lookup, and the pod handlers below run for every pod event.
_PENDING, _BOUND, _RUNNING, _RELEASING = TaskStatus.PENDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING
# (the phases' plain strs, as keys and below: see model.NOT_ADMITTED)
_BY_PHASE = {
    PodPhase.RUNNING.value: _RUNNING,
    PodPhase.SUCCEEDED.value: TaskStatus.SUCCEEDED,
    PodPhase.FAILED.value: TaskStatus.FAILED,
    PodPhase.UNKNOWN.value: TaskStatus.UNKNOWN,
}
_POD_DONE = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)
_OCCUPYING = frozenset((_BOUND, _RUNNING, _RELEASING))  # a task in these holds its node's resources


def task_status_of(pod: Pod) -> TaskStatus:
    if pod.metadata.deletion_timestamp is not None:
        return _RELEASING
    status = _BY_PHASE.get(pod.status.phase)
    if status is not None:
        return status
    return _BOUND if pod.spec.node_name else _PENDING


@dataclass
class Decisions:
    binds: list[tuple[str, str]] = field(default_factory=list)  # (pod key, node name)
    evictions: list[tuple[str, Eviction]] = field(default_factory=list)  # (pod key, cause and message)
    podgroups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (pg key, status dict)
    queues: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (queue name, status dict)
    enqueued: list[str] = field(default_factory=list)
    wakeups: list[float] = field(default_factory=list)  # times a plugin wants a cycle even if nothing changes
    # (time, rule): times a rule that works out its wakes again in every session wants a cycle; each
    # session's set stands in for every earlier session's (an earlier time no longer asked for is
    # not a reason for a cycle: what the rule was waiting for has changed)
    rule_wakeups: list[tuple[float, str]] = field(default_factory=list)
    # (kind, key, type, reason, message): Events the backend records (e.g. elastic resizes)
    events: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    # (PodGroup key, kind, message, workers moved): elastic starts, resizes, halts, migrations
    resizes: list[tuple[str, str, str, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.binds or self.evictions or self.podgroups or self.queues)


_REQUESTS_KEPT = 4096  # request vectors remembered by template (SchedulerCache._requests_of)


class _KeptSignature:
    """A pod spec's constraint signature, kept with the spec it was worked out from (the entry is
    found by the spec's id, and holds the spec so that the id is not reused while it stands)."""

    __slots__ = ("spec", "key")

    def __init__(self, spec: Any, key: Any) -> None:
        self.spec = spec
        self.key = key


class _KeptRequests:
    """A request vector (with its pod slot) and whether it requests nothing, kept with what pods
    sharing it must hold by identity: their containers, init containers and overhead, or the one
    dict of requests that light pods carry (``owner``; ``init`` and ``overhead`` None then)."""

    __slots__ = ("owner", "init", "overhead", "vector", "best_effort")

    def __init__(self, owner: Any, init: Any, overhead: Any, vector: np.ndarray, best_effort: bool) -> None:
        self.owner = owner
        self.init = init
        self.overhead = overhead
        self.vector = vector
        self.best_effort = best_effort


class _KeptQueueVectors:
    """A Queue's capability, guarantee and deserved vectors, kept with the resource count and the
    spec amounts (``source``) they were computed from."""

    __slots__ = ("width", "source", "capability", "guarantee", "deserved")

    def __init__(
        self, width: int, source: Any, capability: np.ndarray, guarantee: np.ndarray, deserved: np.ndarray | None
    ) -> None:
        self.width = width
        self.source = source
        self.capability = capability
        self.guarantee = guarantee
        self.deserved = deserved


_MODEL_TYPES: dict[type, bool] = {}


def _is_model(t: type) -> bool:
    """Whether pods of type ``t`` are pydantic Pods (else they carry their requests: the
    Kubernetes store's light and usage-only pods). isinstance on a pydantic class goes through its
    ABC machinery: a few pod types, asked for every pod event."""
    known = _MODEL_TYPES.get(t)
    if known is None:
        known = _MODEL_TYPES[t] = issubclass(t, Pod)
    return known


_PLAIN_SIGNATURE = json.dumps([[], None, []], sort_keys=True)  # no selector, node affinity or toleration


class SchedulerCache:
    def __init__(
        self, scheduler_names: tuple[str, ...] = ("lavaflow", "volcano"), kubelet_max_pods: float | None = None
    ) -> None:
        """``kubelet_max_pods``: the pod slots of a Node whose allocatable names none. None counts
        none, as kube-scheduler and Volcano do for a Node the API server serves without them; the
        simulator passes the kubelet's default (110), since its nodes stand for kubelets, which
        always report their slots."""
        self.scheduler_names = scheduler_names
        self.kubelet_max_pods = kubelet_max_pods
        self.index = ResourceIndex()
        self.nodes = NodeSet(len(self.index))
        self.jobs: dict[str, JobInfo] = {}
        self.jobs_removed = 0  # bumped whenever a job leaves ``jobs`` (what keeps state per job reads it)
        # The jobs a session schedules are those with a PodGroup; finished jobs keep their pods (and
        # so their JobInfo) after the job controller deletes the PodGroup, so over a long run most of
        # ``jobs`` is finished work. Sessions and the queue write-back read these instead, so their
        # cost follows the live jobs, not every job ever seen. Both keep ``jobs``' order (``seq``).
        self.pg_jobs: dict[str, JobInfo] = {}  # jobs with a PodGroup
        self.orphans: dict[str, JobInfo] = {}  # jobs without one whose tasks still hold resources
        self._pg_jobs_sorted = True
        self._seq = 0
        self.queues: dict[str, QueueInfo] = {}
        self.tasks: dict[str, TaskInfo] = {}
        self.foreign: dict[str, tuple[int, np.ndarray]] = {}  # pods of other schedulers on nodes
        self.priority_classes: dict[str, int] = {}
        self.default_priority = 0
        self.static_masks: dict[Any, np.ndarray] = {}
        self._signatures: dict[int, _KeptSignature] = {}  # id(pod spec) -> its constraint signature
        # id(containers) -> the request vector of pods made from them, or id(requests) -> that of
        # pods carrying their requests (see _requests_of)
        self._requests: dict[int, _KeptRequests] = {}
        self._vectors: dict[tuple[tuple[str, float], ...], np.ndarray] = {}
        # a PodGroup's minResources (as items) -> their vector; Queue name -> (resource count,
        # (capability, guarantee, deserved), their vectors): see on_podgroup and on_queue.
        self._min_resources: dict[tuple[tuple[str, Any], ...], np.ndarray] = {}
        self._queue_vectors: dict[str, _KeptQueueVectors] = {}
        self.decisions = Decisions()
        self.on_bind: Callable[[str, str], None] | None = None  # (pod key, node name)
        self._before_node: dict[str, dict[str, Pod]] = {}  # node name -> pods bound to it, node not seen yet
        # While a backend fills the cache from scratch (defer_usage): the (node row, requests) still
        # to add to nodes.used, in the order they came, added at once by settle_usage.
        self._deferred: list[tuple[int, np.ndarray]] | None = None
        # Preemptors (job uid) whose evictions were committed and that have not become ready since:
        # how many times they evicted without then starting (see actions/_evict.py).
        self.nominated: dict[str, int] = {}
        # Objects only some plugins read (PLUGIN_KINDS), by kind then key, and a version bumped on change.
        self.objects: dict[str, dict[str, Any]] = {kind: {} for kind in PLUGIN_KINDS}
        self.objects_version = 0
        self.plugin_memo: dict[str, Any] = {}  # plugins' derived state kept across sessions

    def on_object(self, kind: str, obj: Any, deleted: bool = False) -> None:
        """HyperNodes, Numatopologies, ResourceQuotas: kept as they are for the plugins that read them."""
        objs = self.objects.setdefault(kind, {})
        if deleted:
            objs.pop(obj.key, None)
        else:
            objs[obj.key] = obj
        self.objects_version += 1

    # ------------------------------------------------------------------ resources
    def _vector(self, amounts: dict[str, float]) -> np.ndarray:
        """The vector of ``amounts`` (a new array: callers may change it). A cluster repeats a
        few request shapes across its pods and PodGroups, so vectors are kept by value."""
        key = tuple(amounts.items())
        width = len(self.index)
        kept = self._vectors.get(key)
        if kept is not None and len(kept) == width:
            return kept.copy()
        vec = self.index.vector(amounts)
        if len(self.index) != width:
            self._widen()
        if len(self._vectors) >= _REQUESTS_KEPT:
            self._vectors.clear()
        self._vectors[key] = vec.copy()
        return vec

    def _widen(self) -> None:
        self.settle_usage(keep_deferring=True)
        width = len(self.index)
        self.nodes.widen(width)
        for t in self.tasks.values():
            t.resreq = pad(t.resreq, width)
        for j in self.jobs.values():
            if j.min_resources is not None:
                j.min_resources = pad(j.min_resources, width)
        for q in self.queues.values():
            for attr, fill in (("capability", np.inf), ("guarantee", 0.0), ("deserved", np.nan)):
                v = getattr(q, attr)
                if v is not None:
                    setattr(q, attr, pad(v, width, fill))
        for k, (i, vec) in list(self.foreign.items()):
            self.foreign[k] = (i, pad(vec, width))

    def register_resources(self, names: Iterable[str]) -> None:
        """Declare resource names up front (the simulator knows them all) to avoid widening later."""
        before = len(self.index)
        for n in names:
            if ResourceIndex.schedulable(n):
                self.index.add(n)
        if len(self.index) != before:
            self._widen()

    # ------------------------------------------------------------------ priority classes
    def on_priority_class(self, pc: PriorityClass, deleted: bool = False) -> None:
        if deleted:
            self.priority_classes.pop(pc.name, None)
            if pc.global_default:
                self.default_priority = 0
            return
        self.priority_classes[pc.name] = pc.value
        if pc.global_default:
            self.default_priority = pc.value

    def priority_of(self, class_name: str | None, explicit: int | None = None) -> int:
        if explicit is not None:
            return explicit
        if class_name and class_name in self.priority_classes:
            return self.priority_classes[class_name]
        return self.default_priority

    # ------------------------------------------------------------------ nodes
    def on_node(self, node: Node, deleted: bool = False) -> None:
        if deleted:
            self.nodes.remove(node.name)
            self.static_masks.clear()
            return
        amounts = {k: float(v) for k, v in node.allocatable.items()}
        amounts.setdefault("pods", self.kubelet_max_pods or 0.0)
        alloc = self._vector(amounts)
        labels = dict(node.metadata.labels)
        labels.setdefault(HOSTNAME_LABEL, node.name)
        self.nodes.upsert(node.name, alloc, labels, list(node.spec.taints), node.ready and not node.spec.unschedulable)
        self.static_masks.clear()
        # Pods seen bound to this node before the node itself (informers list concurrently on a
        # real API server): count them in its use now.
        for pod in self._before_node.pop(node.name, {}).values():
            self.on_pod(pod)

    # ------------------------------------------------------------------ queues
    def on_queue(self, queue: Queue, deleted: bool = False) -> None:
        if deleted:
            self.queues.pop(queue.name, None)
            self._queue_vectors.pop(queue.name, None)
            return
        spec = queue.spec
        info = self.queues.get(queue.name)
        # Most Queue events are status writes (the allocation): the vectors come from the spec's
        # amounts, kept with what they were computed from (and the resource count then).
        source = (spec.capability, spec.guarantee.resource, spec.deserved)
        kept = self._queue_vectors.get(queue.name)
        if info is not None and kept is not None and kept.width == len(self.index) and kept.source == source:
            deserved = kept.deserved
            self._set_queue(
                info,
                queue,
                kept.capability.copy(),
                kept.guarantee.copy(),
                None if deserved is None else deserved.copy(),
            )
            return
        width = len(self.index)
        cap = self._vector({k: float(v) for k, v in spec.capability.items()}) if spec.capability else None
        capability = np.full(len(self.index), np.inf)
        if cap is not None:
            for k in spec.capability:
                if k in self.index.pos:
                    capability[self.index.pos[k]] = float(spec.capability[k])
        guarantee = self._vector({k: float(v) for k, v in spec.guarantee.resource.items()})
        deserved = None
        if spec.deserved:
            deserved = np.full(len(self.index), np.nan)
            vec = self._vector({k: float(v) for k, v in spec.deserved.items()})
            for k in spec.deserved:
                if k in self.index.pos:
                    deserved[self.index.pos[k]] = vec[self.index.pos[k]]
        guarantee = pad(guarantee, len(self.index))
        if len(self.index) == width:  # (vectors made while the index grew may be of mixed widths)
            self._queue_vectors[queue.name] = _KeptQueueVectors(
                width,
                (dict(spec.capability), dict(spec.guarantee.resource), dict(spec.deserved)),
                capability.copy(),
                guarantee.copy(),
                None if deserved is None else deserved.copy(),
            )
        if info is None:
            info = QueueInfo(name=queue.name)
            self.queues[queue.name] = info
        self._set_queue(info, queue, capability, guarantee, deserved)

    @staticmethod
    def _set_queue(
        info: QueueInfo, queue: Queue, capability: np.ndarray, guarantee: np.ndarray, deserved: np.ndarray | None
    ) -> None:
        spec = queue.spec
        info.weight = spec.weight or 1
        info.capability = capability
        info.guarantee = guarantee
        info.deserved = deserved
        info.parent = spec.parent or ("" if queue.name == "root" else "root")
        info.priority = spec.priority
        info.state = queue.status.state or "Open"
        info.reclaimable = True if spec.reclaimable is None else spec.reclaimable
        info.queue = queue
        info.creation = timestamp(queue.metadata.creation_timestamp)

    # ------------------------------------------------------------------ pod groups
    def on_podgroup(self, pg: PodGroup, deleted: bool = False) -> None:
        meta, spec = pg.metadata, pg.spec
        namespace = meta.namespace or "default"
        uid = f"{namespace}/{meta.name}"  # pg.key (read here once: a restart applies ~87,000)
        if deleted:
            job = self.jobs.get(uid)
            if job is not None:
                job.pg = None
                self.pg_jobs.pop(uid, None)
                if not job.tasks:
                    del self.jobs[uid]
                    self.jobs_removed += 1
                else:
                    self._track_orphan(job)
            return
        job = self.jobs.get(uid)
        if job is None:  # (the newest job: not an orphan, and last in the order of pg_jobs)
            job = self._add_job(JobInfo(uid=uid, name=meta.name, namespace=namespace))
            self.pg_jobs[uid] = job
        elif job.pg is None:
            self.orphans.pop(uid, None)
            pg_jobs = self.pg_jobs
            if pg_jobs and self._pg_jobs_sorted and next(reversed(pg_jobs.values())).seq > job.seq:
                self._pg_jobs_sorted = False  # a job seen before others regains its PodGroup
            pg_jobs[uid] = job
        job.pg = pg
        job.version += 1
        job.queue = spec.queue or "default"
        job.min_available = spec.min_member
        job.min_task_member = dict(spec.min_task_member)
        job.priority = self.priority_of(spec.priority_class_name)
        created = meta.creation_timestamp  # a float as the Kubernetes store decodes it
        job.creation = created if type(created) is float else timestamp(created)
        amounts = spec.min_resources
        if amounts:
            # The PodGroups of a cluster repeat a few minResources (one per job template) and their
            # events are mostly status writes: vectors are kept by the amounts they were computed
            # from, while the resource count stays that of the vector, and copied.
            key = tuple(amounts.items())
            kept = self._min_resources.get(key)
            if kept is not None and len(kept) == len(self.index.names):
                job.min_resources = kept.copy()
            else:
                vec = pad(self._vector({k: float(v) for k, v in amounts.items()}), len(self.index))
                if len(self._min_resources) >= _REQUESTS_KEPT:
                    self._min_resources.clear()
                self._min_resources[key] = vec.copy()
                job.min_resources = vec
        else:
            job.min_resources = None

    # ------------------------------------------------------------------ pods
    def _signature(self, pod: Pod) -> Any:
        spec = pod.spec
        hit = self._signatures.get(id(spec))
        if hit is not None and hit.spec is spec:
            return hit.key
        aff = spec.affinity.node_affinity if spec.affinity is not None else None
        if not spec.node_selector and aff is None and not spec.tolerations:
            return _PLAIN_SIGNATURE
        # Equal keys for equal constraints (what the key is for: the static predicate and score
        # caches): tuples of the selector and of every toleration's fields, which nearly every
        # pod carries (the API server's default not-ready/unreachable tolerations); node affinity,
        # rarer and nested, as sorted JSON.
        key = (
            tuple(sorted(spec.node_selector.items())),
            json.dumps(aff.model_dump(mode="json", exclude_none=True), sort_keys=True) if aff is not None else None,
            tuple((t.key, t.operator, t.value, t.effect, t.toleration_seconds) for t in spec.tolerations),
        )
        if len(self._signatures) > 100_000:
            self._signatures.clear()
        self._signatures[id(spec)] = _KeptSignature(spec, key)
        return key

    def is_ours(self, pod: Pod) -> bool:
        return (pod.spec.scheduler_name or "default-scheduler") in self.scheduler_names

    def _requests_of(self, spec: Any) -> tuple[np.ndarray, bool]:
        """A pod spec's request vector (with its pod slot) and whether it requests nothing.

        Pods made from one template share its containers (the job controller copies the spec
        shallowly), so the vector is computed once per template and copied for each pod. Only the
        last few thousand templates are kept: a controller creates a job's pods together, and pods
        decoded from an API server share nothing (each entry holds its containers alive).
        """
        containers, init, overhead = spec.containers, spec.init_containers, spec.overhead
        hit = self._requests.get(id(containers))
        if (
            hit is not None
            and hit.owner is containers
            and hit.init is init
            and hit.overhead is overhead
            and len(hit.vector) == len(self.index)
        ):
            return hit.vector.copy(), hit.best_effort
        return self._keep_requests((containers, init, overhead), pod_requests(spec))

    def _carried_requests_of(self, amounts: dict[str, float]) -> tuple[np.ndarray, bool]:
        """The request vector (with its pod slot) of a pod that carries its requests (the
        Kubernetes store's light and usage-only pods, whose pods of one template share one dict of
        them) and whether it requests nothing: kept by that dict and shared, read-only (nothing
        changes a task's requests in place: a new width pads them into a new array)."""
        hit = self._requests.get(id(amounts))
        if hit is None or hit.owner is not amounts or len(hit.vector) != len(self.index.names):
            self._keep_requests((amounts, None, None), amounts)
            hit = self._requests[id(amounts)]
            hit.vector.flags.writeable = False
        return hit.vector, hit.best_effort

    def _keep_requests(self, owners: tuple[Any, Any, Any], amounts: dict[str, float]) -> tuple[np.ndarray, bool]:
        """The request vector of ``amounts`` (with its pod slot) and whether it requests nothing,
        kept under the id of the first of ``owners`` (what a later pod must hold, by identity, to
        share it)."""
        resreq = self._vector(amounts)
        resreq[PODS] = 1.0
        best_effort = not any(v > 0 for v in amounts.values())
        if len(self._requests) >= _REQUESTS_KEPT:
            self._requests.clear()
        self._requests[id(owners[0])] = _KeptRequests(*owners, resreq, best_effort)
        return resreq.copy(), best_effort

    def _new_task(self, pod: Pod, key: str, job_uid: str, namespace: str, status: TaskStatus) -> TaskInfo:
        meta, spec = pod.metadata, pod.spec
        if _is_model(type(pod)):
            resreq, best_effort = self._requests_of(spec)
        else:  # one that carries its requests (the Kubernetes store's light pods)
            resreq, best_effort = self._carried_requests_of(pod.requests)  # type: ignore[attr-defined]
        ann = meta.annotations
        labels = meta.labels
        role = ann.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY, "")
        given_index = ann.get(TASK_INDEX_KEY) or labels.get(TASK_INDEX_KEY)
        index = 0
        if given_index:  # (none, or "": index 0, as int("0") and a failed int("") gave)
            try:
                index = int(given_index)
            except ValueError:
                pass
        class_name = spec.priority_class_name
        priority = spec.priority
        if priority is None:
            priority = self.priority_of(class_name)
        if TASK_PRIORITY_KEY in ann:
            try:
                priority = int(ann[TASK_PRIORITY_KEY])
            except ValueError:
                pass
        preemptable = ann.get(PREEMPTABLE_KEY)
        created = meta.creation_timestamp
        return TaskInfo(
            uid=key,
            name=meta.name,
            namespace=namespace,
            job=job_uid,
            role=role,
            index=index,
            resreq=resreq,
            priority=priority,
            status=status,
            best_effort=best_effort,
            preemptable=preemptable is None or preemptable.lower() != "false",
            critical=namespace == "kube-system" or (class_name or "") in SYSTEM_CRITICAL,
            preemption_policy=spec.preemption_policy or "PreemptLowerPriority",
            signature=self._signature(pod),
            labels=labels,
            pod=pod,
            creation=created if type(created) is float else timestamp(created),
        )

    def on_pod(self, pod: Pod, deleted: bool = False) -> None:
        meta, spec = pod.metadata, pod.spec
        namespace = meta.namespace or "default"
        key = f"{namespace}/{meta.name}"  # pod.key
        node_name = spec.node_name
        if node_name:
            node = self.nodes.pos.get(node_name, -1)
            if node < 0:
                waiting = self._before_node.setdefault(node_name, {})
                if deleted:
                    waiting.pop(key, None)
                else:
                    waiting[key] = pod
        else:
            node = -1
        if (spec.scheduler_name or "default-scheduler") not in self.scheduler_names:  # not is_ours(pod)
            self._on_foreign_pod(pod, key, node, deleted)
            return
        group = meta.annotations.get(GROUP_NAME_ANNOTATION)
        task = self.tasks.get(key)
        if deleted or not group:  # (an empty group name names no group)
            if task is not None:
                self._drop_task(task)
            return
        job_uid = f"{namespace}/{group}"
        if task is not None and task.job != job_uid:
            self._drop_task(task)
            task = None
        job = self.jobs.get(job_uid)
        if job is None:
            job = self._add_job(JobInfo(uid=job_uid, name=group, namespace=namespace))
        status = task_status_of(pod)
        if task is None:
            task = self._new_task(pod, key, job_uid, namespace, status)
            job.add(task)
            self.tasks[key] = task
            if node >= 0 and status in _OCCUPYING:
                self._occupy(task, node)
            if job.pg is None:
                self._track_orphan(job)
            return
        task.pod = pod
        task.labels = meta.labels
        occupying_before = task.node >= 0
        occupying_after = node >= 0 and status in _OCCUPYING
        if occupying_before and (not occupying_after or node != task.node):
            self._vacate(task)
        if task.node >= 0 and (task.status == _RELEASING) != (status == _RELEASING):
            # Still on the same node: only the releasing part changes.
            if status == _RELEASING:
                self.nodes.releasing[task.node] += task.resreq
            else:
                self.nodes.releasing[task.node] -= task.resreq
        job.set_status(task, status)
        if occupying_after and task.node < 0:
            self._occupy(task, node)
        if job.pg is None:
            self._track_orphan(job)

    def _add_job(self, job: JobInfo) -> JobInfo:
        self._seq += 1
        job.seq = self._seq
        self.jobs[job.uid] = job
        return job

    def _track_orphan(self, job: JobInfo) -> None:
        """Keep ``orphans`` right for a job without a PodGroup after its tasks changed."""
        if job.allocated_num and job.uid in self.jobs:
            self.orphans[job.uid] = job
        else:
            self.orphans.pop(job.uid, None)

    def scheduled_jobs(self) -> dict[str, JobInfo]:
        """The jobs with a PodGroup, in the order they were first seen (that of ``jobs``)."""
        if not self._pg_jobs_sorted:
            self.pg_jobs = dict(sorted(self.pg_jobs.items(), key=lambda kv: kv[1].seq))
            self._pg_jobs_sorted = True
        return self.pg_jobs

    def holding_jobs(self) -> list[JobInfo]:
        """Every job that may hold resources (with a PodGroup, or without one but holding), in
        the order of ``jobs``."""
        jobs = list(self.scheduled_jobs().values())
        if self.orphans:
            jobs.extend(self.orphans.values())
            jobs.sort(key=lambda j: j.seq)
        return jobs

    # ------------------------------------------------------------------ deferred node usage
    def defer_usage(self) -> None:
        """Until ``settle_usage``, keep what pods add to their nodes' use and add it all at once
        then: a backend filling the cache from scratch (a scheduler's restart over a big cluster)
        saves a numpy row addition per pod. The sums are those of adding each pod as it comes (the
        same additions, in the same order); anything else that changes a node's use settles
        first. Nothing may read ``nodes.used`` before ``settle_usage`` (a session settles it)."""
        if self._deferred is None:
            self._deferred = []

    def settle_usage(self, keep_deferring: bool = False) -> None:
        """Add the deferred pods' requests to their nodes' use (and stop deferring, unless
        ``keep_deferring``)."""
        pending = self._deferred
        if pending is None:
            return
        self._deferred = [] if keep_deferring else None
        if pending:
            rows = np.array([vec for _, vec in pending])
            # ufunc.at adds unbuffered, one index after the other: row by row, in the order the
            # pods came, as ``used[node] += vec`` for each would
            np.add.at(self.nodes.used, np.array([node for node, _ in pending], dtype=np.intp), rows)

    def _occupy(self, task: TaskInfo, node: int) -> None:
        task.node = node
        if self._deferred is not None:
            self._deferred.append((node, task.resreq))
        else:
            self.nodes.used[node] += task.resreq
        self.nodes.put_task(node, task)
        if task.status == _RELEASING:
            self.nodes.releasing[node] += task.resreq

    def _vacate(self, task: TaskInfo) -> None:
        if self._deferred:
            self.settle_usage(keep_deferring=True)
        node = task.node
        self.nodes.used[node] -= task.resreq
        if task.status == _RELEASING:
            self.nodes.releasing[node] -= task.resreq
        self.nodes.take_task(node, task.uid)
        task.node = -1

    def _drop_task(self, task: TaskInfo) -> None:
        if task.node >= 0:
            self._vacate(task)
        job = self.jobs.get(task.job)
        if job is not None:
            job.remove(task)
            if not job.tasks and job.pg is None:
                del self.jobs[job.uid]
                self.jobs_removed += 1
            if job.pg is None:
                self._track_orphan(job)
        self.tasks.pop(task.uid, None)

    def _on_foreign_pod(self, pod: Pod, key: str, node: int, deleted: bool) -> None:
        """A pod of another scheduler (``key`` its key, ``node`` its node's row or -1)."""
        old = self.foreign.pop(key, None)
        if old is not None:
            if self._deferred:
                self.settle_usage(keep_deferring=True)
            self.nodes.used[old[0]] -= old[1]
        if deleted or node < 0 or pod.status.phase in _POD_DONE:
            return
        if _is_model(type(pod)):
            vec = self._vector(pod_requests(pod.spec))
            vec[PODS] = 1.0
        else:  # the Kubernetes store's usage-only pod, which carries its requests
            vec, _ = self._carried_requests_of(pod.requests)  # type: ignore[attr-defined]
        if self._deferred is not None:
            self._deferred.append((node, vec))
        else:
            self.nodes.used[node] += vec
        self.foreign[key] = (node, vec)

    # ------------------------------------------------------------------ decisions
    def bind(self, task: TaskInfo, node_name: str) -> None:
        if self.on_bind is not None:
            self.on_bind(task.uid, node_name)
        else:
            self.decisions.binds.append((task.uid, node_name))

    def evict(self, task: TaskInfo, reason: Eviction) -> None:
        self.decisions.evictions.append((task.uid, reason))

    def take_decisions(self) -> Decisions:
        d, self.decisions = self.decisions, Decisions()
        return d

    # ------------------------------------------------------------------ consistency (tests)
    def check_consistency(self) -> None:
        """Recompute node usage from tasks and compare with the incremental arrays."""
        self.settle_usage(keep_deferring=True)
        n = len(self.nodes)
        used = np.zeros((n, len(self.index)))
        for t in self.tasks.values():
            if t.node >= 0:
                used[t.node] += t.resreq
        for node, vec in self.foreign.values():
            used[node] += vec
        if not np.allclose(used, self.nodes.used[:n], atol=1e-6):
            raise AssertionError("node usage arrays drifted from the tasks placed on them")
        releasing = np.zeros((n, len(self.index)))
        for t in self.tasks.values():
            if t.node >= 0 and t.status == TaskStatus.RELEASING:
                releasing[t.node] += t.resreq
        if not np.allclose(releasing, self.nodes.releasing[:n], atol=1e-6):
            raise AssertionError("node releasing arrays drifted from the releasing tasks placed on them")
        anti = {t.uid for tasks in self.nodes.tasks for t in tasks.values() if t.anti_terms}
        if set(self.nodes.anti) != anti:
            raise AssertionError("the placed tasks with anti-affinity terms drifted from nodes.anti")
        scheduled = [uid for uid, j in self.jobs.items() if j.pg is not None]
        if list(self.scheduled_jobs()) != scheduled:
            raise AssertionError("the jobs with a PodGroup drifted from pg_jobs (or from their order)")
        orphans = {uid for uid, j in self.jobs.items() if j.pg is None and j.allocated_num}
        if set(self.orphans) != orphans or any(self.jobs.get(u) is not j for u, j in self.orphans.items()):
            raise AssertionError("the jobs without a PodGroup that hold resources drifted from orphans")
