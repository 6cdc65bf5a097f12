"""binpack: prefer nodes that are already full, to keep whole nodes free for big jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import TaskInfo

MAX_SCORE = 100.0


@register_plugin
class BinpackPlugin(Plugin):
    name = "binpack"
    ARGUMENTS = {
        "binpack.weight": A.NUMBER,
        "binpack.cpu": A.NUMBER,
        "binpack.memory": A.NUMBER,
        "binpack.resources": A.TEXT,
        "binpack.resources.*": A.NUMBER,
    }

    def on_session_open(self, ssn: Session) -> None:
        weight = self.arg_float("binpack.weight", 1.0)
        per_resource: dict[str, float] = {
            "cpu": self.arg_float("binpack.cpu", 1.0),
            "memory": self.arg_float("binpack.memory", 1.0),
        }
        extra = str(self.arguments.get("binpack.resources", "") or "")
        for name in (s.strip() for s in extra.split(",")):
            if name:
                per_resource[name] = self.arg_float(f"binpack.resources.{name}", 1.0)
        cols = [(ssn.index.pos[n], w) for n, w in per_resource.items() if n in ssn.index.pos and w > 0]
        nodes = ssn.nodes

        def score_one(i: int, req: np.ndarray) -> float:
            # The vector computation below for a single node, in scalar floats (same IEEE operations).
            alloc = nodes.allocatable[i]
            used = nodes.used[i]
            total = 0.0
            wsum = 0.0
            for c, w in cols:
                r = float(req[c])
                if r <= 0:
                    continue
                a = float(alloc[c])
                after = float(used[c]) + r
                frac = after / a if (a > 0 and after <= a + 1e-9) else 0.0
                total += w * frac
                wsum += w
            if wsum == 0:
                return total
            return total / wsum * MAX_SCORE * weight

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            if weight <= 0 or not cols:
                return np.zeros(len(cand))
            if len(cand) == 1:  # the session rescoring the one node a placement changed
                return np.array([score_one(int(cand[0]), task.resreq)])
            total = np.zeros(len(cand))
            wsum = 0.0
            alloc = nodes.allocatable[cand]
            used = nodes.used[cand]
            req = task.resreq
            with np.errstate(divide="ignore", invalid="ignore"):
                for c, w in cols:
                    if req[c] <= 0:
                        continue  # Volcano only weighs the resources the task asks for
                    a = alloc[:, c]
                    after = used[:, c] + req[c]
                    frac = np.where((a > 0) & (after <= a + 1e-9), after / a, 0.0)
                    total += w * frac
                    wsum += w
            if wsum == 0:
                return total
            return total / wsum * MAX_SCORE * weight

        # A node's score depends on its own row and on the task's requests only.
        ssn.add_node_order_fn(self.name, score, cache_key=lambda task: task.resreq.tobytes())
