"""What kube-apiserver refuses before any webhook sees an object.

Object names and namespaces (DNS-1123), pod specs (containers present and named,
requests and limits not negative, requests within limits), node capacity, PriorityClass
values, and sizes that must fit Kubernetes' int32 fields. These checks are the first
part of every ``admission.validate_*`` (so the webhook applies them too) and
:func:`validate_object` applies them to the kinds no Volcano webhook sees (Nodes,
PriorityClasses, Namespaces, native workloads), so the simulator's loader and the
webhook share one code path.

Each check returns :class:`admission.Problem`-compatible ``(path, message)`` tuples.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

INT32_MAX = 2**31 - 1
#: kube-apiserver: user-defined PriorityClasses may not exceed this (larger values are for system classes).
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"

_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")


_QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
#: kube-apiserver: all annotations of one object together (keys and values) at most 256 KiB.
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
#: resources a ResourceQuota may name without a domain (IsStandardQuotaResourceName)
STANDARD_QUOTA_RESOURCES = frozenset(
    (
        "cpu memory ephemeral-storage requests.cpu requests.memory requests.storage requests.ephemeral-storage "
        "limits.cpu limits.memory limits.ephemeral-storage pods services replicationcontrollers resourcequotas "
        "secrets persistentvolumeclaims configmaps services.nodeports services.loadbalancers"
    ).split()
)
#: counted resources, which come in whole numbers (besides extended and count/* names)
INTEGER_QUOTA_RESOURCES = frozenset(
    "pods services replicationcontrollers resourcequotas secrets configmaps persistentvolumeclaims "
    "services.nodeports services.loadbalancers".split()
)
QUOTA_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
)


class Problem(NamedTuple):
    path: str
    message: str


def label_error(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label, or None when it is one."""
    if not value:
        return "it is empty"
    if len(value) > _LABEL_MAX:
        return f"it is {len(value)} characters long, over the limit of {_LABEL_MAX}"
    if not _LABEL_RE.fullmatch(value):
        return "it may contain only lowercase letters, digits and '-', and must start and end with a letter or digit"
    return None


def subdomain_error(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain, or None when it is one."""
    if not value:
        return "it is empty"
    if len(value) > _SUBDOMAIN_MAX:
        return f"it is {len(value)} characters long, over the limit of {_SUBDOMAIN_MAX}"
    if not _SUBDOMAIN_RE.fullmatch(value):
        return (
            "it may contain only lowercase letters, digits, '-' and '.', and each dot-separated part "
            "must start and end with a letter or digit"
        )
    return None


def qualified_name_error(value: str) -> str | None:
    """Why ``value`` is not a qualified name (``[prefix/]name``: label keys, annotation keys,
    resource names), or None when it is one."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or subdomain_error(prefix)):
        return f"its prefix {prefix!r} must be a DNS-1123 subdomain"
    if not name:
        return "its name part is empty"
    if len(name) > _LABEL_MAX:
        return f"its name part is {len(name)} characters long, over the limit of {_LABEL_MAX}"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return "its name part may contain only letters, digits, '-', '_' and '.', between a letter or digit at each end"
    return None


def check_labels_and_annotations(meta: Any, base: str, out: list[Problem]) -> None:
    """ValidateObjectMeta's limits: label keys qualified names, values at most 63 characters of
    letters, digits, '-', '_', '.'; annotation keys qualified names, all annotations 256 KiB."""
    for key, value in (meta.labels or {}).items():
        why = qualified_name_error(key)
        if why:
            out.append(Problem(f"{base}.labels", f"label key {key[:80]!r} is not valid: {why}."))
        elif len(value) > _LABEL_MAX:
            out.append(
                Problem(f"{base}.labels[{key}]", f"label value is {len(value)} characters long, over the limit of 63.")
            )
        elif not _LABEL_VALUE_RE.fullmatch(value):
            out.append(
                Problem(
                    f"{base}.labels[{key}]",
                    f"label value {value!r} may contain only letters, digits, '-', '_' and '.', "
                    "between a letter or digit at each end.",
                )
            )
    size = 0
    for key, value in (meta.annotations or {}).items():
        size += len(key) + len(value)
        why = qualified_name_error(key.lower())
        if why:
            out.append(Problem(f"{base}.annotations", f"annotation key {key[:80]!r} is not valid: {why}."))
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        out.append(
            Problem(
                f"{base}.annotations",
                f"annotations total {size:,} bytes, over the limit of {TOTAL_ANNOTATION_SIZE_LIMIT:,} (256 KiB).",
            )
        )


def check_quota(quota: Any, out: list[Problem]) -> None:
    """ValidateResourceQuota: resource names, non-negative amounts, whole numbers for counted
    resources, known scopes."""
    for res, amount in quota.spec.hard.items():
        path = f"spec.hard[{res}]"
        why = qualified_name_error(res)
        if why:
            out.append(Problem(path, f"{res!r} is not a valid resource name: {why}."))
            continue
        if (
            "/" not in res
            and res not in STANDARD_QUOTA_RESOURCES
            and not res.startswith(("hugepages-", "requests.hugepages-"))
        ):
            out.append(Problem(path, f"{res!r} is not a resource a quota can limit (e.g. cpu, requests.memory, pods)."))
            continue
        if amount < 0:
            out.append(Problem(path, f"{res} is {amount}; it must not be negative."))
        elif (res in INTEGER_QUOTA_RESOURCES or ("/" in res and not res.startswith("requests."))) and amount != int(
            amount
        ):
            out.append(Problem(path, f"{res} is {amount}; it must be a whole number."))
    for i, scope in enumerate(quota.spec.scopes):
        if scope not in QUOTA_SCOPES:
            out.append(Problem(f"spec.scopes[{i}]", f"unknown scope {scope!r} (known: {', '.join(QUOTA_SCOPES)})."))


# kind -> the rule kube-apiserver applies to metadata.name
_NAME_RULES = {
    "Namespace": ("label", label_error),
}


def check_meta(obj: Any, out: list[Problem], name_required: bool = True) -> None:
    """metadata.name (DNS-1123 subdomain, a label for Namespaces) and metadata.namespace (a label)."""
    meta = obj.metadata
    kind = getattr(obj, "kind", "object")
    rule, fn = _NAME_RULES.get(kind, ("subdomain", subdomain_error))
    if meta.name:
        why = fn(meta.name)
        if why:
            out.append(Problem("metadata.name", f"{kind} name {meta.name!r} is not a valid DNS-1123 {rule}: {why}."))
    elif name_required and not meta.generate_name:
        out.append(Problem("metadata.name", f"The {kind} has no name; set metadata.name."))
    check_namespace(obj, out)


def check_namespace(obj: Any, out: list[Problem]) -> None:
    meta = obj.metadata
    if getattr(obj, "namespaced", False) and meta.namespace:
        why = label_error(meta.namespace)
        if why:
            out.append(
                Problem("metadata.namespace", f"Namespace {meta.namespace!r} is not a valid DNS-1123 label: {why}.")
            )


def check_resources(resources: Mapping[str, Decimal], path: str, out: list[Problem], what: str = "quantity") -> None:
    """Every quantity ≥ 0 (kube-apiserver: 'must be greater than or equal to 0')."""
    for res, amount in resources.items():
        if amount < 0:
            out.append(Problem(f"{path}[{res}]", f"{what} {res} is {amount}; it must not be negative."))


def check_int32(value: int, path: str, out: list[Problem], what: str) -> bool:
    if value > INT32_MAX or value < -INT32_MAX - 1:
        out.append(
            Problem(path, f"{what} is {value}; it does not fit Kubernetes' 32-bit integer (at most {INT32_MAX}).")
        )
        return False
    return True


def check_pod_spec(spec: Any, base: str, out: list[Problem]) -> None:
    """A pod (template) spec as kube-apiserver checks it: containers present, named, unique; quantities."""
    if not spec.containers:
        out.append(Problem(f"{base}.containers", "The pod has no containers; add at least one under containers."))
    seen: dict[str, str] = {}
    for field_name, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, c in enumerate(containers):
            path = f"{base}.{field_name}[{i}]"
            if not c.name:
                out.append(
                    Problem(f"{path}.name", "The container has no name; give it a DNS-1123 label such as 'main'.")
                )
            else:
                why = label_error(c.name)
                if why:
                    out.append(
                        Problem(f"{path}.name", f"Container name {c.name!r} is not a valid DNS-1123 label: {why}.")
                    )
                elif c.name in seen:
                    out.append(Problem(f"{path}.name", f"Container name {c.name!r} is already used by {seen[c.name]}."))
                else:
                    seen[c.name] = path
            check_resources(c.resources.requests, f"{path}.resources.requests", out, "request")
            check_resources(c.resources.limits, f"{path}.resources.limits", out, "limit")
            for res, req in c.resources.requests.items():
                lim = c.resources.limits.get(res)
                if lim is not None and lim >= 0 and req > lim:
                    out.append(
                        Problem(
                            f"{path}.resources.requests[{res}]",
                            f"request {res} ({req}) is more than its limit ({lim}); it must be at most the limit.",
                        )
                    )
    check_resources(spec.overhead, f"{base}.overhead", out, "overhead")
    if spec.priority is not None:
        check_int32(spec.priority, f"{base}.priority", out, "priority")


#: GPUs of one node the deviceshare plugin models one by one (volcano.sh/gpu-number): a bound so that
#: no per-GPU structure's size is the input's choice (the largest servers have tens)
MAX_DEVICES_PER_NODE = 1024
PER_DEVICE_RESOURCES = ("volcano.sh/gpu-number",)


def check_devices(resources: Mapping[str, Decimal], path: str, out: list[Problem]) -> None:
    for res in PER_DEVICE_RESOURCES:
        amount = resources.get(res)
        if amount is not None and amount > MAX_DEVICES_PER_NODE:
            out.append(
                Problem(
                    f"{path}[{res}]",
                    f"{res} is {format(amount.normalize(), 'f')}; the simulator models each device of a node, "
                    f"at most {MAX_DEVICES_PER_NODE}.",
                )
            )


def check_node(node: Any, out: list[Problem]) -> None:
    check_resources(node.status.capacity, "status.capacity", out, "capacity")
    check_resources(node.status.allocatable, "status.allocatable", out, "allocatable")
    check_devices(node.status.capacity, "status.capacity", out)
    check_devices(node.status.allocatable, "status.allocatable", out)


def check_priority_class(pc: Any, out: list[Problem]) -> None:
    if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY and not pc.name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        out.append(
            Problem(
                "value",
                f"value is {pc.value}; a PriorityClass may have at most {HIGHEST_USER_DEFINABLE_PRIORITY} "
                f"(higher values are reserved for {SYSTEM_PRIORITY_CLASS_PREFIX}* classes).",
            )
        )
    else:
        check_int32(pc.value, "value", out, "value")


def validate_object(obj: Any) -> list[Problem]:
    """kube-apiserver's checks for kinds that no Volcano webhook validates (Nodes, PriorityClasses,
    Namespaces, Deployments, ReplicaSets, StatefulSets, batch/v1 Jobs, ConfigMaps)."""
    out: list[Problem] = []
    kind = getattr(obj, "kind", "")
    check_meta(obj, out)
    if kind == "Node":
        check_node(obj, out)
    elif kind == "PriorityClass":
        check_priority_class(obj, out)
    elif kind == "ResourceQuota":
        check_quota(obj, out)
    spec = getattr(obj, "spec", None)
    tmpl = getattr(spec, "template", None)
    if tmpl is not None and hasattr(tmpl, "spec"):
        check_pod_spec(tmpl.spec, "spec.template.spec", out)
    for field_name in ("replicas", "parallelism", "completions"):
        value = getattr(spec, field_name, None)
        if isinstance(value, int):
            if value < 0:
                out.append(Problem(f"spec.{field_name}", f"{field_name} is {value}; it must not be negative."))
            else:
                check_int32(value, f"spec.{field_name}", out, field_name)
    return out


__all__ = [
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "INT32_MAX",
    "Problem",
    "check_int32",
    "check_meta",
    "check_namespace",
    "check_node",
    "check_pod_spec",
    "check_devices",
    "check_labels_and_annotations",
    "check_priority_class",
    "check_quota",
    "check_resources",
    "label_error",
    "qualified_name_error",
    "subdomain_error",
    "validate_object",
]
