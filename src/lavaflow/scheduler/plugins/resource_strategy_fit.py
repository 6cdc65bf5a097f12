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
0–100 × resourceStrategyFitWeight. Not modelled: the ``sra`` and ``proportional`` policies.
"""

from __future__ import annotations

import json

import numpy as np

from ..framework.registry import Plugin, register_plugin
from ..resources import EPS

TYPE_KEY = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_KEY = "volcano.sh/resource-strategy-weight"
MOST, LEAST = "MostAllocated", "LeastAllocated"
MAX_SCORE = 100.0


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

    def on_session_open(self, ssn) -> None:
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
        if weight <= 0:
            return
        nodes = ssn.nodes
        names = ssn.index.names

        def plan(task) -> list[tuple[int, str, float]]:
            pod = task.pod
            ann = pod.metadata.annotations if pod is not None else {}
            pod_type = ann.get(TYPE_KEY, "")
            pod_weights: dict = {}
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

        def score(task, cand: np.ndarray) -> np.ndarray:
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

        def key(task):
            ann = task.pod.metadata.annotations if task.pod is not None else {}
            return (task.resreq.tobytes(), ann.get(TYPE_KEY, ""), ann.get(WEIGHT_KEY, ""))

        ssn.add_node_order_fn(self.name, score, cache_key=key)
