"""task-topology: affinity and anti-affinity between a job's task roles, as Volcano's buckets.

Read from the PodGroup's annotations (a Volcano Job's annotations reach its PodGroup):

- ``volcano.sh/task-topology-affinity: "ps,worker;chief"`` — groups separated by ``;``:
  roles of one group want to share nodes (a group of one role: its pods want each other);
- ``volcano.sh/task-topology-anti-affinity: "ps;worker"`` — roles that want different
  nodes (a group of one role: its pods spread);
- ``volcano.sh/task-topology-task-order: "ps,worker"`` — these roles are placed first,
  in this order.

As Volcano's plugin does (pkg/scheduler/plugins/task-topology), each session sorts a job's tasks
whose role has an affinity or anti-affinity (placed ones first, by node; then by task order, by
the strongest topology kind of the role — self anti-affinity, inter affinity, self affinity,
inter anti-affinity — and by name) and deals them into **buckets**: a placed task joins the bucket
of its node, a pending one the bucket it has the most affinity with (an anti-affinity there opens a
new bucket; ties go to the bucket asking for least). A node's score for a task is its bucket's
workers already bound there, minus the anti-affinity of the tasks allocated to the node this
session, plus the bucket's pending tasks, less one for each of them that would not fit the node's
idle (and releasing) room along with it — so the first task of a group goes where the group can
follow — scaled to 0–100 by the largest bucket (× ``task-topology.weight``, default 1). These are
preferences, not filters. A job whose annotations name a role it does not have is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin
from ..framework.session import UNCACHED
from ..model import TaskStatus
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, TaskInfo

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_SCORE = 100.0


def _groups(text: str) -> list[list[str]]:
    return [[r.strip() for r in g.split(",") if r.strip()] for g in text.split(";") if g.strip()]


# How strongly a role's strongest topology kind orders it (Volcano's affinityPriority)
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1


class Bucket:
    """Tasks of one job meant to land together: those still pending, and per node those bound."""

    def __init__(self, index: int, width: int) -> None:
        self.index = index
        self.tasks: dict[str, TaskInfo] = {}  # pending, in the order they joined
        self.roles: dict[str, int] = {}  # role -> tasks of it in the bucket
        self.request = np.zeros(width)
        self.req_score = 0.0
        self.bound = 0
        self.node: dict[int, int] = {}  # node -> tasks of the bucket bound there


class JobTopology:
    def __init__(self, affinity: list[list[str]], anti: list[list[str]], order: list[str]) -> None:
        self.self_affinity: set[str] = set()
        self.self_anti: set[str] = set()
        self.inter_affinity: set[tuple[str, str]] = set()
        self.inter_anti: set[tuple[str, str]] = set()
        self.priority: dict[str, int] = {}  # role -> its strongest topology kind
        for groups, self_set, inter, self_kind, inter_kind in (
            (affinity, self.self_affinity, self.inter_affinity, SELF_AFFINITY, INTER_AFFINITY),
            (anti, self.self_anti, self.inter_anti, SELF_ANTI, INTER_ANTI),
        ):
            for g in groups:
                if len(g) == 1:
                    self_set.add(g[0])
                    self.priority[g[0]] = max(self.priority.get(g[0], 0), self_kind)
                    continue
                for i, a in enumerate(g):
                    for b in g[:i]:
                        inter.update(((a, b), (b, a)))
                    self.priority[a] = max(self.priority.get(a, 0), inter_kind)
        self.order = {role: len(order) - i for i, role in enumerate(order)}  # first in order: largest
        self.roles = set(self.priority) | set(order)
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, Bucket] = {}  # task uid -> its bucket
        self.max_size = 0
        self.node_roles: dict[int, dict[str, int]] = {}  # node -> roles allocated there this session

    def affinity(self, role: str, roles: dict[str, int], only_anti: bool = False) -> int:
        """Volcano's checkTaskSetAffinity: + tasks ``role`` has affinity with, - anti-affinity."""
        score = 0
        for other, count in roles.items():
            same = other == role
            if not only_anti and (role in self.self_affinity if same else (role, other) in self.inter_affinity):
                score += count
            if role in self.self_anti if same else (role, other) in self.inter_anti:
                score -= count
        return score

    def role_order(self, l_role: str, r_role: str) -> int:
        """Volcano's taskAffinityOrder: 1 when ``l_role`` ranks higher (task order, then kind)."""
        if l_role == r_role:
            return 0
        lo, ro = self.order.get(l_role, 0), self.order.get(r_role, 0)
        if lo != ro:
            return 1 if lo > ro else -1
        lp, rp = self.priority.get(l_role, 0), self.priority.get(r_role, 0)
        return (lp > rp) - (lp < rp)

    def build(self, tasks: list[TaskInfo], width: int, score_of: Any, node_names: Any) -> None:
        """Deal the job's tasks whose role has a topology into buckets (Volcano's ConstructBucket)."""
        mine = [t for t in tasks if t.role in self.priority]

        def key(t: TaskInfo) -> tuple[Any, ...]:
            placed = t.node >= 0
            # placed tasks first, by node; then the highest-ranked roles, by name
            return (0, node_names[t.node], "", "") if placed else (1, "", _Rank(self, t.role), t.name)

        node_bucket: dict[int, Bucket] = {}
        for t in sorted(mine, key=key):
            chosen: Bucket | None = None
            best = -(2**31)
            if t.node >= 0:
                best = 0
                chosen = node_bucket.get(t.node)
            else:
                for b in self.buckets:
                    aff = self.affinity(t.role, b.roles)
                    if aff > best or (aff == best and chosen is not None and b.req_score < chosen.req_score):
                        best, chosen = max(aff, best), b
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets), width)
                self.buckets.append(chosen)
                if t.node >= 0:
                    node_bucket[t.node] = chosen
            chosen.roles[t.role] = chosen.roles.get(t.role, 0) + 1
            if t.node >= 0:
                chosen.node[t.node] = chosen.node.get(t.node, 0) + 1
                chosen.bound += 1
            else:
                chosen.tasks[t.uid] = t
                chosen.request = chosen.request + t.resreq
                chosen.req_score += score_of(t.resreq)
            self.bucket_of[t.uid] = chosen
            self.max_size = max(self.max_size, len(chosen.tasks) + chosen.bound)

    def bound(self, task: TaskInfo, score_of: Any) -> None:
        """Volcano's TaskBound (allocate events only, as Volcano registers no deallocate)."""
        roles = self.node_roles.setdefault(task.node, {})
        roles[task.role] = roles.get(task.role, 0) + 1
        b = self.bucket_of.get(task.uid)
        if b is not None:
            b.node[task.node] = b.node.get(task.node, 0) + 1
            b.bound += 1
            if b.tasks.pop(task.uid, None) is not None:
                b.request = b.request - task.resreq
                b.req_score -= score_of(task.resreq)


class _Rank:
    """Sort key of a pending task's role: higher-ranked roles sort first (Volcano sorts by the
    reverse of taskAffinityOrder)."""

    __slots__ = ("role", "topo")

    def __init__(self, topo: JobTopology, role: str) -> None:
        self.topo, self.role = topo, role

    def __lt__(self, other: _Rank) -> bool:
        return self.topo.role_order(self.role, other.role) > 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rank) and self.topo.role_order(self.role, other.role) == 0


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
        index = ssn.index
        cpu, mem = index.pos.get("cpu"), index.pos.get("memory")
        others = [c for c in range(len(index)) if c not in (cpu, mem) and index.names[c] != "pods"]

        def req_score(req: np.ndarray) -> float:
            # Volcano's CalcResReq: milli-CPU + MiB of memory + the other resources (milli-units)
            out = float(req[cpu]) * 1000 if cpu is not None else 0.0
            out += float(req[mem]) / 2**20 if mem is not None else 0.0
            return out + sum(float(req[c]) * 1000 for c in others)

        topos: dict[str, JobTopology] = {}
        width = len(index)
        for job in ssn.jobs.values():
            if not job.counts[TaskStatus.PENDING]:
                continue
            topo = parse(job)
            if topo is None:
                continue
            topo.build(list(job.tasks.values()), width, req_score, ssn.nodes.names)
            topos[job.uid] = topo
        if not topos:
            return
        nodes = ssn.nodes

        def task_order(l: TaskInfo, r: TaskInfo) -> int:
            lt, rt = topos.get(l.job), topos.get(r.job)
            if lt is None or rt is None:
                return 0
            lb, rb = lt.bucket_of.get(l.uid), rt.bucket_of.get(r.uid)
            if (lb is None) != (rb is None):
                return -1 if lb is not None else 1
            if l.job != r.job or lb is None or rb is None:
                return 0
            if len(lb.tasks) != len(rb.tasks):
                return -1 if len(lb.tasks) > len(rb.tasks) else 1
            if lb.index == rb.index:
                return -lt.role_order(l.role, r.role)
            return -1 if lb.index < rb.index else 1

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            topo = topos.get(task.job)
            out = np.zeros(len(cand))
            b = topo.bucket_of.get(task.uid) if topo is not None else None
            if topo is None or b is None or weight <= 0:
                return out
            for j, i in enumerate(cand):
                i = int(i)
                room = nodes.allocatable[i] - nodes.used[i] + nodes.releasing[i]
                if np.any(room + EPS < task.resreq):
                    continue  # (the task does not fit: no score)
                value = b.node.get(i, 0)
                roles = topo.node_roles.get(i)
                if roles:
                    value += min(topo.affinity(task.role, roles, only_anti=True), 0)
                value += len(b.tasks)
                if np.any(b.request > room + EPS):
                    # the bucket does not fit: a point less for each other task left behind
                    remains = b.request.copy()
                    for uid, other in b.tasks.items():
                        if uid == task.uid:
                            continue
                        remains -= other.resreq
                        value -= 1
                        if not np.any(remains > room + EPS):
                            break
                out[j] = value
            scale = MAX_SCORE / topo.max_size if topo.max_size else 1.0
            return out * weight * scale

        def score_key(task: TaskInfo) -> object:
            topo = topos.get(task.job)
            return UNCACHED if topo is not None and task.uid in topo.bucket_of else None

        def on_allocate(task: TaskInfo) -> None:
            topo = topos.get(task.job)
            if topo is not None and task.node >= 0:
                topo.bound(task, req_score)

        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_node_order_fn(self.name, score, cache_key=score_key)
        ssn.add_event_handler(on_allocate, None)
