"""Topology objects Volcano's scheduler reads: ``topology.volcano.sh/v1alpha1`` HyperNode
(network topology, for the network-topology-aware plugin) and ``nodeinfo.volcano.sh/v1alpha1``
Numatopology (per-node NUMA layout, for the numa-aware plugin). Field names are Volcano's."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .core import LabelSelector
from .meta import K8sModel, TypedObject

TOPOLOGY_GROUP = "topology.volcano.sh/v1alpha1"
NODEINFO_GROUP = "nodeinfo.volcano.sh/v1alpha1"

# --- HyperNode -----------------------------------------------------------------------


class ExactMatch(K8sModel):
    name: str = ""


class RegexMatch(K8sModel):
    pattern: str = ""


class MemberSelector(K8sModel):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class MemberSpec(K8sModel):
    type: str = "Node"  # Node | HyperNode
    selector: MemberSelector = Field(default_factory=MemberSelector)


class HyperNodeSpec(K8sModel):
    tier: int = 0
    tier_name: str | None = None
    members: list[MemberSpec] = Field(default_factory=list)


class HyperNodeStatus(K8sModel):
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    node_count: int | None = None


class HyperNode(TypedObject):
    """A network domain: a set of nodes (or of lower-tier HyperNodes) close to each other."""

    namespaced = False
    api_version: str = TOPOLOGY_GROUP
    kind: str = "HyperNode"
    spec: HyperNodeSpec = Field(default_factory=HyperNodeSpec)
    status: HyperNodeStatus = Field(default_factory=HyperNodeStatus)


def validate_hypernode(hn: HyperNode) -> list[tuple[str, str]]:
    """(field path, message) for each problem, following the CRD's validation rules."""
    import re

    out: list[tuple[str, str]] = []
    if hn.spec.tier < 0:
        out.append(("spec.tier", "must be ≥ 0"))
    if not hn.spec.members:
        out.append(("spec.members", "needs at least one member"))
    for i, m in enumerate(hn.spec.members):
        path = f"spec.members[{i}]"
        if m.type not in ("Node", "HyperNode"):
            out.append((f"{path}.type", f"{m.type!r} is not a member type (use Node or HyperNode)"))
        sel = m.selector
        given = [s for s in (sel.exact_match, sel.regex_match, sel.label_match) if s is not None]
        if len(given) != 1:
            out.append((f"{path}.selector", "needs exactly one of exactMatch, regexMatch, labelMatch"))
            continue
        if sel.exact_match is not None and not sel.exact_match.name:
            out.append((f"{path}.selector.exactMatch.name", "is required"))
        if sel.regex_match is not None:
            try:
                re.compile(sel.regex_match.pattern)
            except re.error as exc:
                out.append((f"{path}.selector.regexMatch.pattern", f"is not a regular expression: {exc}"))
        if m.type == "HyperNode" and sel.exact_match is None:
            out.append((f"{path}.selector", "a HyperNode member can only be selected by exactMatch"))
    return out


# --- Numatopology ----------------------------------------------------------------------

CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


class CPUInfo(K8sModel):
    numa: int = 0
    socket: int = 0
    core: int = 0


class ResourceInfo(K8sModel):
    allocatable: str = ""  # a cpuset, e.g. "0-3,8-11"
    capacity: int = 0


class NumatopoSpec(K8sModel):
    policies: dict[str, str] = Field(default_factory=dict)
    res_reserved: dict[str, str] = Field(default_factory=dict)
    numares: dict[str, ResourceInfo] = Field(default_factory=dict)
    cpu_detail: dict[str, CPUInfo] = Field(default_factory=dict)


class Numatopology(TypedObject):
    """One node's NUMA layout (named after the node), as Volcano's resource exporter reports it."""

    namespaced = False
    api_version: str = NODEINFO_GROUP
    kind: str = "Numatopology"
    spec: NumatopoSpec = Field(default_factory=NumatopoSpec)


def parse_cpuset(text: str) -> set[int]:
    """``"0-3,8,10-11"`` → {0, 1, 2, 3, 8, 10, 11}; raises ValueError on bad syntax."""
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        a = int(lo)
        b = int(hi) if sep else a
        if b < a or a < 0:
            raise ValueError(f"bad cpuset range {part!r}")
        out.update(range(a, b + 1))
    return out


def validate_numatopology(nt: Numatopology) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for res, info in nt.spec.numares.items():
        try:
            parse_cpuset(info.allocatable)
        except ValueError as exc:
            out.append((f"spec.numares[{res}].allocatable", str(exc)))
    for cpu in nt.spec.cpu_detail:
        if not cpu.isdigit():
            out.append((f"spec.cpuDetail[{cpu}]", "keys are CPU ids (integers)"))
    return out
