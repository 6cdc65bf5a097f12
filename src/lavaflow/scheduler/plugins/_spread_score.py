"""kube-scheduler's PodTopologySpread *score*, as Volcano's nodeorder plugin runs it.

Volcano's nodeorder scores nodes with kube-scheduler's PodTopologySpread plugin (weight
``podtopologyspread.weight``, 2 by default) built with ``SystemDefaulting``. A pod's
``ScheduleAnyway`` constraints are scored; a pod with no constraints at all gets the system
default ones when a Service of its namespace selects it (the selectors of every such Service,
ANDed): at most 3 pods of skew per node (``kubernetes.io/hostname``) and 5 per zone
(``topology.kubernetes.io/zone``). The svc job plugin makes such a Service for every Job that uses
it (and the mpi, pytorch and tensorflow plugins use it), so Volcano spreads those Jobs' pods over
nodes unless other scores outweigh it; the differential harness (benchmarks/volcano_diff.py)
found vc-scheduler placing examples/mpi-plugin.yaml's three pods 2 + 1 where lavaflow packed them
on one node.

The score, over the candidate nodes, per constraint whose topology key the node has: the number of
matching pods (same namespace, the constraint's selector, not terminating) on the node (hostname)
or in its domain (any other key, counted over every node of that domain), times
``log(domains among the candidates + 2)``, plus ``maxSkew - 1``; summed over the constraints and
rounded. Normalised as kube-scheduler does: ``100 * (max + min - score) // max`` (100 for all
when the largest is 0). With explicit constraints a candidate lacking one of their keys scores 0
and is left out of the domains; with the system defaults a node lacking a key only skips that
constraint. Not modelled: the selectors of ReplicaSets, StatefulSets and ReplicationControllers
(kube-scheduler's default selector includes them), node inclusion policies (every node with the
key counts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.selectors import label_selector_matches
from ..model import TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..model import NodeSet, TaskInfo

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SYSTEM_DEFAULTS = ((HOSTNAME, 3), (ZONE, 5))
MAX_SCORE = 100


@dataclass(frozen=True)
class Spread:
    """The constraints a task is scored by: (topology key, maxSkew, selector over pod labels)."""

    constraints: tuple[tuple[str, int, Callable[[dict[str, str]], bool]], ...]
    system: bool  # the system defaults: a node lacking a key skips that constraint only


def spread_of(task: TaskInfo, services: Iterable[Any]) -> Spread | None:
    """The constraints PodTopologySpread scores ``task`` by, or None (no score)."""
    spec = task.pod.spec if task.pod is not None else None
    if spec is None:
        return None
    if spec.topology_spread_constraints:
        soft = tuple(
            (c.topology_key, int(c.max_skew), lambda labels, sel=c.label_selector: label_selector_matches(sel, labels))
            for c in spec.topology_spread_constraints
            if c.when_unsatisfiable == "ScheduleAnyway" and c.topology_key
        )
        return Spread(soft, system=False) if soft else None
    labels = task.labels or {}
    wanted: dict[str, str] = {}
    for svc in services:
        sel = svc.spec.selector
        if sel and svc.namespace == task.namespace and all(labels.get(k) == v for k, v in sel.items()):
            wanted.update(sel)
    if not wanted:
        return None

    def match(pod_labels: dict[str, str]) -> bool:
        return all(pod_labels.get(k) == v for k, v in wanted.items())

    return Spread(tuple((key, skew, match) for key, skew in SYSTEM_DEFAULTS), system=True)


def _counted(t: TaskInfo, task: TaskInfo, match: Callable[[dict[str, str]], bool]) -> bool:
    return (
        t is not task
        and t.namespace == task.namespace
        and t.status is not TaskStatus.RELEASING
        and match(t.labels or {})
    )


def spread_scores(spread: Spread, task: TaskInfo, nodes: NodeSet, cand: np.ndarray) -> np.ndarray:
    """PodTopologySpread's normalised score (0..100) of each candidate node for ``task``."""
    labels = nodes.labels
    idx = cand.tolist()
    keys = [key for key, _, _ in spread.constraints]
    ignored = [not spread.system and any(k not in labels[i] for k in keys) for i in idx]
    raw = [0.0] * len(idx)
    for key, skew, match in spread.constraints:
        scored = [i for i, ign in zip(idx, ignored, strict=True) if not ign and key in labels[i]]
        size = len(scored) if key == HOSTNAME else len({labels[i][key] for i in scored})
        weight = math.log(size + 2)
        count: dict[int, int] = {}  # candidate node -> matching pods on it or in its domain
        if key == HOSTNAME:
            count = {i: sum(1 for t in nodes.tasks[i].values() if _counted(t, task, match)) for i in scored}
        else:
            per_value = dict.fromkeys((labels[i][key] for i in scored), 0)
            for j, tasks in enumerate(nodes.tasks):
                v = labels[j].get(key)
                if v is not None and v in per_value:
                    per_value[v] += sum(1 for t in tasks.values() if _counted(t, task, match))
            count = {i: per_value[labels[i][key]] for i in scored}
        for n, i in enumerate(idx):
            if i in count:
                raw[n] += count[i] * weight + (skew - 1)
    ints = [math.floor(s + 0.5) for s in raw]  # Go's math.Round of a non-negative score
    kept = [s for s, ign in zip(ints, ignored, strict=True) if not ign]
    out = np.zeros(len(idx))
    if not kept:
        return out
    lo, hi = min(kept), max(kept)
    for n, s in enumerate(ints):
        if ignored[n]:
            continue
        out[n] = MAX_SCORE if hi == 0 else MAX_SCORE * (hi + lo - s) // hi
    return out
