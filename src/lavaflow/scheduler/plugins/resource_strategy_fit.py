"""resource-strategy-fit: per-resource MostAllocated / LeastAllocated scoring with weights.

Arguments (Volcano's): ``resourceStrategyFitWeight`` (default 10) and ``resources``, a map
from resource name (or a prefix ending in ``*``, e.g. ``nvidia.com/*``; the exact name
wins, then the longest prefix) to ``{type: MostAllocated|LeastAllocated, weight: n}``
(default: cpu and memory, LeastAllocated, weight 1). A pod may choose for itself with the
annotations ``volcano.sh/resource-strategy-scoring-type`` and
``volcano.sh/resource-strategy-weight`` (JSON map resource → weight).

For each resource the task requests that has a strategy: MostAllocated scores
(used + request) / allocatable, LeastAllocated (allocatable − used − request) / allocatable,
times its weight (0 when the node would be overfull); the weighted mean is scaled to
0–100 × resourceStrategyFitWeight.

``sra: {enable: true, resources: "nvidia.com/gpu", weight: 10, resourceWeight: {nvidia.com/gpu: 1}}``
(scarce resource avoidance) adds 100 × weight × (1 − share of the listed resources' weights
the node has), so tasks keep off nodes with scarce resources they do not need (0 on a node
lacking something the task asks for). ``proportional: {enable: true, resources:
"nvidia.com/gpu", resourceProportion: {nvidia.com/gpu.cpu: 4, nvidia.com/gpu.memory: 8}}``
filters: a task asking for none of those resources may not leave a node with less than
(rate × the node's idle GPUs) CPUs and GB of memory idle.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..framework.session_plugins import Explain
    from ..model import TaskInfo

TYPE_KEY = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_KEY = "volcano.sh/resource-strategy-weight"
MOST, LEAST = "MostAllocated", "LeastAllocated"
MAX_SCORE = 100.0


def _truthy(v: object) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


def _strategy(name: str, resources: dict[str, tuple[str, float]]) -> tuple[str, float] | None:
    if name in resources:
        return resources[name]
    best = None
    for key, val in resources.items():
        if key.endswith("*") and name.startswith(key[:-1]) and (best is None or len(key) > len(best[0])):
            best = (key, val)
    return best[1] if best else None


@register_plugin
class ResourceStrategyFitPlugin(Plugin):
    name = "resource-strategy-fit"
    ARGUMENTS = {"resourceStrategyFitWeight": A.NUMBER}

    @classmethod
    def check_arguments(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        out = A.check_declared(cls.ARGUMENTS, arguments)
        resources = arguments.get("resources")
        if resources is not None and not isinstance(resources, dict):
            out.append(("resources", f"expected a mapping of resource -> {{type, weight}}, got {resources!r}"))
        elif resources:
            for name, cfg in resources.items():
                out += A.check_mapping(f"resources.{name}", cfg, {"type": A.TEXT, "weight": A.NUMBER})
        sra = {"enable": A.BOOL, "weight": A.NUMBER, "resources": A.TEXT}
        out += A.check_mapping("sra", arguments.get("sra"), sra, {"resourceWeight": A.NUMBER})
        prop = {"enable": A.BOOL, "resources": A.TEXT}
        out += A.check_mapping("proportional", arguments.get("proportional"), prop, {"resourceProportion": A.NUMBER})
        return out

    def on_session_open(self, ssn: Session) -> None:
        weight = self.arg_float("resourceStrategyFitWeight", 10.0)
        if weight < 0:
            weight = 10.0
        raw = self.arguments.get("resources")
        resources: dict[str, tuple[str, float]] = {}
        if isinstance(raw, dict) and raw:
            for name, cfg in raw.items():
                name = str(name)
                if "*" in name and (name == "*" or not name.endswith("*") or name.count("*") != 1):
                    continue  # Volcano drops invalid wildcard patterns
                cfg = cfg if isinstance(cfg, dict) else {}
                kind = cfg.get("type", LEAST)
                w = float(cfg.get("weight", 1) or 1)
                resources[name] = (kind if kind in (MOST, LEAST) else LEAST, w if w > 0 else 1.0)
        else:
            resources = {"cpu": (LEAST, 1.0), "memory": (LEAST, 1.0)}
        nodes = ssn.nodes
        names = ssn.index.names
        index = ssn.index
        sra_arg = self.arguments.get("sra")
        sra_cfg: dict[str, Any] = sra_arg if isinstance(sra_arg, dict) else {}
        sra_weight = float(sra_cfg.get("weight", 0) or 0) if _truthy(sra_cfg.get("enable")) else 0.0
        sra_res: dict[str, float] = {}
        if sra_weight > 0:
            per_arg = sra_cfg.get("resourceWeight")
            per: dict[str, Any] = per_arg if isinstance(per_arg, dict) else {}
            for r in (x.strip() for x in str(sra_cfg.get("resources", "") or "").split(",")):
                if r:
                    w = float(per.get(r, 1) or 1)
                    sra_res[r] = w if w >= 0 else 1.0
        prop_arg = self.arguments.get("proportional")
        prop_cfg: dict[str, Any] = prop_arg if isinstance(prop_arg, dict) else {}
        proportional: list[tuple[int, float, float]] = []  # (column, cpu per unit, GB memory per unit)
        if _truthy(prop_cfg.get("enable")):
            rates_arg = prop_cfg.get("resourceProportion")
            rates: dict[str, Any] = rates_arg if isinstance(rates_arg, dict) else {}
            for r in (x.strip() for x in str(prop_cfg.get("resources", "") or "").split(",")):
                if r and r in index.pos:
                    c = float(rates.get(f"{r}.cpu", 1.0))
                    m = float(rates.get(f"{r}.memory", 1.0))
                    proportional.append((index.pos[r], c if c >= 0 else 1.0, m if m >= 0 else 1.0))
        if proportional:
            cpu_col, mem_col = index.pos.get("cpu"), index.pos.get("memory")

            def proportional_mask(task: TaskInfo) -> tuple[np.ndarray, Explain]:
                n = len(nodes)
                ok = np.ones(n, dtype=bool)
                if any(task.resreq[c] > 0 for c, _, _ in proportional):
                    return ok, proportional_explain
                idle = nodes.allocatable[:n] - nodes.used[:n]
                for c, rc, rm in proportional:
                    has = nodes.allocatable[:n, c] > 0
                    short = np.zeros(n, dtype=bool)
                    if cpu_col is not None:
                        short |= idle[:, cpu_col] - task.resreq[cpu_col] < idle[:, c] * rc - EPS
                    if mem_col is not None:
                        short |= idle[:, mem_col] - task.resreq[mem_col] < idle[:, c] * rm * 1e9 - EPS
                    ok &= ~(has & short)
                return ok, proportional_explain

            def proportional_explain(task: TaskInfo, failing: np.ndarray) -> dict[str, int]:
                return {
                    "node(s) must keep CPU and memory in proportion to their idle scarce resources": int(failing.sum())
                }

            ssn.add_predicate_fn(self.name, proportional_mask)
        if weight <= 0 and sra_weight <= 0:
            return
        sra_cols = [(index.pos[r], w) for r, w in sra_res.items() if r in index.pos]
        sra_sum = sum(sra_res.values())

        def plan(task: TaskInfo) -> list[tuple[int, str, float]]:
            pod = task.pod
            ann = pod.metadata.annotations if pod is not None else {}
            pod_type = ann.get(TYPE_KEY, "")
            pod_weights: dict[str, Any] = {}
            if pod_type:
                try:
                    pod_weights = json.loads(ann.get(WEIGHT_KEY, "") or "null") or {}
                except ValueError:
                    return []
                if not isinstance(pod_weights, dict):
                    return []
            out = []
            for c in np.flatnonzero(task.resreq > 0):
                name = names[c]
                if name == "pods":
                    continue
                if pod_type:
                    if name not in pod_weights:
                        continue
                    out.append((int(c), pod_type, float(pod_weights[name])))
                else:
                    s = _strategy(name, resources)
                    if s is not None:
                        out.append((int(c), s[0], s[1]))
            return out

        def sra(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            alloc = nodes.allocatable[cand]
            req = np.flatnonzero(task.resreq > 0)
            lacking = np.any(alloc[:, req] <= 0, axis=1) if len(req) else np.zeros(len(cand), dtype=bool)
            have = np.zeros(len(cand))
            for c, w in sra_cols:
                have += np.where(alloc[:, c] > 0, w, 0.0)
            s = 1.0 - have / sra_sum if sra_sum > 0 else np.zeros(len(cand))
            return np.where(lacking, 0.0, s) * MAX_SCORE * sra_weight

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            out = fit_score(task, cand) if weight > 0 else np.zeros(len(cand))
            if sra_weight > 0:
                out = out + sra(task, cand)
            return out

        def fit_score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            steps = plan(task)
            total = np.zeros(len(cand))
            wsum = 0.0
            broken = np.zeros(len(cand), dtype=bool)
            for c, kind, w in steps:
                a = nodes.allocatable[cand, c]
                after = nodes.used[cand, c] + task.resreq[c]
                broken |= after > a + EPS
                with np.errstate(divide="ignore", invalid="ignore"):
                    frac = np.where(a > 0, after / a, 0.0) if kind == MOST else np.where(a > 0, (a - after) / a, 0.0)
                total += w * frac
                wsum += w
            if wsum:
                total /= wsum
            return np.where(broken, 0.0, total) * MAX_SCORE * weight

        def key(task: TaskInfo) -> object:
            ann = task.pod.metadata.annotations if task.pod is not None else {}
            return (task.resreq.tobytes(), ann.get(TYPE_KEY, ""), ann.get(WEIGHT_KEY, ""))

        ssn.add_node_order_fn(self.name, score, cache_key=key)
