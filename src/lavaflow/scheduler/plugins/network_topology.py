"""network-topology-aware: place a gang inside one network domain (HyperNode).

HyperNodes (``topology.volcano.sh/v1alpha1``) form a tree by tier: tier-1 HyperNodes
select real nodes (by exact name, regular expression or labels), higher tiers select
lower HyperNodes by name. A job (PodGroup ``spec.networkTopology``) in ``hard`` mode is
placed entirely inside one HyperNode of tier ≤ ``highestTierAllowed`` — the lowest
tier first, and within a tier the HyperNode that will be fullest (Volcano's HyperNode
binpack) — or waits with a reason. In ``soft`` mode the same search runs over every
tier and then the whole cluster, so the gang lands in the lowest tier it fits.

Each HyperNode is a boolean mask over the nodes (built once per change of nodes or
HyperNodes and kept across sessions); the search tries the allocate action's normal
placement restricted to one mask at a time, after a vectorised check that the
HyperNode has the gang's minResources idle in total.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.selectors import label_selector_matches
from ..framework import arguments as A
from ..framework.memo import MISS, CacheRecord
from ..framework.registry import Plugin, register_plugin
from ..framework.session import ABSTAIN, REJECT, UNCACHED
from ..model import OCCUPYING, TaskStatus
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ...api.volcano import NetworkTopologySpec
    from ..framework.session import Session
    from ..framework.session_plugins import Domains
    from ..model import JobInfo, NodeSet, TaskInfo
    from ..resources import ResourceIndex

MAX_SCORE = 100.0


class Topology:
    """HyperNodes resolved against the current nodes."""

    def __init__(self, hypernodes: dict[str, Any], nodes: NodeSet) -> None:
        n = len(nodes)
        objs = sorted(hypernodes.values(), key=lambda h: (h.spec.tier, h.name))
        self.names = [h.name for h in objs]
        self.pos = {name: i for i, name in enumerate(self.names)}
        self.tiers = np.array([h.spec.tier for h in objs], dtype=np.int64)
        self.tier_names: dict[str, int] = {h.spec.tier_name: h.spec.tier for h in objs if h.spec.tier_name}
        direct = np.zeros((len(objs), n), dtype=bool)
        children: list[list[int]] = [[] for _ in objs]
        for hi, h in enumerate(objs):
            for m in h.spec.members:
                sel = m.selector
                if m.type == "HyperNode":
                    if sel.exact_match is not None and sel.exact_match.name in self.pos:
                        children[hi].append(self.pos[sel.exact_match.name])
                    continue
                if sel.exact_match is not None:
                    i = nodes.pos.get(sel.exact_match.name)
                    if i is not None:
                        direct[hi, i] = True
                elif sel.regex_match is not None:
                    try:
                        rx = re.compile(sel.regex_match.pattern)
                    except re.error:
                        continue
                    for i, name in enumerate(nodes.names):
                        if rx.search(name):
                            direct[hi, i] = True
                elif sel.label_match is not None:
                    for i in range(n):
                        if label_selector_matches(sel.label_match, nodes.labels[i]):
                            direct[hi, i] = True
        # Real nodes of a HyperNode: its own plus its descendants' (cycles are cut).
        self.members = np.zeros_like(direct)
        done: dict[int, np.ndarray] = {}

        def resolve(hi: int, path: frozenset[int]) -> np.ndarray:
            if hi in done:
                return done[hi]
            mask: np.ndarray = direct[hi].copy()
            for c in children[hi]:
                if c not in path:
                    mask |= resolve(c, path | {c})
            done[hi] = mask
            return mask

        for hi in range(len(objs)):
            self.members[hi] = resolve(hi, frozenset({hi}))
        self.min_tier = int(self.tiers.min()) if len(objs) else 0
        self.max_tier = int(self.tiers.max()) if len(objs) else 0
        # Per tier from min to max: the HyperNode of that tier holding each node (-1: none).
        self.by_tier: dict[int, np.ndarray] = {}
        for tier in range(self.min_tier, self.max_tier + 1):
            owner = np.full(n, -1, dtype=np.int64)
            for hi in reversed(np.flatnonzero(self.tiers == tier)):
                owner[self.members[hi]] = hi
            self.by_tier[tier] = owner
        self.members_f = self.members.astype(np.float64)


def topology_of(job: JobInfo) -> NetworkTopologySpec | None:
    pg = job.pg
    return pg.spec.network_topology if pg is not None else None


# The resolved HyperNode tree, under (the plugin objects' version, the nodes' version, their count).
TOPOLOGY: CacheRecord[Topology] = CacheRecord("network_topology")


@register_plugin
class NetworkTopologyAwarePlugin(Plugin):
    name = "network-topology-aware"
    ARGUMENTS = {
        "weight": A.NUMBER,
        "hypernode.binpack.cpu": A.NUMBER,
        "hypernode.binpack.memory": A.NUMBER,
        "hypernode.binpack.resources": A.TEXT,
        "hypernode.binpack.resources.*": A.NUMBER,
        "hypernode.binpack.normal-pod.enable": A.BOOL,
        "hypernode.binpack.normal-pod.fading": A.NUMBER,
        "hypernode.gradient.evict.max-hypernodes": A.POSITIVE_INT,
    }

    def on_session_open(self, ssn: Session) -> None:
        weight = self.arg_float("weight", 1.0)
        nodes = ssn.nodes
        index = ssn.index
        bin_weights = {
            "cpu": self.arg_float("hypernode.binpack.cpu", 1.0),
            "memory": self.arg_float("hypernode.binpack.memory", 1.0),
        }
        for name in (s.strip() for s in str(self.arguments.get("hypernode.binpack.resources", "") or "").split(",")):
            if name:
                bin_weights[name] = self.arg_float(f"hypernode.binpack.resources.{name}", 1.0)
        bin_cols = [(index.pos[r], w) for r, w in bin_weights.items() if r in index.pos and w > 0]

        cache = ssn.cache
        key = (cache.objects_version, nodes.version, len(nodes))
        topo = TOPOLOGY.get(cache, key)
        if topo is MISS:
            topo = TOPOLOGY.put(cache, key, Topology(cache.objects.get("HyperNode", {}), nodes))
        n = len(nodes)

        def min_request(job: JobInfo) -> np.ndarray:
            if job.min_resources is not None and np.any(job.min_resources > 0):
                return job.min_resources
            pending = sorted((t for t in job.tasks.values() if t.status == TaskStatus.PENDING), key=ssn.task_key)
            want = max(job.min_available - job.ready_num, 0)
            total = np.zeros(len(index))
            for t in pending[:want]:
                total[: len(t.resreq)] += t.resreq
            return total

        def placed_nodes(job: JobInfo) -> list[int]:
            return sorted(
                {
                    t.node
                    for t in job.tasks.values()
                    if t.node >= 0 and (t.status in OCCUPYING or t.status == TaskStatus.PIPELINED)
                }
            )

        def binpack(rows: np.ndarray, req: np.ndarray, used_h: np.ndarray, alloc_h: np.ndarray) -> np.ndarray:
            total = np.zeros(len(rows))
            wsum = 0.0
            over = np.zeros(len(rows), dtype=bool)
            for c, w in bin_cols:
                if req[c] <= 0:
                    continue
                a = alloc_h[rows, c]
                after = used_h[rows, c] + req[c]
                over |= after > a + EPS
                with np.errstate(divide="ignore", invalid="ignore"):
                    total += w * np.where(a > 0, after / a, 0.0)
                wsum += w
            if wsum == 0:
                return np.zeros(len(rows))
            return np.where(over, 0.0, total / wsum)

        max_evict = int(self.arg_float("hypernode.gradient.evict.max-hypernodes", 8)) or 8

        def domains(job: JobInfo, purpose: str = "allocate") -> Domains | None:
            spec = topology_of(job)
            if spec is None:
                return None
            hard = (spec.mode or "hard") == "hard"
            if purpose == "evict":
                return evict_domains(job, spec) if hard else None
            highest = _highest(spec, topo) if hard else topo.max_tier
            limit_text = f"tier ≤ {highest}"
            allowed = np.flatnonzero(topo.tiers <= highest) if len(topo.names) else np.zeros(0, dtype=np.int64)
            placed = placed_nodes(job)
            if placed and len(allowed):
                allowed = allowed[topo.members[allowed][:, placed].all(axis=1)]
            req = min_request(job)
            cols = np.flatnonzero(req > 0)
            if len(allowed):
                members = topo.members[allowed].astype(np.float64)
                alloc_n = nodes.allocatable[:n] * nodes.schedulable[:n, None]
                used_n = nodes.used[:n]
                alloc_h = members @ alloc_n
                used_h = members @ used_n
                future_h = alloc_h - used_h + members @ (nodes.releasing[:n] - nodes.pipelined[:n])
                idle_h = alloc_h - used_h
                if placed:
                    fits = np.ones(len(allowed), dtype=bool)  # a running gang grows where it is
                else:
                    fits = np.all(idle_h[:, cols] + EPS >= req[cols], axis=1) | np.all(
                        future_h[:, cols] + EPS >= req[cols], axis=1
                    )
                rows = np.flatnonzero(fits)
                score = binpack(rows, req, used_h, alloc_h)
                tiers = topo.tiers[allowed[rows]]
                order = sorted(
                    range(len(rows)), key=lambda o: (int(tiers[o]), -float(score[o]), topo.names[allowed[rows[o]]])
                )
                chosen = [int(allowed[rows[o]]) for o in order]
            else:
                chosen = []
            if not hard:
                # Volcano turns soft mode into hard mode at the cluster's top tier and tries every
                # eligible HyperNode of each tier, lowest first (allocateForJob over the gradients);
                # the cluster as a whole is the last gradient.
                cands = [(f"HyperNode {topo.names[h]} (tier {topo.tiers[h]})", topo.members[h]) for h in chosen]
                cands.append(("", None))
                return cands, ""
            cands = [(f"HyperNode {topo.names[h]} (tier {topo.tiers[h]})", topo.members[h]) for h in chosen]
            if not len(topo.names):
                reason = f"network topology (hard, {limit_text}): there are no HyperNodes"
            elif not len(allowed):
                where = " containing its running tasks' nodes" if placed else ""
                reason = f"network topology (hard, {limit_text}): no HyperNode of {limit_text}{where}"
            elif not cands:
                reason = (
                    f"network topology (hard, {limit_text}): none of the {len(allowed)} HyperNode(s) of {limit_text} "
                    f"has the gang's resources ({_describe(req, index)}) idle"
                )
            else:
                names = ", ".join(topo.names[h] for h in chosen[:5]) + (", …" if len(chosen) > 5 else "")
                reason = (
                    f"network topology (hard, {limit_text}): the gang fits in none of the {len(chosen)} HyperNode(s) "
                    f"of {limit_text} with room for it ({names})"
                )
            return cands, reason

        # Pods without networkTopology: HyperNode binpacking, tier by tier with fading weights.
        normal_on = self.arg_bool("hypernode.binpack.normal-pod.enable", True) and len(topo.names) > 0 and weight > 0
        fading = self.arg_float("hypernode.binpack.normal-pod.fading", 0.8)
        if fading < 0:
            fading = 0.8
        tier_weights = {t: fading ** (t - 1) for t in range(topo.min_tier, topo.max_tier + 1)}
        hn_alloc = topo.members_f @ nodes.allocatable[:n] if normal_on else None
        hn_used = topo.members_f @ nodes.used[:n] if normal_on else None

        def normal_score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            assert hn_alloc is not None and hn_used is not None  # registered only with normal_on
            req = task.resreq
            total = np.zeros(len(topo.names))
            wsum = 0.0
            over = np.zeros(len(topo.names), dtype=bool)
            for c, w in bin_cols:
                if req[c] <= 0:
                    continue
                a = hn_alloc[:, c]
                after = hn_used[:, c] + req[c]
                over |= after > a + EPS
                with np.errstate(divide="ignore", invalid="ignore"):
                    total += w * np.where(a > 0, after / a, 0.0)
                wsum += w
            per_hn = np.where(over, 0.0, total / wsum) if wsum else np.zeros(len(topo.names))
            out = np.zeros(len(cand))
            tw = 0.0
            for tier, w in tier_weights.items():
                owner = topo.by_tier[tier][cand]
                out += w * np.where(owner >= 0, per_hn[np.maximum(owner, 0)], 1.0)
                tw += w
            return out / tw * MAX_SCORE * weight if tw > 0 else out

        def evict_domains(job: JobInfo, spec: NetworkTopologySpec) -> Domains:
            """Where preempt / reclaim may make room for a hard-mode gang: allowed HyperNodes large
            enough for it, the widest tiers first (most victims to choose from), at most max_evict."""
            highest = _highest(spec, topo)
            allowed = np.flatnonzero(topo.tiers <= highest) if len(topo.names) else np.zeros(0, dtype=np.int64)
            placed = placed_nodes(job)
            if placed and len(allowed):
                allowed = allowed[topo.members[allowed][:, placed].all(axis=1)]
            req = min_request(job)
            cols = np.flatnonzero(req > 0)
            if len(allowed):
                cap = topo.members_f[allowed] @ (nodes.allocatable[:n] * nodes.schedulable[:n, None])
                allowed = allowed[np.all(cap[:, cols] + EPS >= req[cols], axis=1)]
            order = sorted(allowed.tolist(), key=lambda h: (-int(topo.tiers[h]), topo.names[h]))[:max_evict]
            return [(f"HyperNode {topo.names[h]} (tier {topo.tiers[h]})", topo.members[h]) for h in order], ""

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            job = ssn.jobs.get(task.job)
            if job is not None and topology_of(job) is None and normal_on:
                return normal_score(task, cand)
            if job is None or topology_of(job) is None or not len(topo.names) or weight <= 0:
                return np.zeros(len(cand))
            holders = job_holders.get(job.uid)
            if holders is None:
                placed = placed_nodes(job)
                holders = job_holders[job.uid] = topo.members[:, placed].all(axis=1) if placed else False
            if holders is False:
                return np.zeros(len(cand))
            # The lowest tier of a HyperNode holding the job's placed nodes and the candidate.
            anc = np.flatnonzero(holders)
            if not len(anc):
                return np.zeros(len(cand))
            t = np.where(topo.members[anc][:, cand], topo.tiers[anc][:, None], np.iinfo(np.int64).max).min(axis=0)
            if topo.max_tier == topo.min_tier:
                s = np.where(t <= topo.max_tier, 1.0, 0.0)
            else:
                s = np.where(t <= topo.max_tier, (topo.max_tier - t) / (topo.max_tier - topo.min_tier), 0.0)
            return s * MAX_SCORE * weight

        def score_key(task: TaskInfo) -> object:
            # Depends on other nodes' usage (HyperNode totals) or on where the job's other tasks
            # are: computed over the candidates only. Zero (cacheable) without HyperNodes.
            job = ssn.jobs.get(task.job)
            if job is None or (topology_of(job) is None and not normal_on):
                return None
            return UNCACHED

        def enqueueable(job: JobInfo) -> int:
            # A hard-mode gang larger than every allowed HyperNode can never run: keep it Pending.
            spec = topology_of(job)
            if spec is None or (spec.mode or "hard") != "hard" or job.min_resources is None:
                return ABSTAIN
            highest = _highest(spec, topo)
            allowed = np.flatnonzero(topo.tiers <= highest)
            req = job.min_resources
            cols = np.flatnonzero(req > 0)
            if len(allowed):
                cap = topo.members[allowed].astype(np.float64) @ nodes.allocatable[:n]
                if np.any(np.all(cap[:, cols] + EPS >= req[cols], axis=1)):
                    return ABSTAIN
            job.job_fit_errors = (
                f"network topology (hard, tier ≤ {highest}): no HyperNode of tier ≤ {highest} is large enough "
                f"for the gang's minResources ({_describe(req, index)})"
            )
            return REJECT

        # Per topology job: which HyperNodes hold all its placed nodes (False: none placed yet).
        job_holders: dict[str, Any] = {}

        def on_allocate(task: TaskInfo) -> None:
            if hn_used is not None:  # normal_on
                hn_used[topo.members[:, task.node]] += task.resreq
                hn_node[task.uid] = task.node
            holders = job_holders.get(task.job)
            if holders is None:
                return
            if holders is False:
                job_holders[task.job] = topo.members[:, task.node].copy()
            else:
                holders &= topo.members[:, task.node]

        def on_deallocate(task: TaskInfo) -> None:
            if hn_used is not None:  # normal_on
                node = hn_node.pop(task.uid, task.node)
                if node >= 0:
                    hn_used[topo.members[:, node]] -= task.resreq
            job_holders.pop(task.job, None)

        hn_node: dict[str, int] = {}  # task uid -> node it was counted on (an unplaced task forgets it)

        if len(topo.names):
            ssn.add_event_handler(on_allocate, on_deallocate)
        ssn.add_job_domains_fn(self.name, domains)
        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_node_order_fn(self.name, score, cache_key=score_key)


def _highest(spec: NetworkTopologySpec, topo: Topology) -> int:
    """The highest tier a hard-mode job may span (highestTierAllowed, else highestTierName)."""
    if spec.highest_tier_allowed is not None:
        return spec.highest_tier_allowed
    if spec.highest_tier_name and spec.highest_tier_name in topo.tier_names:
        return topo.tier_names[spec.highest_tier_name]
    return topo.max_tier


def _describe(req: np.ndarray, index: ResourceIndex) -> str:
    parts = []
    for c in np.flatnonzero(req > 0):
        name = index.names[c]
        if name == "pods":
            continue
        v = float(req[c])
        parts.append(f"{name} {v / 2**30:g}Gi" if name == "memory" and v >= 2**20 else f"{name} {v:g}")
    return ", ".join(parts) or "nothing"
