"""nodegroup: queues bound to groups of nodes (label ``volcano.sh/nodegroup-name``).

A Queue's ``spec.affinity`` names node groups:
``nodeGroupAffinity`` / ``nodeGroupAntiAffinity``, each with
``requiredDuringSchedulingIgnoredDuringExecution`` and
``preferredDuringSchedulingIgnoredDuringExecution`` lists of group names. As in Volcano:

- a node may take a task of the queue if its group is in the queue's required or
  preferred affinity, and not in its required anti-affinity (preferred anti-affinity
  still allows it);
- a node without the group label, or a queue without any affinity, fits only when the
  plugin's ``strict`` argument is false (default true) and the queue has no affinity;
- score: 100 for a required group, +50 for a preferred one (with
  ``enablePreferredOrder: true``, 50 × (n − position) / n by list order), −1 for a
  preferred anti-affinity group.

With ``enableHierarchy: true`` a queue without affinity inherits that of its nearest ancestor
(``spec.parent``). A queue's annotation ``volcano.sh/nodegroup-resource-limits`` (JSON: group →
resource list, e.g. ``{"gx": {"cpu": "8"}}``) caps what the queue's tasks may hold on each group's
nodes; an invalid annotation lets the queue use no node.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.quantity import parse_quantity
from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin
from ..model import ALLOCATED
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..framework.session_plugins import Explain
    from ..model import TaskInfo

NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
INVALID = object()
BASE_SCORE = 100.0


class QueueAffinity:
    def __init__(self, spec: dict[str, Any] | None) -> None:
        spec = spec or {}
        aff = spec.get("nodeGroupAffinity") or {}
        anti = spec.get("nodeGroupAntiAffinity") or {}
        self.required = set(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        self.preferred_list = list(aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        self.preferred = set(self.preferred_list)
        self.anti_required = set(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        self.anti_preferred = set(anti.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        self.unset = not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def allows(self, group: str) -> bool:
        ok = group in self.required or group in self.preferred
        if group in self.anti_required:
            ok = False
        if group in self.anti_preferred:
            ok = True
        return ok

    def score(self, group: str, by_order: bool) -> float:
        s = BASE_SCORE if group in self.required else 0.0
        if by_order:
            if group in self.preferred:
                n = len(self.preferred_list)
                s += 0.5 * BASE_SCORE * (n - self.preferred_list.index(group)) / n
        elif group in self.preferred:
            s += 0.5 * BASE_SCORE
        if group in self.anti_preferred:
            s = -1.0
        return s


@register_plugin
class NodeGroupPlugin(Plugin):
    name = "nodegroup"
    ARGUMENTS = {"strict": A.BOOL, "enablePreferredOrder": A.BOOL}

    def on_session_open(self, ssn: Session) -> None:
        strict = self.arg_bool("strict", True)
        by_order = self.arg_bool("enablePreferredOrder", False)
        nodes = ssn.nodes
        hierarchy = any(
            opt.name == self.name and opt.enabled("Hierarchy") for tier in ssn.tiers for opt in tier.plugins
        )
        own = {name: (q.queue.spec.affinity if q.queue is not None else None) for name, q in ssn.queues.items()}

        def inherited(name: str) -> dict[str, Any] | None:
            seen = set()
            while name in own and name not in seen:
                if QueueAffinity(own[name]).unset is False:
                    return own[name]
                seen.add(name)
                q = ssn.queues[name]
                name = q.parent or ("root" if name != "root" else "")
            return None

        affinities: dict[str, tuple[str, QueueAffinity]] = {}
        for name in ssn.queues:
            spec = inherited(name) if hierarchy else own[name]
            affinities[name] = (json.dumps(spec, sort_keys=True), QueueAffinity(spec))

        # Per-group resource limits per queue: {queue: {group: (columns, limit)}}, or INVALID.
        index = ssn.index
        limits: dict[str, Any] = {}
        for name, q in ssn.queues.items():
            raw = (q.queue.metadata.annotations if q.queue is not None else {}).get(LIMITS_ANNOTATION)
            if not raw:
                continue
            try:
                parsed = json.loads(raw)
                per_group = {}
                for group, res in parsed.items():
                    cols, vals = [], []
                    for r, v in res.items():
                        if r in index.pos:
                            cols.append(index.pos[r])
                            vals.append(float(parse_quantity(v)))
                    per_group[str(group)] = (np.array(cols, dtype=np.int64), np.array(vals))
                limits[name] = per_group
            except (ValueError, TypeError, AttributeError):
                limits[name] = INVALID
        groups = [nodes.labels[i].get(NODEGROUP_LABEL) for i in range(len(nodes))]
        held: dict[tuple[str, str | None], np.ndarray] = {}  # (queue, group) -> what the queue's tasks hold there
        if limits:
            for job in ssn.jobs.values():
                if job.queue in limits:
                    for t in job.tasks.values():
                        if t.status in ALLOCATED and t.node >= 0 and groups[t.node] is not None:
                            k = (job.queue, groups[t.node])
                            held[k] = held.get(k, 0) + t.resreq

        def queue_of(task: TaskInfo) -> str:
            job = ssn.jobs.get(task.job)
            return job.queue if job is not None else ""

        def reason(aff: QueueAffinity, group: str | None) -> str:
            if group is None:
                return "" if not strict and aff.unset else "node group label not found"
            if aff.unset:
                return "node group affinity not specified"
            return "" if aff.allows(group) else "node does not satisfy the node group affinity"

        def predicate(task: TaskInfo) -> tuple[np.ndarray, Explain]:
            queue = queue_of(task)
            key, aff = affinities.get(queue, ("null", QueueAffinity(None)))

            def build() -> np.ndarray:
                return np.fromiter(
                    (reason(aff, nodes.labels[i].get(NODEGROUP_LABEL)) == "" for i in range(len(nodes))),
                    dtype=bool,
                    count=len(nodes),
                )

            mask = ssn.static_mask(task, ("nodegroup", strict, key), build)
            lim = limits.get(queue)
            if lim is INVALID:
                return np.zeros(len(nodes), dtype=bool), explain
            if lim:
                for group, (cols, vals) in lim.items():
                    have = held.get((queue, group))
                    after = task.resreq[cols] + (have[cols] if have is not None else 0)
                    if np.any(after > vals + EPS):
                        mask = mask & np.fromiter((g != group for g in groups), dtype=bool, count=len(nodes))
            return mask, explain

        def explain(task: TaskInfo, failing: np.ndarray) -> dict[str, int]:
            queue = queue_of(task)
            _, aff = affinities.get(queue, ("null", QueueAffinity(None)))
            out: dict[str, int] = {}
            for i in np.flatnonzero(failing):
                why = reason(aff, nodes.labels[i].get(NODEGROUP_LABEL))
                if not why:
                    why = (
                        "node group resource limit annotation invalid"
                        if limits.get(queue) is INVALID
                        else "node group resource limit exceeded"
                    )
                r = "node(s) " + why
                out[r] = out.get(r, 0) + 1
            return out

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            _, aff = affinities.get(queue_of(task), ("null", QueueAffinity(None)))
            if aff.unset:
                return np.zeros(len(cand))
            return np.array(
                [
                    aff.score(g, by_order) if (g := nodes.labels[int(i)].get(NODEGROUP_LABEL)) is not None else 0.0
                    for i in cand
                ]
            )

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None and job.queue in limits and task.node >= 0 and groups[task.node] is not None:
                k = (job.queue, groups[task.node])
                held[k] = held.get(k, 0) + task.resreq
                placed_on[task.uid] = task.node

        def on_deallocate(task: TaskInfo) -> None:
            node = placed_on.pop(task.uid, task.node)
            job = ssn.jobs.get(task.job)
            if job is not None and job.queue in limits and node >= 0 and groups[node] is not None:
                k = (job.queue, groups[node])
                if k in held:
                    held[k] = held[k] - task.resreq

        placed_on: dict[str, int] = {}
        if limits:
            ssn.add_event_handler(on_allocate, on_deallocate)
        ssn.add_predicate_fn(self.name, predicate)
        # A node's score depends on its own labels and the task's queue only.
        ssn.add_node_order_fn(self.name, score, cache_key=lambda task: ("nodegroup", queue_of(task)))
