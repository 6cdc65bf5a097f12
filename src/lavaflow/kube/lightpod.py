"""Pods of ours bound to a node, read straight from their JSON.

On a restart the scheduler reads every pod it bound before: at the scale of Volcano issue #5819,
~87,000 of them, each validated into a pydantic Pod (~30 µs of CPU apiece, most of the time
before the first cycle). Of a bound pod the cache reads a handful of scalars (name, node, phase,
priority, labels, annotations...) and its request vector; plugins read more of it only now and
then (its affinity, host ports, containers...).

``light_pod(raw)`` keeps such a pod as a ``LightPod`` when it can tell, by the types of the JSON
values alone, that the full decode would succeed: the fields the cache reads are taken from the
JSON as the model would hold them, and the requests come from a memo keyed by the content of the
containers (pods of one template share it). Anything else read of it (``pod.spec.containers``,
``pod.model_dump()``...) decodes the whole model once, from the same parts of the JSON that
``slim_pod`` keeps, so it reads exactly as the pod read whole would. Whatever is not plainly of its
type (a number as a string, an unknown quantity, a field given by its Python name...) sends the pod
down the whole decode, which reports it and skips it as before.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ValidationError

from ..api.core import Pod, PodPhase, PodSpec
from ..api.kinds import kind_info
from ..api.meta import ObjectKeys, ObjectMeta
from ..api.selectors import pod_requests
from ..api.volcano import GROUP_NAME_ANNOTATION, VOLCANO_GROUP_NAME_ANNOTATION
from ..api.x_k8s_podgroup import POD_GROUP_LABEL
from . import codec, protopod
from .compact import compact

_POD = kind_info("Pod")
# The pod phases as plain strings (.value): what a light or usage-only pod keeps is its document's.
_PHASES = frozenset(p.value for p in PodPhase)
_PENDING = PodPhase.PENDING.value  # (the phase of a pod whose status has none)
_KEPT = 4096  # request memo entries (a cluster has a few hundred pod templates)


def _keys(cls: type[BaseModel]) -> frozenset[str]:
    """Every key of a dict that ``cls`` reads: each field's name and its alias."""
    out: set[str] = set()
    for name, info in cls.model_fields.items():
        out.add(name)
        if info.alias:
            out.add(info.alias)
        if isinstance(info.validation_alias, str):
            out.add(info.validation_alias)
    return frozenset(out)


# ------------------------------------------------------------------ requests memo
def _frozen(v: Any) -> Any:
    """A hashable image of a JSON value that tells apart what validates differently (1, 1.0,
    True and "1" are four keys)."""
    t = type(v)
    if t is str:
        return v
    if t is dict:
        return (dict, *[(_frozen(k), _frozen(x)) for k, x in v.items()])
    if t is list:
        return (list, *[_frozen(x) for x in v])
    return (t, v)


try:
    import orjson

    def _memo_key(part: dict[str, Any], /) -> Any:
        """The JSON text of ``part`` (what JSON cannot hold raises TypeError), or None when it has a
        null: a float that is not finite is written as one too, and validates otherwise."""
        key = orjson.dumps(part)
        return None if b"null" in key else key

except ImportError:  # pragma: no cover - the kube extra installs orjson
    _memo_key = _frozen


_USAGE_KEEP = ("name", "resources", "restartPolicy")
# What slim_pod (kube/slim.py) keeps of a pod's containers and drops of its metadata (here, since
# slim imports this module): a light pod is decoded from exactly those parts.
CONTAINER_KEEP = ("name", "resources", "restartPolicy", "ports")
META_DROP = frozenset(("managedFields", "ownerReferences", "finalizers"))
# keep -> JSON of a pod's request parts -> (their requests or None, the parts cut to keep)
_memos: dict[tuple[str, ...], dict[Any, tuple[dict[str, float] | None, dict[str, Any]]]] = {
    _USAGE_KEEP: {},
    CONTAINER_KEEP: {},
}
_REQUEST_PARTS = ("overhead", "containers", "initContainers")  # (in the order the parts are cut)
_INVALID = object()


def spec_requests(spec: dict[str, Any], keep: tuple[str, ...]) -> tuple[Any, dict[str, Any]]:
    """What ``pod_requests`` gives for the containers (each cut to the keys ``keep``), init
    containers and overhead of a pod's JSON ``spec``, or ``_INVALID`` when those parts do not
    validate as a PodSpec's; with the parts themselves (the containers cut). Pods made from one
    template share both: they are kept by the content of those parts as given (what the cut
    containers are follows from it), so a pod whose template was seen is neither cut nor read."""
    given = {k: spec[k] for k in _REQUEST_PARTS if k in spec}
    memo = _memos[keep]
    try:
        memo_key = _memo_key(given)
    except TypeError:  # not JSON: validated each time
        memo_key = None
    hit = None if memo_key is None else memo.get(memo_key)
    if hit is not None:
        return (_INVALID if hit[0] is None else hit[0]), hit[1]
    part: dict[str, Any] = {}
    for key, value in given.items():
        if key == "overhead":
            part[key] = value
        else:
            part[key] = [{k: c[k] for k in keep if k in c} if isinstance(c, dict) else c for c in value or []]
    try:
        requests: dict[str, float] | None = pod_requests(PodSpec.model_validate(part))
    except (ValidationError, ValueError, ArithmeticError):
        requests = None
    if memo_key is not None:
        if len(memo) >= _KEPT:
            memo.clear()
        memo[memo_key] = (requests, part)
    return (_INVALID if requests is None else requests), part


# ------------------------------------------------------------------ light pods
_META_KEYS = _keys(ObjectMeta)
_SPEC_KEYS = _keys(PodSpec)
_POD_KEYS = _keys(Pod)
# keys slim_pod drops (so the whole decode never sees them) from a bound pod's parts
_SPEC_DROPPED = frozenset(("volumes", "tolerations"))
_NONE = type(None)
_ANY: frozenset[type] = frozenset((object,))  # (compared by identity): any value reads
_REFUSE: frozenset[type] = frozenset()  # no value: the pod is read whole


def _table(keys: frozenset[str], dropped: frozenset[str], types: dict[str, frozenset[type]]) -> dict[str, Any]:
    """key -> the types its value may have (``_ANY``: any) for every key the model reads and
    slim_pod keeps; a key the model reads that is not in ``types`` refuses the pod."""
    out: dict[str, Any] = dict.fromkeys(keys - dropped, _REFUSE)
    out.update(types)
    return out


_S: frozenset[type] = frozenset((str,))
_SN: frozenset[type] = frozenset((str, _NONE))
_IN: frozenset[type] = frozenset((int, _NONE))
_META = _table(
    _META_KEYS,
    META_DROP,
    {
        "name": _S,
        "uid": _S,
        "namespace": _SN,
        "resourceVersion": _SN,
        "generateName": _SN,
        "generation": _IN,
        "labels": _ANY,  # (checked before)
        "annotations": _ANY,
        "creationTimestamp": _ANY,
        "deletionTimestamp": _ANY,
    },
)
_SPEC = _table(
    _SPEC_KEYS,
    _SPEC_DROPPED,
    {
        "nodeName": _S,  # (checked before)
        "schedulerName": _SN,
        "priorityClassName": _SN,
        "preemptionPolicy": _SN,
        "restartPolicy": _SN,
        "hostname": _SN,
        "subdomain": _SN,
        "priority": _IN,
        "nodeSelector": _ANY,  # (checked after)
        "containers": _ANY,  # (through the requests memo)
        "initContainers": _ANY,
        "overhead": _ANY,
        # what a light pod is known not to have
        "affinity": frozenset((_NONE,)),
        "resourceClaims": frozenset((_NONE,)),
        "workloadRef": frozenset((_NONE,)),
        "schedulingGroup": frozenset((_NONE,)),
    },
)


# the status keys slim_pod keeps of a bound pod (a phase must also be one of _PHASES)
_STATUS: dict[str, Any] = {"phase": _S, "startTime": _ANY, "reason": _SN, "message": _SN}
_Plan = tuple[tuple[str, ...], tuple[tuple[str, frozenset[type]], ...]]
_META_PLANS: dict[tuple[str, ...], _Plan | None] = {}
_SPEC_PLANS: dict[tuple[str, ...], _Plan | None] = {}
_STATUS_PLANS: dict[tuple[str, ...], _Plan | None] = {}
_PLANS_KEPT = 1024  # key shapes remembered per part (the pods of a cluster come in a handful)


def _plan(shape: tuple[str, ...], table: dict[str, Any]) -> _Plan | None:
    """For a dict with the keys ``shape`` (in order): the keys the model reads, and those of them
    whose value's type must be checked with the types allowed; None when a key is there that
    refuses the pod whatever its value."""
    kept: list[str] = []
    checks: list[tuple[str, frozenset[type]]] = []
    for k in shape:
        types = table.get(k)
        if types is None:
            continue
        if types is _REFUSE:
            return None
        kept.append(k)
        if types is not _ANY:
            checks.append((k, types))
    return tuple(kept), tuple(checks)


def _plain(
    d: dict[str, Any], table: dict[str, Any], plans: dict[tuple[str, ...], _Plan | None]
) -> dict[str, Any] | None:
    """The keys of ``d`` the model reads (those of ``table``), or None when one of their values is
    not of a type ``table`` allows for it. What to keep and check is worked out once per shape of
    keys (``plans``): a pod's metadata and spec come in a few shapes across a cluster."""
    shape = tuple(d)
    plan = plans.get(shape, _INVALID)
    if plan is _INVALID:
        if len(plans) >= _PLANS_KEPT:
            plans.clear()
        plan = plans[shape] = _plan(shape, table)
    if plan is None:
        return None
    kept, checks = cast(_Plan, plan)  # (not _INVALID: replaced above)
    for k, types in checks:
        if type(d[k]) not in types:
            return None
    return {k: d[k] for k in kept}


def _str_map(v: Any) -> bool:
    if type(v) is not dict:
        return False
    for k, x in v.items():
        if type(k) is not str or type(x) is not str:
            return False
    return True


class _Fallback:
    """Reads what the light object does not hold from the pod's whole model (decoded once)."""

    __slots__ = ()
    _part: str
    _pod: LightPod  # (a slot of each subclass)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            if name.startswith("__") and not name.startswith("__pydantic"):
                raise AttributeError(name)
            if name in ("_pod", "_part"):
                raise AttributeError(name)
        return getattr(getattr(self._pod.full(), self._part), name)


def read_meta(target: Any, meta: dict[str, Any]) -> None:
    """Set the metadata scalars the scheduler's cache reads (name, namespace, uid,
    resourceVersion, creation and deletion times) on ``target`` from a pod's raw metadata: the
    light pods' and the usage-only pods' metadata alike."""
    target.name = meta.get("name", "")
    target.namespace = meta.get("namespace")
    target.uid = meta.get("uid", "")
    target.resource_version = meta.get("resourceVersion")
    created, deleted = meta.get("creationTimestamp"), meta.get("deletionTimestamp")
    target.creation_timestamp = None if created is None else codec.parse_time(created)
    target.deletion_timestamp = None if deleted is None else codec.parse_time(deleted)  # (mostly None)


class LightMeta(_Fallback):
    __slots__ = (
        "_pod",
        "name",
        "namespace",
        "uid",
        "resource_version",
        "creation_timestamp",
        "deletion_timestamp",
        "labels",
        "annotations",
    )
    _part = "metadata"
    name: str
    namespace: str | None
    uid: str
    resource_version: str | None
    creation_timestamp: Any  # (as codec.parse_time reads it, and ObjectMeta holds it)
    deletion_timestamp: Any
    labels: dict[str, str]
    annotations: dict[str, str]


class LightSpec(_Fallback):
    __slots__ = (
        "_pod",
        "node_name",
        "scheduler_name",
        "priority",
        "priority_class_name",
        "preemption_policy",
        "node_selector",
    )
    _part = "spec"
    node_name: str
    scheduler_name: str | None
    priority: int | None
    priority_class_name: str | None
    preemption_policy: str | None
    node_selector: dict[str, str]
    # what a light pod is known not to have (anything else makes it a whole pod)
    affinity = None
    workload_ref = None
    scheduling_group = None

    @property
    def tolerations(self) -> list[Any]:
        return []  # slim_pod drops a bound pod's tolerations


class LightStatus(_Fallback):
    __slots__ = ("_pod", "phase", "start_time", "reason", "message")
    _part = "status"
    phase: str
    start_time: Any  # (as codec.parse_time reads it, and PodStatus holds it)
    reason: str | None
    message: str | None
    exit_code = None  # what the store keeps of a pod's status has no container statuses

    @property
    def conditions(self) -> list[Any]:
        return []  # slim_pod drops a bound pod's conditions


class LightPod(ObjectKeys):
    """A bound pod of ours as the scheduler keeps it (see the module): the scalars the cache reads,
    its requests (shared by the pods of its template), and the parts of its JSON the whole model is
    decoded from when anything else of it is read."""

    __slots__ = ("metadata", "spec", "status", "requests", "_raw", "_full")
    kind = "Pod"
    namespaced = True
    metadata: LightMeta
    spec: LightSpec
    status: LightStatus

    def __init__(self, raw: dict[str, Any] | bytes, requests: dict[str, float]) -> None:
        self._raw: dict[str, Any] | bytes | None = raw  # (bytes: the pod in protobuf, see protopod)
        self._full: Pod | None = None
        self.requests = requests

    def full(self) -> Pod:
        """The whole model (decoded on first use, exactly as the store decodes a pod read whole)."""
        full = self._full
        if full is None:
            raw = self._raw
            if type(raw) is bytes:
                raw = protopod.pod(raw)[0]
            full = codec.decode(_POD, raw)  # type: ignore[arg-type]
            if full is None:  # light_pod checked that it reads: a bug if not
                raise RuntimeError(f"light pod {self.key} does not decode")
            compact(full)
            self._full = full
            self._raw = None
        return full

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and not name.startswith("__pydantic"):
            raise AttributeError(name)
        if name in ("_raw", "_full"):
            raise AttributeError(name)
        return getattr(self.full(), name)

    def __repr__(self) -> str:
        return f"LightPod({self.key!r})"


def light_pod(raw: dict[str, Any]) -> LightPod | None:
    """``raw`` (a pod of ours, as listed or watched) as a LightPod, or None when it must be read
    whole: not bound, not in a Volcano PodGroup, naming a group of another gang API, or carrying
    anything whose decode this cannot vouch for."""
    meta, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status", {})
    if type(meta) is not dict or type(spec) is not dict or type(status) is not dict:
        return None
    node_name = spec.get("nodeName")
    if type(node_name) is not str or not node_name:
        return None
    labels = meta.get("labels", {})
    annotations = meta.get("annotations", {})
    if not _str_map(labels) or not _str_map(annotations):
        return None
    if (
        GROUP_NAME_ANNOTATION not in annotations
        or VOLCANO_GROUP_NAME_ANNOTATION in annotations
        or POD_GROUP_LABEL in labels
    ):
        return None
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k in ("metadata", "spec", "status"):
            continue
        if k in _POD_KEYS:
            if k not in ("apiVersion", "kind") or type(v) is not str:
                return None
            out[k] = v
    # every key the model reads must be plainly of its type
    m = _plain(meta, _META, _META_PLANS)
    s = _plain(spec, _SPEC, _SPEC_PLANS)
    if m is None or s is None:
        return None
    if "nodeSelector" in s and not _str_map(s["nodeSelector"]):
        return None
    for k in ("containers", "initContainers"):
        if k in s:
            for c in s[k] or ():
                if type(c) is not dict:
                    return None
    requests, part = spec_requests(spec, CONTAINER_KEEP)
    if requests is _INVALID:
        return None
    s.update(part)  # the containers as slim_pod cuts them
    st = _plain(status, _STATUS, _STATUS_PLANS)  # what slim_pod keeps of a bound pod's status
    if st is None or ("phase" in st and st["phase"] not in _PHASES):
        return None
    out["metadata"] = m
    out["spec"] = s
    if "status" in raw:
        out["status"] = st

    pod = LightPod(out, requests)
    lm = LightMeta()
    lm._pod = pod
    read_meta(lm, m)
    lm.labels = labels if "labels" in m else {}
    lm.annotations = annotations if "annotations" in m else {}
    ls = LightSpec()
    ls._pod = pod
    ls.node_name = node_name
    ls.scheduler_name = s.get("schedulerName")
    ls.priority = s.get("priority")
    ls.priority_class_name = s.get("priorityClassName")
    ls.preemption_policy = s.get("preemptionPolicy")
    ls.node_selector = s.get("nodeSelector", {})
    lst = LightStatus()
    lst._pod = pod
    lst.phase = st.get("phase", _PENDING)
    started = st.get("startTime")
    lst.start_time = None if started is None else codec.parse_time(started)
    lst.reason = st.get("reason")
    lst.message = st.get("message")
    pod.metadata = lm
    pod.spec = ls
    pod.status = lst
    return pod
