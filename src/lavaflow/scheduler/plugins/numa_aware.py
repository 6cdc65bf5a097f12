"""numa-aware: place CPU-pinned pods where the node's topology manager will admit them.

Each node's NUMA layout comes from its ``nodeinfo.volcano.sh/v1alpha1`` Numatopology
(named after the node): ``policies`` (CPUManagerPolicy, TopologyManagerPolicy),
``numares.cpu.allocatable`` (a cpuset) and ``cpuDetail`` (CPU id → NUMA node). As the
kubelet's static CPU manager does, only Guaranteed pods get exclusive CPUs, one per
whole CPU each container requests. A task's policy is its pod's
``volcano.sh/numa-topology-policy`` annotation (set from the Job task's
``topologyPolicy``):

- a task with a policy other than ``none`` only fits nodes whose CPU manager policy is
  ``static`` and whose topology manager policy is the same;
- on such a node (and for any Guaranteed pod on a node with a topology manager policy)
  each container's exclusive CPUs are taken from the NUMA nodes as the policy allows:
  ``single-numa-node`` — one NUMA node; ``restricted`` — no more NUMA nodes than the
  fewest that could ever hold them; ``best-effort`` / ``none`` — the fewest available;
- nodes whose assignment spans fewer NUMA nodes score higher (``weight``, default 1).

Free CPUs per NUMA node are accounted through the session's allocate/deallocate
events, and the assignments of placed pods are remembered across sessions, so two pods
never get the same cores.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.topology import CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY, parse_cpuset
from ...api.volcano import NUMA_POLICY_KEY
from ..framework import arguments as A
from ..framework.memo import Assigned, state
from ..framework.registry import Plugin, register_plugin
from ..framework.session import UNCACHED
from ..model import OCCUPYING

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable

    from ...api.core import Pod
    from ...api.topology import Numatopology
    from ..framework.session import Session
    from ..framework.session_plugins import Explain
    from ..model import TaskInfo

MAX_SCORE = 100.0


def exclusive_cpus(pod: Pod | None) -> list[int]:
    """Per container, the CPUs the static CPU manager pins (Guaranteed pods, whole CPUs); [] otherwise."""
    if pod is None:
        return []
    out = []
    for c in pod.spec.containers:
        req, lim = c.resources.requests, c.resources.limits
        for res in ("cpu", "memory"):
            if res not in lim or req.get(res, lim[res]) != lim[res]:
                return []
        cpu = float(lim["cpu"])
        out.append(int(cpu) if cpu == int(cpu) else 0)
    return out if any(out) else []


def task_policy(task: TaskInfo) -> str:
    pod = task.pod
    if pod is None:
        return ""
    return pod.metadata.annotations.get(NUMA_POLICY_KEY, "") or ""


class NodeNuma:
    """One node's NUMA state: capacity and free exclusive CPUs per NUMA node."""

    __slots__ = ("cpu_policy", "topo_policy", "capacity", "free")

    def __init__(self, nt: Numatopology) -> None:
        self.cpu_policy = nt.spec.policies.get(CPU_MANAGER_POLICY, "")
        self.topo_policy = nt.spec.policies.get(TOPOLOGY_MANAGER_POLICY, "")
        cpus = parse_cpuset(nt.spec.numares["cpu"].allocatable) if "cpu" in nt.spec.numares else set()
        numa_of = {int(k): v.numa for k, v in nt.spec.cpu_detail.items() if k.isdigit()}
        count: dict[int, int] = {}
        for cpu in cpus:
            count[numa_of.get(cpu, 0)] = count.get(numa_of.get(cpu, 0), 0) + 1
        width = max(count) + 1 if count else 0
        self.capacity = np.array([count.get(i, 0) for i in range(width)], dtype=np.int64)
        self.free = self.capacity.copy()


def _assign_one(free: np.ndarray, capacity: np.ndarray, want: int, policy: str) -> np.ndarray | None:
    """CPUs per NUMA node for one container, or None when the policy refuses."""
    k = len(free)
    if want <= 0:
        return np.zeros(k, dtype=np.int64)
    if want > free.sum():
        return None
    # The fewest NUMA nodes that could ever hold the request (the kubelet's "preferred" width).
    caps = np.sort(capacity)[::-1]
    min_width = int(np.searchsorted(np.cumsum(caps), want) + 1) if caps.sum() >= want else k + 1
    widths = range(1, k + 1)
    if policy == "single-numa-node":
        widths = range(1, 2)
    elif policy == "restricted":
        widths = range(1, min(min_width, k) + 1)
    for width in widths:
        best = None
        for combo in itertools.combinations(range(k), width):
            have = int(free[list(combo)].sum())
            if have >= want and (best is None or have < best[0]):
                best = (have, combo)  # the tightest set of this width
        if best is not None:
            out = np.zeros(k, dtype=np.int64)
            left = want
            for i in best[1]:
                take = min(int(free[i]), left)
                out[i] = take
                left -= take
            return out
    return None


def assign(node: NodeNuma, containers: list[int], policy: str) -> np.ndarray | None:
    """CPUs per NUMA node the pod's containers take on ``node`` under ``policy``, or None."""
    free = node.free.copy()
    total = np.zeros(len(free), dtype=np.int64)
    for want in containers:
        got = _assign_one(free, node.capacity, want, policy)
        if got is None:
            return None
        free -= got
        total += got
    return total


@dataclass
class NumaAssignments:
    """Kept across sessions: the CPUs per NUMA node assigned to each placed task (by uid), and
    whether the pods already placed when the scheduler started were taken in."""

    tasks: dict[str, Assigned] = field(default_factory=dict)
    adopted: bool = False


def _adopt(tasks: Iterable[TaskInfo], numa: dict[int, NodeNuma], memo: dict[str, Assigned]) -> None:
    """A scheduler that starts over running pods (a restart, a forecast's snapshot) has not placed
    them itself: their exclusive CPUs are taken as the kubelet's CPU manager would have given them,
    pod by pod in name order, so that the NUMA nodes they fill are not offered again."""
    for task in sorted(tasks, key=lambda t: (t.namespace, t.name)):
        node = numa.get(task.node)
        if node is None or task.status not in OCCUPYING or task.uid in memo:
            continue
        containers = exclusive_cpus(task.pod)
        if not containers:
            continue
        policy = task_policy(task)
        got = assign(node, containers, policy if policy not in ("", "none") else node.topo_policy)
        if got is None:
            got = assign(node, containers, "best-effort")
        if got is not None:
            node.free -= got
            memo[task.uid] = Assigned(task.node, got)


@register_plugin
class NumaAwarePlugin(Plugin):
    name = "numa-aware"
    ARGUMENTS = {"weight": A.NUMBER}

    def on_session_open(self, ssn: Session) -> None:
        weight = self.arg_float("weight", 1.0)
        nodes = ssn.nodes
        cache = ssn.cache
        numa: dict[int, NodeNuma] = {}
        for name, nt in cache.objects.get("Numatopology", {}).items():
            i = nodes.pos.get(name)
            if i is not None:
                numa[i] = NodeNuma(nt)
        # Assignments of pods placed in earlier sessions: {task uid: (node, cpus per NUMA node)}.
        kept = state(cache, self.name, NumaAssignments)
        memo = kept.tasks
        for uid, (i, cpus) in list(memo.items()):
            t = cache.tasks.get(uid)
            if t is None or t.node != i or t.status not in OCCUPYING or i not in numa or len(cpus) != len(numa[i].free):
                del memo[uid]
                continue
            numa[i].free -= cpus
        if not kept.adopted:
            _adopt(cache.tasks.values(), numa, memo)
            kept.adopted = True
        numa_rows = np.array(sorted(numa), dtype=np.int64)
        n = len(nodes)

        def node_policy(task: TaskInfo, node: NodeNuma) -> str:
            return task_policy(task) if task_policy(task) not in ("", "none") else node.topo_policy

        def applies(node: NodeNuma) -> bool:
            return node.cpu_policy == "static" and node.topo_policy not in ("", "none")

        def check(task: TaskInfo, i: int) -> str:
            """'' when the task may go on node i, else the reason."""
            policy = task_policy(task)
            node = numa.get(i)
            strict = policy not in ("", "none")
            if strict:
                if node is None:
                    return "node(s) had no NUMA topology (Numatopology)"
                if node.cpu_policy != "static":
                    return "node(s) CPU manager policy isn't static"
                if node.topo_policy != policy:
                    return f"node(s) topology manager policy isn't {policy}"
                if node.capacity.sum() == 0:
                    return "node(s) had no allocatable CPUs in their NUMA topology"
            elif node is None or not applies(node):
                return ""
            containers = exclusive_cpus(task.pod)
            if not containers:
                return ""
            if assign(node, containers, node_policy(task, node)) is None:
                return f"node(s) could not fit the pod's exclusive CPUs in their NUMA nodes ({node_policy(task, node)})"
            return ""

        def predicate(task: TaskInfo) -> tuple[np.ndarray, Explain]:
            policy = task_policy(task)
            strict = policy not in ("", "none")
            if not strict and not exclusive_cpus(task.pod):
                return np.ones(n, dtype=bool), explain
            mask = np.zeros(n, dtype=bool) if strict else np.ones(n, dtype=bool)
            for i in numa_rows:
                mask[i] = check(task, int(i)) == ""
            return mask, explain

        def explain(task: TaskInfo, failing: np.ndarray) -> dict[str, int]:
            reasons: dict[str, int] = {}
            for i in np.flatnonzero(failing):
                r = check(task, int(i)) or "node(s) didn't satisfy the NUMA topology policy"
                reasons[r] = reasons.get(r, 0) + 1
            return reasons

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            policy = task_policy(task)
            containers = exclusive_cpus(task.pod)
            if policy in ("", "none") or not containers or weight <= 0:
                return np.zeros(len(cand))
            counts = np.zeros(len(cand))
            for j, i in enumerate(cand):
                node = numa.get(int(i))
                if node is None:
                    continue
                got = assign(node, containers, node_policy(task, node))
                counts[j] = 0 if got is None else int(np.count_nonzero(got))
            top = counts.max() if len(counts) else 0
            if top <= 0:
                return np.full(len(cand), MAX_SCORE * weight)
            return (MAX_SCORE - counts * MAX_SCORE / top) * weight

        def on_allocate(task: TaskInfo) -> None:
            node = numa.get(task.node)
            if node is None or (task_policy(task) in ("", "none") and not applies(node)):
                return
            containers = exclusive_cpus(task.pod)
            if not containers:
                return
            got = assign(node, containers, node_policy(task, node))
            if got is None:  # placed without this plugin's predicate: take what the kubelet could
                got = assign(node, containers, "best-effort")
            if got is None:
                return
            node.free -= got
            memo[task.uid] = Assigned(task.node, got)

        def on_deallocate(task: TaskInfo) -> None:
            entry = memo.pop(task.uid, None)
            if entry is not None and entry.node in numa:
                numa[entry.node].free += entry.amounts

        ssn.add_predicate_fn(self.name, predicate)

        def score_key(task: TaskInfo) -> object:
            if task_policy(task) in ("", "none") or not exclusive_cpus(task.pod):
                return None  # always 0
            return UNCACHED

        ssn.add_node_order_fn(self.name, score, cache_key=score_key)
        ssn.add_event_handler(on_allocate, on_deallocate)
        self.numa: dict[int, Any] = numa  # for tests and explanations
