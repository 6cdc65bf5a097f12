"""rescheduling: victims for the shuffle action, Volcano's ``lowNodeUtilization`` strategy.

Arguments: ``interval`` (default ``5m``: the strategies run in the first session at least
that long after their last run) and ``strategies``, a list of ``{name: lowNodeUtilization,
params: {thresholds: {cpu: %, memory: %, pods: %}, targetThresholds: {...}}}`` (defaults
100 % each, i.e. nothing happens until configured).

Nodes below every ``thresholds`` value are underused; nodes above some ``targetThresholds``
value are overused. While there are both, running pods are taken from the most used
overused nodes (lowest priority first; never system-critical or non-preemptable ones) as
long as their node stays at or above its target and the underused nodes can take them below
their targets. Utilisation is what pods request (the simulator has no usage metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api.admission import parse_duration
from ..framework import arguments as A
from ..framework.memo import state
from ..framework.registry import Plugin, register_plugin

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import TaskInfo

RESOURCES = ("cpu", "memory", "pods")


def _thresholds(raw: object, default: float = 100.0) -> dict[str, float]:
    out = {r: default for r in RESOURCES}
    if isinstance(raw, dict):
        for k, v in raw.items():
            key = "pods" if k == "pod" else str(k)
            if key in out:
                try:
                    out[key] = float(v)
                except (TypeError, ValueError):
                    pass
    return out


@dataclass(slots=True)
class Rescheduled:
    """Kept across sessions: when the plugin last chose victims."""

    last: float | None = None


@register_plugin
class ReschedulingPlugin(Plugin):
    name = "rescheduling"
    ARGUMENTS = {"interval": A.DURATION}

    @classmethod
    def check_arguments(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        out = A.check_declared(cls.ARGUMENTS, arguments)
        strategies = arguments.get("strategies")
        if strategies is None:
            return out
        if not isinstance(strategies, list):
            return [*out, ("strategies", f"expected a list of {{name, params}}, got {strategies!r}")]
        for i, st in enumerate(strategies):
            if not isinstance(st, dict):
                out.append((f"strategies[{i}]", f"expected a mapping with name and params, got {st!r}"))
                continue
            nested = {"thresholds": A.NUMBER, "targetThresholds": A.NUMBER}
            out += A.check_mapping(f"strategies[{i}].params", st.get("params"), {}, nested)
        return out

    def on_session_open(self, ssn: Session) -> None:
        try:
            interval = parse_duration(str(self.arguments.get("interval", "5m")))
        except ValueError:
            interval = 300.0
        strategies = self.arguments.get("strategies") or [{"name": "lowNodeUtilization"}]
        lnu = next((s for s in strategies if isinstance(s, dict) and s.get("name") == "lowNodeUtilization"), None)
        if lnu is None:
            return
        kept = state(ssn.cache, self.name, Rescheduled)
        last = kept.last
        if last is not None and ssn.now - last < interval:
            return
        params = lnu.get("params") or {}
        low, high = _thresholds(params.get("thresholds")), _thresholds(params.get("targetThresholds"))
        nodes, index = ssn.nodes, ssn.index
        cols = [(r, index.pos[r]) for r in RESOURCES if r in index.pos]

        def victims(tasks: list[TaskInfo]) -> list[TaskInfo]:
            kept.last = ssn.now
            n = len(nodes)
            alloc = nodes.allocatable[:n]
            used = nodes.used[:n]
            with np.errstate(divide="ignore", invalid="ignore"):
                pct = {r: np.where(alloc[:, c] > 0, used[:, c] / alloc[:, c] * 100, 0.0) for r, c in cols}
            alive = nodes.schedulable[:n]
            under = alive & np.all([pct[r] < low[r] for r, _ in cols], axis=0)
            over = np.any([pct[r] > high[r] for r, _ in cols], axis=0)
            if not under.any() or under.sum() == alive.sum() or not over.any():
                return []
            # Room on the underused nodes up to their targets, for cpu and memory.
            room = {r: float(np.sum(alloc[under, c] * high[r] / 100 - used[under, c])) for r, c in cols if r != "pods"}
            by_node: dict[int, list[TaskInfo]] = {}
            for t in tasks:
                if t.node >= 0 and over[t.node] and t.preemptable and not t.critical:
                    by_node.setdefault(t.node, []).append(t)
            out = []
            left = used.copy()
            order = sorted(by_node, key=lambda i: -(pct.get("cpu", np.zeros(n))[i] + pct.get("memory", np.zeros(n))[i]))
            for i in order:
                for t in sorted(by_node[i], key=lambda t: (t.priority, t.creation, t.uid)):
                    still_over = any(left[i, c] / alloc[i, c] * 100 >= high[r] for r, c in cols if alloc[i, c] > 0)
                    if not still_over or any(room[r] <= 0 for r in room):
                        break
                    if any(t.resreq[c] > room[r] for r, c in cols if r in room):
                        continue
                    out.append(t)
                    left[i] -= t.resreq
                    for r, c in cols:
                        if r in room:
                            room[r] -= float(t.resreq[c])
            return out

        ssn.add_victim_tasks_fn(self.name, victims)
