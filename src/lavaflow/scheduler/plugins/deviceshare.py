"""deviceshare: GPU sharing, accounted per physical GPU (Volcano's gpushare).

A node offers ``volcano.sh/gpu-number`` GPUs and ``volcano.sh/gpu-memory`` in total
(each GPU has total ÷ number). With ``deviceshare.GPUSharingEnable: true`` a pod asking
for ``volcano.sh/gpu-memory`` (container limits, else requests) must fit on one GPU's
free memory — the lowest-numbered GPU that has room is taken; with
``deviceshare.GPUNumberEnable: true`` a pod asking for ``volcano.sh/gpu-number: k`` needs k
GPUs nobody uses. ``deviceshare.SchedulePolicy`` (``binpack`` / ``spread``) and
``deviceshare.ScheduleWeight`` order nodes only for Volcano's vGPU devices: its gpushare device
scores every node 0 (``ScoreNode``), so with GPU sharing and GPU numbers node order is left to the
other plugins, here as there (issue 35, item 21).

The GPU chosen for each pod is accounted through the session's events and remembered
across sessions (and read back from a pod's ``volcano.sh/gpu-index`` annotation when it
has one), so two pods never over-fill the same GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..framework import arguments as A
from ..framework.memo import Assigned, state
from ..framework.registry import Plugin, register_plugin
from ..model import OCCUPYING

if TYPE_CHECKING:  # pragma: no cover
    from ...api.core import Pod
    from ..framework.session import Session
    from ..framework.session_plugins import Explain
    from ..model import TaskInfo

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"


def _container_amount(pod: Pod | None, name: str) -> float:
    if pod is None:
        return 0.0
    total = 0.0
    for c in pod.spec.containers:
        v = c.resources.limits.get(name, c.resources.requests.get(name))
        if v is not None:
            total += float(v)
    return total


@register_plugin
class DeviceSharePlugin(Plugin):
    name = "deviceshare"
    ARGUMENTS = {
        "deviceshare.GPUSharingEnable": A.BOOL,
        "deviceshare.GPUNumberEnable": A.BOOL,
        "deviceshare.VGPUEnable": A.BOOL,
        "deviceshare.AscendHAMiVNPUEnable": A.BOOL,
        "deviceshare.SchedulePolicy": A.TEXT,
        "deviceshare.ScheduleWeight": A.NUMBER,
    }

    @classmethod
    def argument_warnings(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        """Volcano's vGPU (HAMi) and Ascend vNPU sharing are not implemented: said, not ignored."""
        out = []
        for key, what in (
            ("deviceshare.VGPUEnable", "vGPU sharing (volcano.sh/vgpu-*)"),
            ("deviceshare.AscendHAMiVNPUEnable", "Ascend vNPU sharing (HAMi)"),
        ):
            if A.as_bool(arguments.get(key)):
                out.append((key, f"{what} is not implemented in lavaflow; the switch is ignored"))
        return out

    def on_session_open(self, ssn: Session) -> None:
        sharing = self.arg_bool("deviceshare.GPUSharingEnable", False)
        numbers = self.arg_bool("deviceshare.GPUNumberEnable", False)
        if not (sharing or numbers):
            return
        nodes = ssn.nodes
        index = ssn.index
        n = len(nodes)
        mem_col, num_col = index.pos.get(GPU_MEMORY), index.pos.get(GPU_NUMBER)
        if num_col is None:
            return
        # Per node with GPUs: memory per GPU and memory used per GPU.
        cards: dict[int, tuple[float, np.ndarray]] = {}
        for i in range(n):
            count = int(nodes.allocatable[i, num_col])
            if count > 0:
                total = float(nodes.allocatable[i, mem_col]) if mem_col is not None else 0.0
                cards[i] = (total / count, np.zeros(count))

        def wants(task: TaskInfo) -> tuple[float, int]:
            return (
                _container_amount(task.pod, GPU_MEMORY) if sharing else 0.0,
                int(_container_amount(task.pod, GPU_NUMBER)) if numbers else 0,
            )

        self.wants = wants

        # The GPU memory assigned to each placed task, by task uid, kept across sessions.
        memo: dict[str, Assigned] = state(ssn.cache, self.name, dict)
        for uid, (i, used) in list(memo.items()):
            t = ssn.cache.tasks.get(uid)
            if t is None or t.node != i or t.status not in OCCUPYING or i not in cards or len(used) != len(cards[i][1]):
                del memo[uid]
                continue
            cards[i][1][:] += used
        for i, tasks in enumerate(nodes.tasks):  # placed pods we never assigned (scheduler restart)
            if i not in cards:
                continue
            for t in tasks.values():
                if t.uid in memo or t.status not in OCCUPYING or t.pod is None:
                    continue
                raw = t.pod.metadata.annotations.get(GPU_INDEX, "")
                ids = [int(x) for x in raw.split(",") if x.strip().isdigit()]
                got = self._take(t, cards[i], ids)
                if got is not None:
                    cards[i][1][:] += got
                    memo[t.uid] = Assigned(i, got)

        def choose(task: TaskInfo, i: int) -> np.ndarray | None:
            node = cards.get(i)
            return None if node is None else self._take(task, node, None)

        def predicate(task: TaskInfo) -> tuple[np.ndarray, Explain]:
            mem, num = wants(task)
            if mem <= 0 and num <= 0:
                return np.ones(n, dtype=bool), explain
            mask = np.zeros(n, dtype=bool)
            for i in cards:
                mask[i] = choose(task, i) is not None
            return mask, explain

        def explain(task: TaskInfo, failing: np.ndarray) -> dict[str, int]:
            mem, _ = wants(task)
            r = f"node(s) had no GPU with {mem:g} {GPU_MEMORY} free" if mem > 0 else "node(s) had not enough idle GPUs"
            return {r: int(failing.sum())}

        def on_allocate(task: TaskInfo) -> None:
            node = cards.get(task.node)
            if node is None:
                return
            got = self._take(task, node, None)
            if got is not None:
                node[1][:] += got
                memo[task.uid] = Assigned(task.node, got)

        def on_deallocate(task: TaskInfo) -> None:
            entry = memo.pop(task.uid, None)
            if entry is not None and entry.node in cards:
                cards[entry.node][1][:] -= entry.amounts

        ssn.add_predicate_fn(self.name, predicate)
        ssn.add_event_handler(on_allocate, on_deallocate)
        self.cards = cards

    def _take(self, task: TaskInfo, node: tuple[float, np.ndarray], ids: list[int] | None) -> np.ndarray | None:
        """Memory taken per GPU on ``node`` by ``task``; None when it does not fit."""
        per_card, used = node
        mem, num = self.wants(task)
        got = np.zeros(len(used))
        if mem > 0:
            order = ids if ids else range(len(used))
            for c in order:
                if 0 <= c < len(used) and used[c] + mem <= per_card + 1e-9:
                    got[c] = mem
                    return got
            return None
        if num > 0:
            idle = [c for c in (ids or range(len(used))) if 0 <= c < len(used) and used[c] <= 0]
            if len(idle) < num:
                return None
            for c in idle[:num]:
                got[c] = per_card
            return got
        return None
