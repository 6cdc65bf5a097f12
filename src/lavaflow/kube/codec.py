"""Wire format <-> lavaflow's typed objects.

lavaflow's models keep only the fields scheduling and the controllers read
(unknown fields are ignored), so an object read from the API server is kept
*raw* next to its model, and writes are three-way merges: the change a
controller made to the model (old model dump -> new model dump) is applied to
the raw object, so fields lavaflow does not model (images, volumes, probes...)
survive every update.

Timestamps are float seconds in the models (as in the simulator) and RFC 3339
strings on the wire.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
from typing import Any, cast

from pydantic import ValidationError

from ..api.kinds import Kind

log = logging.getLogger("lavaflow.kube")

TIME_KEYS = frozenset(
    {
        "creationTimestamp",
        "deletionTimestamp",
        "lastTransitionTime",
        "startTime",
        "lastProbeTime",
        "lastUpdateTime",
        "lastHeartbeatTime",
        "completionTime",
    }
)


def parse_time(value: Any) -> Any:
    if isinstance(value, str) and value:
        return _parse_time_str(value)
    return value


@functools.lru_cache(maxsize=4096)
def _parse_time_str(value: str) -> Any:
    # Objects created together share their timestamps (seconds): a whole cluster's list parses
    # each distinct one once.
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return value


def format_time(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _dt.datetime.fromtimestamp(float(value), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def rfc3339(t: float) -> str:
    return cast(str, format_time(t))


def micro_time(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _times_in(obj: Any, depth: int) -> Any:
    """``obj`` (dicts and lists only) with RFC 3339 times turned into floats: a copy along the paths
    that hold one, the same object where nothing changes."""
    if isinstance(obj, dict):
        out = None
        for k, v in obj.items():
            if k in TIME_KEYS:
                nv = parse_time(v)
            elif depth > 0 and isinstance(v, (dict, list)):
                nv = _times_in(v, depth - 1)
            else:
                continue
            if nv is not v:
                if out is None:
                    out = dict(obj)
                out[k] = nv
        return obj if out is None else out
    if isinstance(obj, list):
        items = [_times_in(v, depth) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else items
    return obj


def _times_out(obj: Any) -> Any:
    """A copy of ``obj`` (dicts and lists) with float times turned into RFC 3339 strings."""
    if isinstance(obj, dict):
        return {
            k: (format_time(v) if k in TIME_KEYS else _times_out(v) if isinstance(v, _NESTED) else v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_times_out(v) if isinstance(v, _NESTED) else v for v in obj]
    return obj


_NESTED = (dict, list)  # (only these are walked: a scalar is kept without a call)


def exit_code_of(raw_status: dict[str, Any]) -> int | None:
    for cs in raw_status.get("containerStatuses") or ():
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term and "exitCode" in term:
            return int(term["exitCode"])
    return None


def resource_version(raw: dict[str, Any] | None) -> str | None:
    """The resourceVersion of a raw API object (None for no object, or none given)."""
    if not raw:
        return None
    return (raw.get("metadata") or {}).get("resourceVersion")


def key_of(res: Kind, raw: dict[str, Any]) -> str:
    """The store key of a raw API object: ``namespace/name``, or ``name`` for a cluster-scoped kind."""
    return key_in(res, raw.get("metadata") or {})


def key_in(res: Kind, meta: dict[str, Any]) -> str:
    """``key_of`` from an object's metadata."""
    if res.namespaced:
        return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
    name: str = meta.get("name", "")
    return name


def decode(res: Kind, raw: dict[str, Any]) -> Any | None:
    """The model of a raw API object (None when lavaflow cannot read it)."""
    cls = res.model
    if cls is None:
        return None
    d = dict(raw)
    if "metadata" in d:
        d["metadata"] = _times_in(d["metadata"], 0)
    if isinstance(d.get("status"), dict):
        d["status"] = _times_in(d["status"], 3)
    try:
        obj = cls.model_validate(d)
    except ValidationError as exc:
        meta = raw.get("metadata") or {}
        log.warning(
            "ignoring %s %s/%s: %s", res.kind, meta.get("namespace", ""), meta.get("name", ""), exc.errors()[:3]
        )
        return None
    if res.kind == "Pod" and isinstance(raw.get("status"), dict):
        code = exit_code_of(raw["status"])
        if code is not None:
            obj.status.exit_code = code
    return obj


def encode(obj: Any, res: Kind | None = None) -> dict[str, Any]:
    """The wire form of a model (only the fields lavaflow models)."""
    d: dict[str, Any] = obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    for k, v in d.items():
        # (times are kept as floats in metadata and status only, never in a spec: a pod's spec is
        # most of it, and a Job's pods are encoded one by one)
        if k != "spec" and isinstance(v, (dict, list)):
            d[k] = _times_out(v)
    if res is not None:
        d["apiVersion"] = res.api_version
        d["kind"] = res.api_kind
    meta = d.get("metadata") or {}
    for k in ("uid", "name"):
        if meta.get(k) == "":
            meta.pop(k)
    if not getattr(obj, "namespaced", True):
        meta.pop("namespace", None)
    status = d.get("status")
    if isinstance(status, dict) and type(obj).__name__ == "Pod":
        status.pop("exitCode", None)
    _no_empty_overhead(d)
    spec = d.get("spec")
    if res is not None and res.group.endswith("volcano.sh") and isinstance(spec, dict):
        # Volcano's CRDs hold these names to a DNS pattern, which "" fails: an empty one is left
        # out, as Volcano's Go types leave it (omitempty); lavaflow's models read absent as ""
        for key in _NAMES:
            if spec.get(key) == "":
                del spec[key]
    return d


_NAMES = ("queue", "parent", "priorityClassName")


def _no_empty_overhead(d: Any) -> None:
    """Leave an empty ``overhead`` out of every pod spec in ``d`` (a pod, a pod template, a Job's
    or JobTemplate's tasks): kube-apiserver refuses a pod whose overhead is set at all, ``{}``
    too, without a RuntimeClass that defines one (403 "Pod Overhead set without corresponding
    RuntimeClass defined Overhead"), and a Job that lavaflow wrote would pass it to its pods."""
    if isinstance(d, list):
        for item in d:
            _no_empty_overhead(item)
        return
    if not isinstance(d, dict):
        return
    if d.get("overhead") == {} and "containers" in d:
        del d["overhead"]
    for key in ("spec", "template", "tasks"):
        if key in d:
            _no_empty_overhead(d[key])


def merge3(base: Any, old: Any, new: Any) -> Any:
    """Apply the change old -> new onto base, keeping what base has beyond old.

    Maps merge key by key; lists of maps of the same length merge element by
    element; anything else that changed is replaced.
    """
    if isinstance(new, dict) and isinstance(old, dict) and isinstance(base, dict):
        out = dict(base)
        for k in old.keys() - new.keys():
            out.pop(k, None)
        for k, v in new.items():
            if k in old and old[k] == v:
                continue
            if k in base and k in old:
                out[k] = merge3(base[k], old[k], v)
            else:
                out[k] = v
        return out
    if (
        isinstance(new, list)
        and isinstance(old, list)
        and isinstance(base, list)
        and len(new) == len(old) == len(base)
        and all(isinstance(x, dict) for x in new)
    ):
        return [merge3(b, o, n) for b, o, n in zip(base, old, new)]
    return new


def without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}
