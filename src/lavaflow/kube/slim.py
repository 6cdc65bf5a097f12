"""What the Kubernetes store keeps of an object it is told of.

Every object goes through ``decode_object`` (``codec.decode``, with a fast path for Volcano
PodGroups). A store that keeps no raw JSON (the scheduler's, where memory at 150,000 pods counts)
keeps less: pods and nodes are slimmed to what the scheduler reads first (``SLIM``); a pod of
another scheduler in no gang is kept as node usage only (``UsageOnlyPod``), and one of ours bound
in a Volcano PodGroup as a ``LightPod`` (see lightpod); ``proto_bound_pod`` builds either straight
from a bound pod's protobuf (see protopod), as the informer reads them at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..api.kinds import Kind
from ..api.meta import ObjectKeys
from ..api.volcano import GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION, PodGroup
from ..api.x_k8s_podgroup import POD_GROUP_LABEL
from . import codec, protopod
from .lightpod import (
    _INVALID,
    _PENDING,
    _PHASES,
    _USAGE_KEEP,
    CONTAINER_KEEP,
    META_DROP,
    LightMeta,
    LightPod,
    LightSpec,
    LightStatus,
    light_pod,
    read_meta,
    spec_requests,
)
from .plainpg import volcano_podgroup


def slim_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a pod the scheduler reads (memory at 150,000 pods): metadata without owner
    references, finalizers and managed fields; containers keep only name, resources, restartPolicy
    and ports; status keeps phase, startTime and, while the pod waits for a node, the PodScheduled
    condition. A pod on a node also drops its tolerations: they only choose a node (the static
    predicates and scores of a pending task), and a bound pod never chooses again."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return raw
    out = dict(raw)
    meta = raw.get("metadata")
    if isinstance(meta, dict) and any(k in meta for k in META_DROP):
        out["metadata"] = {k: v for k, v in meta.items() if k not in META_DROP}
    spec = dict(spec)
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [{k: c[k] for k in CONTAINER_KEEP if k in c} for c in spec[key] or []]
    spec.pop("volumes", None)
    bound = bool(spec.get("nodeName"))
    if bound:
        spec.pop("tolerations", None)
    out["spec"] = spec
    status = raw.get("status")
    if isinstance(status, dict):
        out["status"] = {k: status[k] for k in ("phase", "startTime", "reason", "message") if k in status}
        if not bound:
            scheduled = [
                c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "PodScheduled"
            ]
            if scheduled:
                out["status"]["conditions"] = scheduled
    return out


def slim_node(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a node the scheduler reads: a kubelet's status also lists its images, addresses
    and daemon endpoints, and its conditions carry heartbeat times, none of which scheduling needs."""
    status = raw.get("status")
    if not isinstance(status, dict):
        return raw
    out = dict(raw)
    out["status"] = {
        "capacity": status.get("capacity") or {},
        "allocatable": status.get("allocatable") or {},
        "conditions": [
            {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        ],
    }
    return out


SLIM = {"Pod": slim_pod, "Node": slim_node}


def decode_object(res: Kind, raw: dict[str, Any]) -> Any | None:
    """``codec.decode``; a Volcano PodGroup through ``volcano_podgroup`` (the same model, without
    the walk over its times) unless that leaves it to ``codec.decode``."""
    if res.model is PodGroup:
        obj = volcano_podgroup(raw)
        if obj is not None:
            return obj
    return codec.decode(res, raw)


class _UsageMeta:
    __slots__ = ("name", "namespace", "uid", "resource_version", "creation_timestamp", "deletion_timestamp")
    # a usage-only pod carries no gang label or annotation (read-only, shared)
    labels: Mapping[str, str] = MappingProxyType({})
    annotations: Mapping[str, str] = MappingProxyType({})

    def __init__(self, meta: dict[str, Any]) -> None:
        read_meta(self, meta)


class _UsageSpec:
    __slots__ = ("node_name", "scheduler_name")
    workload_ref = None
    scheduling_group = None

    def __init__(self, spec: dict[str, Any]) -> None:
        self.node_name = spec.get("nodeName")
        self.scheduler_name = spec.get("schedulerName")


class _UsageStatus:
    __slots__ = ("phase",)

    def __init__(self, status: Any) -> None:
        self.phase = status.get("phase", _PENDING) if isinstance(status, dict) else _PENDING


class UsageOnlyPod(ObjectKeys):
    """A pod of another scheduler as the scheduler keeps it: where it is, its phase and what it
    requests (the cache adds it to its node's usage and reads nothing else of it). A pydantic Pod
    costs ~7.5 KiB whatever it holds (every defaulted list, dict and field set); this ~0.6 KiB."""

    __slots__ = ("metadata", "spec", "status", "requests")
    kind = "Pod"
    namespaced = True

    def __init__(self, raw: dict[str, Any], requests: dict[str, float]) -> None:
        self.metadata = _UsageMeta(raw["metadata"])
        self.spec = _UsageSpec(raw["spec"])
        self.status = _UsageStatus(raw.get("status"))
        self.requests = requests


def usage_only_pod(raw: dict[str, Any], ours: frozenset[str]) -> UsageOnlyPod | LightPod | None:
    """A pod of another scheduler that belongs to no gang, kept as node usage only (see
    UsageOnlyPod); one of ours bound in a Volcano PodGroup, as a LightPod when it reads plainly
    (see lightpod). None for any other pod, which is read whole: one naming a group of any gang
    API, or one whose resources do not read."""
    spec = raw.get("spec")
    meta = raw.get("metadata")
    if type(spec) is not dict or type(meta) is not dict:
        return None
    if (spec.get("schedulerName") or "default-scheduler") in ours:
        return light_pod(raw)
    if spec.get("workloadRef") is not None or spec.get("schedulingGroup") is not None:
        return None
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if any(k in labels for k in _GANG_LABELS) or any(k in annotations for k in _GANG_ANNOTATIONS):
        return None
    requests, _ = spec_requests(spec, _USAGE_KEEP)
    if requests is _INVALID:
        return None  # the whole decode reports it
    return UsageOnlyPod(raw, requests)


# the gang markers of the three gang APIs (a pod carrying one is read whole, whoever schedules it)
_GANG_LABELS = (POD_GROUP_LABEL,)
_GANG_ANNOTATIONS = (GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION)


# ------------------------------------------------------------------ pods straight from protobuf
_proto_requests_memo: dict[Any, Any] = {}
_PROTO_KEPT = 4096  # request sets remembered (by the bytes of a template's containers)


def _proto_requests(s: Any, keep: tuple[str, ...]) -> Any:
    """What spec_requests gives for the JSON of a pod message's containers, init containers and
    overhead (cut to ``keep``), or _INVALID (also for a part not converted): remembered by their
    bytes, which the pods of one template share."""
    overhead = s.overhead
    key = (
        keep,
        tuple(s.containers),
        tuple(s.initContainers),
        tuple(sorted((k, q.string) for k, q in overhead.items())),
    )
    hit = _proto_requests_memo.get(key)
    if hit is None:
        containers, partial = protopod.containers(s.containers)
        given: dict[str, Any] = {"containers": containers}
        if s.initContainers:
            init, more = protopod.containers(s.initContainers)
            given["initContainers"] = init
            partial |= more
        if overhead:
            given["overhead"] = dict(key[3])
        hit = _INVALID if partial else spec_requests(given, keep)[0]
        if len(_proto_requests_memo) >= _PROTO_KEPT:
            _proto_requests_memo.clear()
        _proto_requests_memo[key] = hit
    return hit


def _proto_meta(target: Any, m: Any) -> None:
    """read_meta from an ObjectMeta message: what it reads of the same pod's JSON."""
    target.name = m.name
    target.namespace = m.namespace or None
    target.uid = m.uid
    target.resource_version = m.resourceVersion or None
    target.creation_timestamp = codec.parse_time(protopod.time_of(m.creationTimestamp))
    target.deletion_timestamp = (
        codec.parse_time(protopod.time_of(m.deletionTimestamp)) if m.HasField("deletionTimestamp") else None
    )


def proto_bound_pod(p: Any, raw: bytes, ours: frozenset[str]) -> UsageOnlyPod | LightPod | None:
    """A bound pod's protobuf (``p``, the Pod message of ``raw``; see protopod) straight as what
    the store keeps of its JSON when that is a UsageOnlyPod or a LightPod (see usage_only_pod),
    with the same values; None when it is neither, or carries a field the message here does not
    convert (the caller then reads it through protopod's dict, or as JSON). A LightPod keeps the
    bytes, and its whole model is decoded from protopod's dict when first read."""
    m, s, st = p.metadata, p.spec, p.status
    node = s.nodeName
    if not node or s.HasField("workloadRef") or s.HasField("schedulingGroup"):
        return None
    labels, annotations = m.labels, m.annotations
    phase = st.phase or _PENDING
    scheduler = s.schedulerName
    if (scheduler or "default-scheduler") in ours:
        if (
            s.HasField("affinity")  # (a light pod has none of these; a usage-only pod reads none)
            or s.topologySpreadConstraints
            or s.resourceClaims
            or GROUP_NAME_ANNOTATION not in annotations
            or VOLCANO_GROUP_NAME_ANNOTATION in annotations
            or POD_GROUP_LABEL in labels
            or phase not in _PHASES
        ):
            return None
        requests = _proto_requests(s, CONTAINER_KEEP)
        if requests is _INVALID:
            return None
        pod = LightPod(raw, requests)
        lm = LightMeta()
        lm._pod = pod
        _proto_meta(lm, m)
        lm.labels = dict(labels)
        lm.annotations = dict(annotations)
        ls = LightSpec()
        ls._pod = pod
        ls.node_name = node
        ls.scheduler_name = scheduler or None
        ls.priority = s.priority if s.HasField("priority") else None
        ls.priority_class_name = s.priorityClassName or None
        ls.preemption_policy = s.preemptionPolicy if s.HasField("preemptionPolicy") else None
        ls.node_selector = dict(s.nodeSelector)
        lst = LightStatus()
        lst._pod = pod
        lst.phase = phase
        lst.start_time = codec.parse_time(protopod.time_of(st.startTime)) if st.HasField("startTime") else None
        lst.reason = st.reason or None
        lst.message = st.message or None
        pod.metadata, pod.spec, pod.status = lm, ls, lst
        return pod
    if any(k in labels for k in _GANG_LABELS) or any(k in annotations for k in _GANG_ANNOTATIONS):
        return None
    requests = _proto_requests(s, _USAGE_KEEP)
    if requests is _INVALID:
        return None
    obj = UsageOnlyPod.__new__(UsageOnlyPod)
    um = _UsageMeta.__new__(_UsageMeta)
    _proto_meta(um, m)
    us = _UsageSpec.__new__(_UsageSpec)
    us.node_name, us.scheduler_name = node, scheduler or None
    ust = _UsageStatus.__new__(_UsageStatus)
    ust.phase = phase
    obj.metadata, obj.spec, obj.status, obj.requests = um, us, ust, requests
    return obj
