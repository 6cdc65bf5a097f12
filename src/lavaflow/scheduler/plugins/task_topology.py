"""task-topology: affinity and anti-affinity between a job's task roles.

Read from the PodGroup's annotations (a Volcano Job's annotations reach its PodGroup):

- ``volcano.sh/task-topology-affinity: "ps,worker;chief"`` — groups separated by ``;``:
  roles of one group want to share nodes (a group of one role: its pods want each other);
- ``volcano.sh/task-topology-anti-affinity: "ps;worker"`` — roles that want different
  nodes (a group of one role: its pods spread);
- ``volcano.sh/task-topology-task-order: "ps,worker"`` — these roles are placed first,
  in this order.

A node's score for a task is the number of the job's already placed pods on it it has
affinity with, minus those it has anti-affinity with, scaled to 0–100 by the number of
the job's pods with a topology (× ``task-topology.weight``, default 1). As in Volcano these
are preferences, not filters. A job whose annotations name a role it does not have is
ignored, as Volcano does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin
from ..framework.session import UNCACHED
from ..model import OCCUPYING, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, TaskInfo

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_SCORE = 100.0


def _groups(text: str) -> list[list[str]]:
    return [[r.strip() for r in g.split(",") if r.strip()] for g in text.split(";") if g.strip()]


class JobTopology:
    def __init__(self, affinity: list[list[str]], anti: list[list[str]], order: list[str]) -> None:
        self.relation: dict[tuple[str, str], int] = {}  # (role, other role) -> +1 affinity / -1 anti
        for sign, groups in ((1, affinity), (-1, anti)):
            for g in groups:
                if len(g) == 1:
                    self.relation[(g[0], g[0])] = self.relation.get((g[0], g[0]), 0) + sign
                for i, a in enumerate(g):
                    for b in g[:i]:
                        self.relation[(a, b)] = self.relation.get((a, b), 0) + sign
                        self.relation[(b, a)] = self.relation.get((b, a), 0) + sign
        self.roles = {r for pair in self.relation for r in pair} | set(order)
        self.order = {role: i for i, role in enumerate(order)}
        self.per_node: dict[int, dict[str, int]] = {}  # node -> role -> placed pods of this job
        self.size = 1


def parse(job: JobInfo) -> JobTopology | None:
    ann = job.pg.metadata.annotations if job.pg is not None else {}
    if not any(k in ann for k in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None
    aff, anti = _groups(ann.get(AFFINITY, "")), _groups(ann.get(ANTI_AFFINITY, ""))
    order = [r.strip() for r in ann.get(TASK_ORDER, "").split(",") if r.strip()]
    roles = {t.role for t in job.tasks.values()}
    for g in aff + anti + [order]:
        if len(set(g)) != len(g) or any(r not in roles for r in g):
            return None  # Volcano ignores a job whose topology names unknown or repeated roles
    return JobTopology(aff, anti, order)


@register_plugin
class TaskTopologyPlugin(Plugin):
    name = "task-topology"
    ARGUMENTS = {"task-topology.weight": A.NUMBER}

    def on_session_open(self, ssn: Session) -> None:
        weight = self.arg_float("task-topology.weight", 1.0)
        topos: dict[str, JobTopology] = {}
        for job in ssn.jobs.values():
            if not job.counts[TaskStatus.PENDING]:
                continue
            topo = parse(job)
            if topo is None:
                continue
            topos[job.uid] = topo
            for t in job.tasks.values():
                if t.role in topo.roles:
                    topo.size += 1
                if t.node >= 0 and t.status in OCCUPYING:
                    counts = topo.per_node.setdefault(t.node, {})
                    counts[t.role] = counts.get(t.role, 0) + 1
        if not topos:
            return

        def task_order(l: TaskInfo, r: TaskInfo) -> int:
            if l.job != r.job:
                return 0
            topo = topos.get(l.job)
            if topo is None:
                return 0
            lo = topo.order.get(l.role, len(topo.order) + (l.role not in topo.roles))
            ro = topo.order.get(r.role, len(topo.order) + (r.role not in topo.roles))
            return (lo > ro) - (lo < ro)

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            topo = topos.get(task.job)
            out = np.zeros(len(cand))
            if topo is None or weight <= 0:
                return out
            for j, i in enumerate(cand):
                counts = topo.per_node.get(int(i))
                if counts:
                    out[j] = sum(topo.relation.get((task.role, role), 0) * c for role, c in counts.items())
            return out * (MAX_SCORE * weight / topo.size)

        def score_key(task: TaskInfo) -> object:
            topo = topos.get(task.job)
            return UNCACHED if topo is not None and topo.per_node and task.role in topo.roles else None

        where: dict[str, int] = {}  # task uid -> node it was counted on this session

        def on_allocate(task: TaskInfo) -> None:
            topo = topos.get(task.job)
            if topo is not None and task.node >= 0:
                counts = topo.per_node.setdefault(task.node, {})
                counts[task.role] = counts.get(task.role, 0) + 1
                where[task.uid] = task.node

        def on_deallocate(task: TaskInfo) -> None:
            topo = topos.get(task.job)
            node = where.pop(task.uid, task.node)  # an unplaced task no longer knows its node
            if topo is not None and node >= 0:
                counts = topo.per_node.get(node, {})
                if counts.get(task.role, 0) > 0:
                    counts[task.role] -= 1

        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_node_order_fn(self.name, score, cache_key=score_key)
        ssn.add_event_handler(on_allocate, on_deallocate)
