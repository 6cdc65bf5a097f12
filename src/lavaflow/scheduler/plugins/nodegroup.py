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

Not modelled: hierarchical inheritance of affinity and the per-group resource-limit annotation.
"""

from __future__ import annotations

import json

import numpy as np

from ..framework.registry import Plugin, register_plugin

NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
BASE_SCORE = 100.0


class QueueAffinity:
    def __init__(self, spec: dict | None) -> None:
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

    def on_session_open(self, ssn) -> None:
        strict = self.arg_bool("strict", True)
        by_order = self.arg_bool("enablePreferredOrder", False)
        nodes = ssn.nodes
        affinities: dict[str, tuple[str, QueueAffinity]] = {}
        for name, q in ssn.queues.items():
            spec = q.queue.spec.affinity if q.queue is not None else None
            affinities[name] = (json.dumps(spec, sort_keys=True), QueueAffinity(spec))

        def queue_of(task) -> str:
            job = ssn.jobs.get(task.job)
            return job.queue if job is not None else ""

        def reason(aff: QueueAffinity, group: str | None) -> str:
            if group is None:
                return "" if not strict and aff.unset else "node group label not found"
            if aff.unset:
                return "node group affinity not specified"
            return "" if aff.allows(group) else "node does not satisfy the node group affinity"

        def predicate(task):
            queue = queue_of(task)
            key, aff = affinities.get(queue, ("null", QueueAffinity(None)))

            def build() -> np.ndarray:
                return np.fromiter((reason(aff, nodes.labels[i].get(NODEGROUP_LABEL)) == "" for i in range(len(nodes))),
                                   dtype=bool, count=len(nodes))

            return ssn.static_mask(task, ("nodegroup", strict, key), build), explain

        def explain(task, failing: np.ndarray) -> dict[str, int]:
            _, aff = affinities.get(queue_of(task), ("null", QueueAffinity(None)))
            out: dict[str, int] = {}
            for i in np.flatnonzero(failing):
                r = "node(s) " + (reason(aff, nodes.labels[i].get(NODEGROUP_LABEL)) or "didn't satisfy the node group affinity")
                out[r] = out.get(r, 0) + 1
            return out

        def score(task, cand: np.ndarray) -> np.ndarray:
            _, aff = affinities.get(queue_of(task), ("null", QueueAffinity(None)))
            if aff.unset:
                return np.zeros(len(cand))
            return np.array([aff.score(g, by_order) if (g := nodes.labels[int(i)].get(NODEGROUP_LABEL)) is not None else 0.0
                             for i in cand])

        ssn.add_predicate_fn(self.name, predicate)
        # A node's score depends on its own labels and the task's queue only.
        ssn.add_node_order_fn(self.name, score, cache_key=lambda task: ("nodegroup", queue_of(task)))
