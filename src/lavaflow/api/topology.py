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


#: CPU ids a node may have: Linux's largest NR_CPUS (a cpuset is expanded CPU by CPU, so its size
#: must not be the input's choice)
MAX_CPUS = 8192


def parse_cpuset(text: str) -> set[int]:
    """``"0-3,8,10-11"`` → {0, 1, 2, 3, 8, 10, 11}; raises ValueError on bad syntax or CPU ids of
    :data:`MAX_CPUS` and above."""
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        a = int(lo)
        b = int(hi) if sep else a
        if b < a or a < 0:
            raise ValueError(f"bad cpuset range {part!r}")
        if b >= MAX_CPUS:
            raise ValueError(f"CPU id {b} in {part!r} is beyond what a node can have (ids below {MAX_CPUS})")
        out.update(range(a, b + 1))
    return out
