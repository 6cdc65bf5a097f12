"""Bound pods read from the API server's protobuf encoding (the scheduler's start-up).

At the scale of Volcano issue #5819 (140,000 bound pods) the initial state of the pod informer
is most of a restart, and most of that is JSON: the API server spends 3.6–4.5 s of CPU encoding
those pods as JSON (240 MB) against 1.7–3.4 s as protobuf (153 MB), and the client decodes the
protobuf (upb, in C) faster than orjson reads the JSON. On a 2-core machine both sides count.

So the scheduler's pod informer streams its initial state of *bound* pods as protobuf, and this
module turns each pod into the dict the server's JSON would have been, for every field the store
reads of a bound pod (the keys, the omitted empty values and the value forms of Kubernetes' JSON:
times as RFC 3339 seconds, quantities as their strings). Everything after that — light pods,
usage-only pods, the whole decode — is the JSON path, unchanged.

The message types are declared here, from the field numbers of the Kubernetes API (core/v1 Pod,
meta/v1 ObjectMeta, WatchEvent and Status, runtime's Unknown envelope), with only the fields the
store reads; upb keeps the others unparsed. A field the store's pod model reads that is not
converted here (affinity, topology spread, resource claims, a scheduling group or workload
reference) is given a placeholder and the pod is marked *partial*: the informer then reads it as
JSON, unless it is another scheduler's pod kept as node usage only, which reads none of those.
What a bound pod's slim form drops anyway (volumes, tolerations, conditions, container images,
owner references...) is not declared at all.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, cast

from . import codec

MAGIC = b"k8s\x00"  # the prefix of an object in Kubernetes' protobuf encoding
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = CONTENT_TYPE + ";stream=watch"
NOT_CONVERTED: dict[str, Any] = {"lavaflow.io/not-converted": True}  # (a partial pod's placeholder)

# message -> (field, number, type): "*" repeated, "map" string map, "qmap" quantity map, and
# "bytes" for a message kept whole (only its presence is read).
_MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    # runtime
    "Unknown": [("typeMeta", 1, "TypeMeta"), ("raw", 2, "bytes")],
    "TypeMeta": [("apiVersion", 1, "string"), ("kind", 2, "string")],
    "RawExtension": [("raw", 1, "bytes")],
    # meta/v1
    "WatchEvent": [("type", 1, "string"), ("object", 2, "RawExtension")],
    "Time": [("seconds", 1, "int64")],
    "Status": [("status", 2, "string"), ("message", 3, "string"), ("reason", 4, "string"), ("code", 6, "int32")],
    "ListMeta": [("resourceVersion", 2, "string"), ("continue", 3, "string")],
    "ObjectMeta": [
        ("name", 1, "string"),
        ("generateName", 2, "string"),
        ("namespace", 3, "string"),
        ("uid", 5, "string"),
        ("resourceVersion", 6, "string"),
        ("generation", 7, "int64"),
        ("creationTimestamp", 8, "Time"),
        ("deletionTimestamp", 9, "Time"),
        ("labels", 11, "map"),
        ("annotations", 12, "map"),
    ],
    # api/resource
    "Quantity": [("string", 1, "string")],
    # core/v1
    "Pod": [("metadata", 1, "ObjectMeta"), ("spec", 2, "PodSpec"), ("status", 3, "PodStatus")],
    "PodSpec": [
        ("containers", 2, "*bytes"),  # (each a Container, read through containers()' memo)
        ("restartPolicy", 3, "string"),
        ("nodeSelector", 7, "map"),
        ("nodeName", 10, "string"),
        ("hostname", 16, "string"),
        ("subdomain", 17, "string"),
        ("affinity", 18, "bytes"),
        ("schedulerName", 19, "string"),
        ("initContainers", 20, "*bytes"),
        ("priorityClassName", 24, "string"),
        ("priority", 25, "int32"),
        ("preemptionPolicy", 31, "string"),
        ("overhead", 32, "qmap"),
        ("topologySpreadConstraints", 33, "*bytes"),
        ("resourceClaims", 39, "*bytes"),
        ("workloadRef", 42, "bytes"),  # (1.35; a tombstoned number from 1.36)
        ("schedulingGroup", 43, "bytes"),
    ],
    "Container": [
        ("name", 1, "string"),
        ("ports", 6, "*ContainerPort"),
        ("resources", 8, "ResourceRequirements"),
        ("restartPolicy", 24, "string"),
    ],
    "ContainerPort": [
        ("name", 1, "string"),
        ("hostPort", 2, "int32"),
        ("containerPort", 3, "int32"),
        ("protocol", 4, "string"),
        ("hostIP", 5, "string"),
    ],
    "ResourceRequirements": [("limits", 1, "qmap"), ("requests", 2, "qmap"), ("claims", 3, "*bytes")],
    "PodStatus": [("phase", 1, "string"), ("message", 3, "string"), ("reason", 4, "string"), ("startTime", 7, "Time")],
}


@functools.cache
def _classes() -> dict[str, Any] | None:
    """The message classes (built once), or None without the protobuf package."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        return None
    F = descriptor_pb2.FieldDescriptorProto
    scalar = {"string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "int64": F.TYPE_INT64, "int32": F.TYPE_INT32}
    fp = descriptor_pb2.FileDescriptorProto(name="lavaflow/kube/pod.proto", package="lavaflow.kube", syntax="proto2")
    for name, fields in _MESSAGES.items():
        msg = fp.message_type.add(name=name)
        for field, number, typ in fields:
            repeated = typ.startswith("*")
            typ = typ.lstrip("*")
            f = msg.field.add(name=field, number=number, label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if typ in ("map", "qmap"):
                entry = msg.nested_type.add(name=field[0].upper() + field[1:] + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
                value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
                if typ == "map":
                    value.type = F.TYPE_STRING
                else:
                    value.type, value.type_name = F.TYPE_MESSAGE, ".lavaflow.kube.Quantity"
                f.label, f.type, f.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f".lavaflow.kube.{name}.{entry.name}"
            elif typ in scalar:
                f.type = scalar[typ]
            else:
                f.type, f.type_name = F.TYPE_MESSAGE, f".lavaflow.kube.{typ}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fp)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"lavaflow.kube.{n}")) for n in _MESSAGES}


def available() -> bool:
    """Whether pods can be read as protobuf here (the protobuf package is installed)."""
    return _classes() is not None


class ProtobufError(ValueError):
    """A frame or an object that does not read as Kubernetes' protobuf."""


class Frames:
    """Splits a protobuf watch stream into its frames (each a 4-byte big-endian length, then
    that many bytes of one WatchEvent)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        out = []
        pos, end = 0, len(buf)
        unpack = struct.unpack_from
        while end - pos >= 4:
            (n,) = unpack(">I", buf, pos)
            if end - pos - 4 < n:
                break
            out.append(buf[pos + 4 : pos + 4 + n])
            pos += 4 + n
        self._buf = buf[pos:]
        return out

    @property
    def pending(self) -> int:
        """Bytes of an unfinished frame."""
        return len(self._buf)


def _unwrap(body: bytes, what: str) -> Any:
    """The runtime.Unknown envelope of an object in Kubernetes' protobuf (after the k8s prefix)."""
    c = _classes()
    assert c is not None
    if not body.startswith(MAGIC):
        raise ProtobufError(f"{what} lacks the k8s protobuf prefix")
    try:
        return c["Unknown"].FromString(body[len(MAGIC) :])
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ProtobufError(f"{what} does not decode: {exc}") from exc


def event(frame: bytes) -> tuple[str, str, bytes]:
    """A watch frame's event type, its object's kind and the object's own bytes."""
    c = _classes()
    assert c is not None
    try:
        ev = c["WatchEvent"].FromString(frame)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ProtobufError(f"a watch event does not decode: {exc}") from exc
    unknown = _unwrap(ev.object.raw, "a watch event's object")
    return ev.type, unknown.typeMeta.kind, unknown.raw


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtobufError("a varint runs past the end of the message")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def _fields(buf: bytes, start: int = 0, end: int | None = None) -> Any:
    """(number, start, end) of each length-delimited field of the message in ``buf[start:end]``
    (other wire types are skipped): the top levels of a list are walked without decoding them."""
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise ProtobufError("a field runs past the end of the message")
            yield tag >> 3, pos, pos + n
            pos += n
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ProtobufError(f"wire type {wire} is not read here")


def pod_list(body: bytes) -> tuple[str, str, list[bytes]]:
    """A list answered in protobuf (the k8s prefix, the Unknown envelope, then a PodList): its
    resourceVersion, continue token and the bytes of each item. The envelope and the list are
    walked by hand, so that the list's bytes are not copied whole."""
    c = _classes()
    assert c is not None
    if not body.startswith(MAGIC):
        raise ProtobufError("a list lacks the k8s protobuf prefix")
    raw = (0, 0)
    for number, a, b in _fields(body, len(MAGIC)):
        if number == 2:  # (1 is the TypeMeta)
            raw = (a, b)
    rv = cont = ""
    items = []
    for number, a, b in _fields(body, *raw):
        if number == 2:
            items.append(body[a:b])
        elif number == 1:
            meta = c["ListMeta"].FromString(body[a:b])
            rv, cont = meta.resourceVersion, getattr(meta, "continue")
    return rv, cont, items


def error_status(body: bytes) -> dict[str, Any]:
    """An error's answer in protobuf (the k8s prefix, the Unknown envelope, a Status) as its JSON
    would read."""
    raw = _unwrap(body, "an error answer").raw
    try:
        return status(raw)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ProtobufError(f"an error status does not decode: {exc}") from exc


def status(raw: bytes) -> dict[str, Any]:
    """An ERROR event's Status as its JSON would read."""
    c = _classes()
    assert c is not None
    s = c["Status"].FromString(raw)
    return {"status": s.status, "message": s.message, "reason": s.reason, "code": s.code}


def bookmark(raw: bytes) -> tuple[str, dict[str, str]]:
    """A BOOKMARK's resourceVersion and annotations."""
    c = _classes()
    assert c is not None
    m = c["Pod"].FromString(raw).metadata
    return m.resourceVersion, dict(m.annotations)


@functools.lru_cache(maxsize=4096)
def _time(seconds: int) -> str:
    return cast(str, codec.format_time(seconds))  # (the pods of a cluster share their seconds)


def _quantities(m: Any) -> dict[str, str]:
    return {k: q.string for k, q in m.items()}


_container_memo: dict[Any, tuple[list[dict[str, Any]], bool]] = {}
_KEPT = 4096  # distinct container lists remembered (the pods of a template share theirs)


def containers(blobs: Any) -> tuple[list[dict[str, Any]], bool]:
    """A pod's containers (each a Container's bytes) as their JSON would read for what the
    store keeps of them (name, resources, restartPolicy, ports), and whether a part is not
    converted. Pods of one template have the same bytes: the answer is remembered by them, and
    the pods share the list (nothing changes a raw pod in place; the store copies what it cuts)."""
    key = blobs[0] if len(blobs) == 1 else tuple(blobs)
    hit = _container_memo.get(key)
    if hit is not None:
        return hit
    cls = _classes()["Container"]  # type: ignore[index]
    out = []
    partial = False
    for blob in blobs:
        c = cls.FromString(blob)
        r = c.resources
        res: dict[str, Any] = {}
        if r.limits:
            res["limits"] = _quantities(r.limits)
        if r.requests:
            res["requests"] = _quantities(r.requests)
        if r.claims:
            res["claims"] = [NOT_CONVERTED]
            partial = True
        d: dict[str, Any] = {"name": c.name}
        if c.ports:
            ports = []
            for p in c.ports:
                pd: dict[str, Any] = {}
                if p.name:
                    pd["name"] = p.name
                if p.hostPort:
                    pd["hostPort"] = p.hostPort
                pd["containerPort"] = p.containerPort
                if p.protocol:
                    pd["protocol"] = p.protocol
                if p.hostIP:
                    pd["hostIP"] = p.hostIP
                ports.append(pd)
            d["ports"] = ports
        d["resources"] = res
        if c.HasField("restartPolicy"):
            d["restartPolicy"] = c.restartPolicy
        out.append(d)
    if len(_container_memo) >= _KEPT:
        _container_memo.clear()
    _container_memo[key] = hit = (out, partial)
    return hit


def message(raw: bytes) -> Any:
    """A pod's bytes (inside the Unknown envelope) as the Pod message declared here."""
    c = _classes()
    assert c is not None
    try:
        return c["Pod"].FromString(raw)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise ProtobufError(f"a pod does not decode: {exc}") from exc


def time_of(t: Any) -> str | None:
    """A meta/v1 Time message as its JSON reads (None for the zero time)."""
    return _time(t.seconds) if t.HasField("seconds") else None


def pod(raw: bytes) -> tuple[dict[str, Any], bool]:
    """A pod's bytes (inside the Unknown envelope) as the dict its JSON would give for all the
    store reads of a bound pod, and whether it is partial (see the module)."""
    return pod_of(message(raw))


def pod_of(p: Any) -> tuple[dict[str, Any], bool]:
    """``pod`` of a Pod message already parsed."""
    m, s, st = p.metadata, p.spec, p.status
    partial = False

    meta: dict[str, Any] = {}
    for key in ("name", "generateName", "namespace", "uid", "resourceVersion"):
        v = getattr(m, key)
        if v:  # (plain strings: omitted from the JSON when empty)
            meta[key] = v
    if m.generation:
        meta["generation"] = m.generation
    meta["creationTimestamp"] = time_of(m.creationTimestamp)
    if m.HasField("deletionTimestamp"):
        meta["deletionTimestamp"] = time_of(m.deletionTimestamp)
    if m.labels:
        meta["labels"] = dict(m.labels)
    if m.annotations:
        meta["annotations"] = dict(m.annotations)

    spec: dict[str, Any] = {}
    for key in ("restartPolicy", "nodeName", "hostname", "subdomain", "schedulerName", "priorityClassName"):
        v = getattr(s, key)
        if v:
            spec[key] = v
    if s.nodeSelector:
        spec["nodeSelector"] = dict(s.nodeSelector)
    if s.HasField("priority"):
        spec["priority"] = s.priority
    if s.HasField("preemptionPolicy"):
        spec["preemptionPolicy"] = s.preemptionPolicy
    if s.overhead:
        spec["overhead"] = _quantities(s.overhead)
    spec["containers"], part = containers(s.containers)
    partial |= part
    if s.initContainers:
        spec["initContainers"], part = containers(s.initContainers)
        partial |= part
    for key in ("affinity", "workloadRef", "schedulingGroup"):
        if s.HasField(key):
            spec[key] = NOT_CONVERTED
            partial = True
    for key in ("topologySpreadConstraints", "resourceClaims"):
        if getattr(s, key):
            spec[key] = [NOT_CONVERTED]
            partial = True

    status: dict[str, Any] = {}
    if st.phase:
        status["phase"] = st.phase
    if st.HasField("startTime"):
        status["startTime"] = time_of(st.startTime)
    if st.reason:
        status["reason"] = st.reason
    if st.message:
        status["message"] = st.message
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}, partial
