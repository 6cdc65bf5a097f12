"""nodeorder: Kubernetes' scoring plugins with Volcano's default weights.

leastrequested (1), balancedresource (1), nodeaffinity (2) for preferred node
affinity, tainttoleration (3) against PreferNoSchedule taints, podtopologyspread (2) for pods
with ScheduleAnyway constraints or selected by a Service (plugins/_spread_score.py). Every scorer
gives 0..100 and is computed over all candidate nodes at once.

With Volcano's node choice (``ssn.node_choice.volcano``) leastrequested, mostrequested and
balancedresource are kube-scheduler's own integer scores (millicores and bytes, integer division,
balances truncated to integers; as of Kubernetes 1.36 balancedresource scores the change in
balance the pod makes), as Volcano gets them from kube-scheduler's plugins: a node's score then
steps down one point at a time as pods land on it, and where those steps fall against binpack's
continuous score decides how many pods a node takes before an emptier one wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.selectors import (
    NONZERO_DEFAULTS,
    count_intolerable_prefer_no_schedule,
    pod_requests,
    preferred_node_affinity_score,
)
from ..framework import arguments as A
from ..framework.memo import state
from ..framework.registry import Plugin, register_plugin
from ..framework.session_plugins import UNCACHED
from ..resources import CPU, MEMORY
from ._spread_score import Spread, spread_of, spread_scores

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import TaskInfo

MAX_SCORE = 100.0
# score(allocatable rows, used rows, the task's request) -> one score per row
Scorer = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def least_requested(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> np.ndarray:
    """Mean over cpu and memory of free fraction after placing the pod, ×100."""
    out = np.zeros(alloc.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        for r in (CPU, MEMORY):
            a = alloc[:, r]
            s = np.where(a > 0, (a - used[:, r] - req[r]) / a, 0.0)
            out += np.clip(s, 0.0, 1.0)
    return out * (MAX_SCORE / 2)


def balanced_allocation(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> np.ndarray:
    """100 × (1 − |cpu fraction − memory fraction| / 2), as kube-scheduler for two resources."""
    with np.errstate(divide="ignore", invalid="ignore"):
        fc = np.where(alloc[:, CPU] > 0, (used[:, CPU] + req[CPU]) / alloc[:, CPU], 0.0)
        fm = np.where(alloc[:, MEMORY] > 0, (used[:, MEMORY] + req[MEMORY]) / alloc[:, MEMORY], 0.0)
    fc = np.minimum(fc, 1.0)
    fm = np.minimum(fm, 1.0)
    score: np.ndarray = (1.0 - np.abs(fc - fm) / 2.0) * MAX_SCORE
    return score


def _kube_units(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(allocatable, requested with the pod) per resource, in kube-scheduler's integer units:
    millicores for cpu, bytes for memory."""
    out = []
    for r, scale in ((CPU, 1000.0), (MEMORY, 1.0)):
        a = np.rint(alloc[:, r] * scale).astype(np.int64)
        q = np.rint((used[:, r] + req[r]) * scale).astype(np.int64)
        out.append((a, q))
    return out


def _kube_weighted(alloc: np.ndarray, used: np.ndarray, req: np.ndarray, most: bool) -> np.ndarray:
    """kube-scheduler's NodeResourcesFit score over cpu and memory, in integers: LeastAllocated
    (weights 50/50, Volcano's setting) or MostAllocated (weights 1/1); a resource a node does not
    have is left out of the weighted mean."""
    total = np.zeros(alloc.shape[0], dtype=np.int64)
    weights = np.zeros(alloc.shape[0], dtype=np.int64)
    weight = 1 if most else 50
    for a, q in _kube_units(alloc, used, req):
        has = a > 0
        per = np.where(has, a, 1)
        score = np.minimum(q, a) * 100 // per if most else np.where(q > a, 0, (a - q) * 100 // per)
        total += np.where(has, score * weight, 0)
        weights += np.where(has, weight, 0)
    out: np.ndarray = (total // np.maximum(weights, 1)).astype(float)
    return out


def kube_least_requested(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> np.ndarray:
    return _kube_weighted(alloc, used, req, most=False)


def kube_most_requested(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> np.ndarray:
    return _kube_weighted(alloc, used, req, most=True)


def _kube_balance(fractions: list[np.ndarray], counted: list[np.ndarray]) -> np.ndarray:
    """kube-scheduler's balance over the resources ``counted`` per node (cpu, memory and a GPU
    the pod asks for): 1 - the standard deviation of their ``fractions`` (each capped at 1), ×100
    truncated; with two it is half their difference, with one or none it is 0 (a node without one
    of cpu and memory is perfectly balanced)."""
    k = np.sum(counted, axis=0)
    fs = [np.where(c, np.minimum(f, 1.0), 0.0) for f, c in zip(fractions, counted, strict=True)]
    two = np.abs(fs[0] - fs[1]) / 2  # (cpu and memory: the case kube-scheduler works out apart)
    if len(fs) > 2:
        mean = np.sum(fs, axis=0) / np.maximum(k, 1)
        var = np.sum([np.where(c, (f - mean) ** 2, 0.0) for f, c in zip(fs, counted, strict=True)], axis=0)
        std = np.where(k > 2, np.sqrt(var / np.maximum(k, 1)), np.where(k == 2, two, 0.0))
    else:
        std = np.where(k == 2, two, 0.0)
    return np.trunc((1 - std) * MAX_SCORE).astype(np.int64)


def kube_balanced_allocation(
    alloc: np.ndarray, used: np.ndarray, req: np.ndarray, gpu: int | None = None
) -> np.ndarray:
    """kube-scheduler's BalancedAllocation as of Kubernetes 1.36 (Volcano's main): it scores the
    *change* in balance the pod makes, 50 + (50 + with - without) // 2 over the integer balances
    with and without the pod. A change of less than a point gives 75, a node whose truncated
    balance drops a point gives 74: the first pod on an empty node, and the tenth of these small
    pods, cost a point (the rule before 1.36, the balance with the pod alone, made the first pod
    free). Volcano gives it cpu, memory and nvidia.com/gpu: with ``gpu`` (that column, for a pod
    asking for GPUs) the GPU joins the balance on nodes that have GPUs (three fractions: their
    standard deviation)."""
    (ac, qc), (am, qm) = _kube_units(alloc, used, req)
    (_, uc), (_, um) = _kube_units(alloc, used, np.zeros_like(req))
    counted = [ac > 0, am > 0]

    def frac(q: np.ndarray, a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(q / np.where(a > 0, a, 1), dtype=float)

    after, before = [frac(qc, ac), frac(qm, am)], [frac(uc, ac), frac(um, am)]
    if gpu is not None:
        ag = np.rint(alloc[:, gpu]).astype(np.int64)
        ug = np.rint(used[:, gpu]).astype(np.int64)
        counted.append(ag > 0)
        after.append(frac(ug + int(round(float(req[gpu]))), ag))
        before.append(frac(ug, ag))
    with_pod = _kube_balance(after, counted)
    without = _kube_balance(before, counted)
    half = int(MAX_SCORE) // 2
    out: np.ndarray = (half + (half + with_pod - without) // 2).astype(float)
    return out


GPU_RESOURCE = "nvidia.com/gpu"  # the extended resource Volcano's BalancedAllocation counts
_NONZERO_KEPT = 4096
# id(a pod spec's containers) -> (containers, init containers, overhead, what non-zero requests add)
_nonzero_kept: dict[int, tuple[Any, Any, Any, tuple[float, float]]] = {}


def nonzero_extra(task: TaskInfo) -> tuple[float, float]:
    """What kube-scheduler's non-zero requests add to ``task``'s cpu (cores) and memory (bytes):
    0.1 core for each container asking for no cpu, 200 MiB for each asking for no memory (its
    LeastAllocated and MostAllocated scores count those). Pods of one template share their
    containers, and the answer with them."""
    pod = task.pod
    if pod is None:
        return (0.0, 0.0)
    spec = pod.spec
    containers = getattr(spec, "containers", None)
    if containers is None:
        return (0.0, 0.0)
    init, overhead = spec.init_containers, spec.overhead
    hit = _nonzero_kept.get(id(containers))
    if hit is not None and hit[0] is containers and hit[1] is init and hit[2] is overhead:
        return hit[3]
    given = pod_requests(spec)
    nonzero = pod_requests(spec, NONZERO_DEFAULTS)
    extra = (
        nonzero.get("cpu", 0.0) - given.get("cpu", 0.0),
        nonzero.get("memory", 0.0) - given.get("memory", 0.0),
    )
    if len(_nonzero_kept) >= _NONZERO_KEPT:
        _nonzero_kept.clear()
    _nonzero_kept[id(containers)] = (containers, init, overhead, extra)
    return extra


@dataclass(slots=True)
class TaintsSeen:
    """Whether any node has a PreferNoSchedule taint, for the node set (identity), its version
    and size it was worked out at."""

    stamp: tuple[int, int, int] | None = None
    prefer_no_schedule: bool = False


@register_plugin
class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    ARGUMENTS = {
        "leastrequested.weight": A.NUMBER,
        "mostrequested.weight": A.NUMBER,
        "balancedresource.weight": A.NUMBER,
        "nodeaffinity.weight": A.NUMBER,
        "tainttoleration.weight": A.NUMBER,
        "podtopologyspread.weight": A.NUMBER,
    }

    def on_session_open(self, ssn: Session) -> None:
        w_least = self.arg_float("leastrequested.weight", 1.0)
        w_most = self.arg_float("mostrequested.weight", 0.0)
        w_balanced = self.arg_float("balancedresource.weight", 1.0)
        w_affinity = self.arg_float("nodeaffinity.weight", 2.0)
        w_taint = self.arg_float("tainttoleration.weight", 3.0)
        w_spread = self.arg_float("podtopologyspread.weight", 2.0)
        nodes = ssn.nodes
        services: dict[str, list[Any]] = {}  # namespace -> its Services
        for svc in ssn.cache.objects.get("Service", {}).values():
            services.setdefault(svc.namespace, []).append(svc)
        spreads: dict[str, Spread | None] = {}  # task uid -> what PodTopologySpread scores it by

        def spread(task: TaskInfo) -> Spread | None:
            if not w_spread:
                return None
            if task.uid not in spreads:
                spreads[task.uid] = spread_of(task, services.get(task.namespace, ()))
            return spreads[task.uid]

        # (node set, its labels/taints version, size) -> whether any node has a PreferNoSchedule
        # taint: kept across sessions (a walk over every node's taints per session was 9 % of a
        # sparse-arrival replay on 1,000 nodes)
        taints = state(ssn.cache, "nodeorder.taints", TaintsSeen)

        def prefer_no_schedule_taints() -> bool:
            stamp = (id(nodes), nodes.version, len(nodes))
            if taints.stamp != stamp:
                taints.stamp = stamp
                taints.prefer_no_schedule = any(any(t.effect == "PreferNoSchedule" for t in ts) for ts in nodes.taints)
            return taints.prefer_no_schedule

        def static_scores(task: TaskInfo) -> np.ndarray | None:
            spec = task.pod.spec if task.pod is not None else None
            if spec is None:
                return None
            prefs = (
                spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
                if (spec.affinity is not None and spec.affinity.node_affinity is not None)
                else []
            )
            has_taints = prefer_no_schedule_taints()
            if not prefs and not has_taints:
                return None

            def build() -> np.ndarray:
                n = len(nodes)
                aff = np.zeros(n)
                taint = np.zeros(n)
                for i in range(n):
                    if prefs:
                        aff[i] = preferred_node_affinity_score(spec, nodes.labels[i], nodes.names[i])
                    if has_taints:
                        taint[i] = count_intolerable_prefer_no_schedule(spec.tolerations, nodes.taints[i])
                if aff.max(initial=0) > 0:
                    aff = aff * (MAX_SCORE / aff.max())
                if taint.max(initial=0) > 0:
                    taint = MAX_SCORE - taint * (MAX_SCORE / taint.max())
                else:
                    taint = np.full(n, MAX_SCORE)
                return w_affinity * aff + w_taint * taint

            return ssn.static_mask(task, ("nodeorder", task.signature), build)

        def score_one(task: TaskInfo, i: int) -> float:
            # score() for a single node in scalar floats: the same IEEE operations in the same order.
            a_cpu, a_mem = float(nodes.allocatable[i, CPU]), float(nodes.allocatable[i, MEMORY])
            u_cpu, u_mem = float(nodes.used[i, CPU]), float(nodes.used[i, MEMORY])
            r_cpu, r_mem = float(task.resreq[CPU]), float(task.resreq[MEMORY])
            out = 0.0
            if w_least or w_most:
                least = 0.0
                for a, u, r in ((a_cpu, u_cpu, r_cpu), (a_mem, u_mem, r_mem)):
                    s = (a - u - r) / a if a > 0 else 0.0
                    least += s if s != s else min(max(s, 0.0), 1.0)
                least = least * (MAX_SCORE / 2)
                if w_least:
                    out += w_least * least
                if w_most:
                    out += w_most * (MAX_SCORE - least)
            if w_balanced:
                fc = (u_cpu + r_cpu) / a_cpu if a_cpu > 0 else 0.0
                fm = (u_mem + r_mem) / a_mem if a_mem > 0 else 0.0
                fc = fc if fc != fc else min(fc, 1.0)
                fm = fm if fm != fm else min(fm, 1.0)
                out += w_balanced * ((1.0 - abs(fc - fm) / 2.0) * MAX_SCORE)
            static = static_scores(task)
            if static is not None:
                out += float(static[i])
            return out

        def weighted(task: TaskInfo, cand: np.ndarray, least: Scorer, most: Scorer, balanced: Scorer) -> np.ndarray:
            """The weighted sum of the three scores (one flavour of each) plus the static ones."""
            alloc = nodes.allocatable[cand]
            used = nodes.used[cand]
            req = task.resreq
            out = np.zeros(len(cand))
            if w_least:
                out += w_least * least(alloc, used, req)
            if w_most:
                out += w_most * most(alloc, used, req)
            if w_balanced:
                out += w_balanced * balanced(alloc, used, req)
            static = static_scores(task)
            if static is not None:
                out += static[cand]
            return out

        def with_spread(task: TaskInfo, cand: np.ndarray, out: np.ndarray) -> np.ndarray:
            sp = spread(task)
            return out if sp is None else out + w_spread * spread_scores(sp, task, nodes, cand)

        gpu_col = ssn.index.pos.get(GPU_RESOURCE)

        def kube_score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            """kube-scheduler's scores as Volcano gets them: LeastAllocated and MostAllocated over
            the non-zero requests (a container asking for no cpu counts 0.1 core, none for memory
            200 MiB, on the node as for the pod), BalancedAllocation over the requests as given,
            with nvidia.com/gpu when the pod asks for it, and 0 for a pod that asks for none of
            cpu, memory and GPUs."""
            alloc = nodes.allocatable[cand]
            used = nodes.used[cand]
            req = task.resreq
            out = np.zeros(len(cand))
            if w_least or w_most:
                extra = nodes.track_nonzero(nonzero_extra)[cand]
                task_extra = nonzero_extra(task)
                used_nz = used[:, :2] + extra
                req_nz = req[:2] + np.array(task_extra)
                if w_least:
                    out += w_least * kube_least_requested(alloc, used_nz, req_nz)
                if w_most:
                    out += w_most * kube_most_requested(alloc, used_nz, req_nz)
            if w_balanced:
                gpu = gpu_col if gpu_col is not None and gpu_col < len(req) and req[gpu_col] > 0 else None
                if gpu is not None or req[CPU] > 0 or req[MEMORY] > 0:
                    out += w_balanced * kube_balanced_allocation(alloc, used, req, gpu)
            static = static_scores(task)
            if static is not None:
                out += static[cand]
            return with_spread(task, cand, out)

        def most_requested(alloc: np.ndarray, used: np.ndarray, req: np.ndarray) -> np.ndarray:
            return MAX_SCORE - least_requested(alloc, used, req)

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            if len(cand) == 1 and spread(task) is None:  # the session rescoring the one node a placement changed
                return np.array([score_one(task, int(cand[0]))])
            return with_spread(task, cand, weighted(task, cand, least_requested, most_requested, balanced_allocation))

        def cache_key(task: TaskInfo) -> Any:
            # A node's score depends on its own row and on the task's requests and signature only,
            # unless PodTopologySpread scores the task (other nodes' pods, normalised over the
            # candidates): then it is scored over the candidates each time.
            if spread(task) is not None:
                return UNCACHED
            if ssn.node_choice.volcano:  # (two pods asking alike may differ in what they leave unasked)
                return (task.resreq.tobytes(), task.signature, task.pod is None, nonzero_extra(task))
            return (task.resreq.tobytes(), task.signature, task.pod is None)

        ssn.add_node_order_fn(self.name, kube_score if ssn.node_choice.volcano else score, cache_key=cache_key)
