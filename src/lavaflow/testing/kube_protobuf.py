"""Pods, Statuses and watch frames in Kubernetes' protobuf encoding, for tests and the fake API
server (``lavaflow.kube.protopod`` reads them).

Written by hand from the wire format, not through ``protopod``'s message classes, so that a test
of the reader is not the reader checking itself. It encodes as the API server's generated
marshalling does: a field that is not a pointer in the Go types (a plain string, an int, an
embedded struct such as a Time) is always written, empty or zero when the JSON omits it; a
pointer, a list or a map only when the JSON has it. It knows the fields the reader reads and a
few it must skip (owner references, tolerations, conditions, volumes...); anything else of the
JSON is left out. A message the reader only checks for (an affinity...) is written as an opaque
message holding its JSON.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from ..kube.codec import parse_time

MAGIC = b"k8s\x00"


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 as two's complement (ten bytes)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def _int(number: int, value: int) -> bytes:
    return _tag(number, 0) + _varint(int(value))


def _time(value: Any) -> bytes:
    """A meta/v1 Time (seconds only, as the server writes it); empty for the zero time."""
    if value is None:
        return b""
    t = parse_time(value)
    return _int(1, int(t))


# message -> [(JSON key, field number, kind)]; kinds: "s" a plain string (always written), "s?" a
# pointer to one, "i" a plain int, "i?" a pointer to one, "b?" a pointer to a bool, "t" a plain Time,
# "t?" a pointer to one, "map" a string map, "qmap" a quantity map, "*s" strings, "m:Name" a plain
# struct, "m?:Name" a pointer to one, "*m:Name" a list of them, "opaque?" / "*opaque" a message of
# any content (its JSON, written as field 1).
SCHEMA: dict[str, list[tuple[str, int, str]]] = {
    "Pod": [("metadata", 1, "m:ObjectMeta"), ("spec", 2, "m:PodSpec"), ("status", 3, "m:PodStatus")],
    "ObjectMeta": [
        ("name", 1, "s"),
        ("generateName", 2, "s"),
        ("namespace", 3, "s"),
        ("selfLink", 4, "s"),
        ("uid", 5, "s"),
        ("resourceVersion", 6, "s"),
        ("generation", 7, "i"),
        ("creationTimestamp", 8, "t"),
        ("deletionTimestamp", 9, "t?"),
        ("deletionGracePeriodSeconds", 10, "i?"),
        ("labels", 11, "map"),
        ("annotations", 12, "map"),
        ("ownerReferences", 13, "*m:OwnerReference"),
        ("finalizers", 14, "*s"),
        ("managedFields", 17, "*opaque"),
    ],
    "OwnerReference": [
        ("kind", 1, "s"),
        ("name", 3, "s"),
        ("uid", 4, "s"),
        ("apiVersion", 5, "s"),
        ("controller", 6, "b?"),
        ("blockOwnerDeletion", 7, "b?"),
    ],
    "PodSpec": [
        ("volumes", 1, "*opaque"),
        ("containers", 2, "*m:Container"),
        ("restartPolicy", 3, "s"),
        ("terminationGracePeriodSeconds", 4, "i?"),
        ("dnsPolicy", 6, "s"),
        ("nodeSelector", 7, "map"),
        ("serviceAccountName", 8, "s"),
        ("serviceAccount", 9, "s"),
        ("nodeName", 10, "s"),
        ("hostNetwork", 11, "b?"),
        ("securityContext", 14, "opaque?"),
        ("hostname", 16, "s"),
        ("subdomain", 17, "s"),
        ("affinity", 18, "opaque?"),
        ("schedulerName", 19, "s"),
        ("initContainers", 20, "*m:Container"),
        ("tolerations", 22, "*m:Toleration"),
        ("priorityClassName", 24, "s"),
        ("priority", 25, "i?"),
        ("enableServiceLinks", 30, "b?"),
        ("preemptionPolicy", 31, "s?"),
        ("overhead", 32, "qmap"),
        ("topologySpreadConstraints", 33, "*opaque"),
        ("schedulingGates", 38, "*opaque"),
        ("resourceClaims", 39, "*opaque"),
        ("workloadRef", 42, "opaque?"),
        ("schedulingGroup", 43, "opaque?"),
    ],
    "Container": [
        ("name", 1, "s"),
        ("image", 2, "s"),
        ("command", 3, "*s"),
        ("args", 4, "*s"),
        ("ports", 6, "*m:ContainerPort"),
        ("env", 7, "*opaque"),
        ("resources", 8, "m:ResourceRequirements"),
        ("terminationMessagePath", 13, "s"),
        ("imagePullPolicy", 14, "s"),
        ("restartPolicy", 24, "s?"),
    ],
    "ContainerPort": [
        ("name", 1, "s"),
        ("hostPort", 2, "i"),
        ("containerPort", 3, "i"),
        ("protocol", 4, "s"),
        ("hostIP", 5, "s"),
    ],
    "ResourceRequirements": [("limits", 1, "qmap"), ("requests", 2, "qmap"), ("claims", 3, "*opaque")],
    "Toleration": [
        ("key", 1, "s"),
        ("operator", 2, "s"),
        ("value", 3, "s"),
        ("effect", 4, "s"),
        ("tolerationSeconds", 5, "i?"),
    ],
    "PodStatus": [
        ("phase", 1, "s"),
        ("conditions", 2, "*m:PodCondition"),
        ("message", 3, "s"),
        ("reason", 4, "s"),
        ("hostIP", 5, "s"),
        ("podIP", 6, "s"),
        ("startTime", 7, "t?"),
        ("qosClass", 9, "s"),
        ("nominatedNodeName", 11, "s"),
    ],
    "PodCondition": [
        ("type", 1, "s"),
        ("status", 2, "s"),
        ("lastProbeTime", 3, "t"),
        ("lastTransitionTime", 4, "t"),
        ("reason", 5, "s"),
        ("message", 6, "s"),
    ],
    "Status": [("status", 2, "s"), ("message", 3, "s"), ("reason", 4, "s"), ("code", 6, "i")],
    "ListMeta": [("resourceVersion", 2, "s")],
}


def encode(message: str, obj: dict[str, Any] | None) -> bytes:
    """``obj`` (a JSON object of the type ``message``) in protobuf, as the API server writes it."""
    obj = obj or {}
    out = bytearray()
    for key, number, kind in SCHEMA[message]:
        v = obj.get(key)
        if kind == "s":
            out += _bytes(number, str(v or "").encode())
        elif kind == "s?":
            if key in obj:
                out += _bytes(number, str(v or "").encode())
        elif kind == "i":
            out += _int(number, v or 0)
        elif kind in ("i?", "b?"):
            if v is not None:
                out += _int(number, int(v))
        elif kind == "t":
            out += _bytes(number, _time(v))
        elif kind == "t?":
            if key in obj:
                out += _bytes(number, _time(v))
        elif kind in ("map", "qmap"):
            for k, x in (v or {}).items():
                value = _bytes(1, str(x).encode()) if kind == "qmap" else str(x).encode()
                out += _bytes(number, _bytes(1, str(k).encode()) + _bytes(2, value))
        elif kind == "*s":
            for x in v or ():
                out += _bytes(number, str(x).encode())
        elif kind == "opaque?":
            if v is not None:
                out += _bytes(number, _bytes(1, json.dumps(v, sort_keys=True).encode()))
        elif kind == "*opaque":
            for x in v or ():
                out += _bytes(number, _bytes(1, json.dumps(x, sort_keys=True).encode()))
        elif kind.startswith("m:"):
            out += _bytes(number, encode(kind[2:], v))
        elif kind.startswith("m?:"):
            if v is not None:
                out += _bytes(number, encode(kind[3:], v))
        elif kind.startswith("*m:"):
            for x in v or ():
                out += _bytes(number, encode(kind[3:], x))
        else:  # pragma: no cover - a typo in SCHEMA
            raise ValueError(f"unknown kind {kind!r}")
    return bytes(out)


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """An object's bytes with the k8s prefix and the runtime.Unknown envelope naming its type."""
    type_meta = _bytes(1, api_version.encode()) + _bytes(2, kind.encode())
    return MAGIC + _bytes(1, type_meta) + _bytes(2, raw)


def object_bytes(obj: dict[str, Any]) -> bytes:
    """A pod (or a Status) as the API server sends it in protobuf, envelope included."""
    kind = obj.get("kind") or "Pod"
    message = "Status" if kind == "Status" else "Pod"
    return envelope(obj.get("apiVersion") or "v1", kind, encode(message, obj))


def watch_frame(etype: str, obj: dict[str, Any]) -> bytes:
    """One frame of a protobuf watch stream: the length, then a WatchEvent of ``obj``."""
    event = _bytes(1, etype.encode()) + _bytes(2, _bytes(1, object_bytes(obj)))
    return struct.pack(">I", len(event)) + event


def pod_list_bytes(items: list[dict[str, Any]], resource_version: str, cont: str = "") -> bytes:
    """A PodList as the API server answers a list in protobuf, envelope included."""
    meta = _bytes(2, resource_version.encode()) + (_bytes(3, cont.encode()) if cont else b"")
    body = _bytes(1, meta) + b"".join(_bytes(2, encode("Pod", it)) for it in items)
    return envelope("v1", "PodList", body)
