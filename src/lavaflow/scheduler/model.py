"""The scheduler's model of the cluster: tasks, jobs, queues and nodes (Volcano's scheduler/api).

These objects are owned by the :class:`~lavaflow.scheduler.cache.SchedulerCache`
and updated incrementally from cluster events. A session works on them in place;
every change it makes goes through a :class:`~.framework.statement.Statement`
(or the session's own allocate) and is undone on discard or at session close,
so no per-cycle deep copy is needed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..api.volcano import PodGroupPhase
from .resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod, Taint
    from ..api.volcano import PodGroup, Queue


class TaskStatus(enum.IntEnum):
    PENDING = 0
    ALLOCATED = 1
    PIPELINED = 2
    BINDING = 3
    BOUND = 4
    RUNNING = 5
    RELEASING = 6
    SUCCEEDED = 7
    FAILED = 8
    UNKNOWN = 9


# The PodGroup phases of a gang waiting for admission ("": no status yet). Phases that per-job,
# per-pod or per-event code reads are module constants holding the members' plain strings (.value):
# a global costs a fifth of a member read off its class, and two exact strs compare on CPython's
# fast path, which a str and a member do not (that cost +0.3 % instructions on a burst run).
NOT_ADMITTED = ("", PodGroupPhase.PENDING.value)

_STATUSES = len(TaskStatus)  # (the length of JobInfo.counts; len() of an enum runs Python code)
# Plain ints for indexing JobInfo.counts inside job comparisons (an IntEnum index costs more).
_PENDING, _ALLOCATED, _PIPELINED, _BINDING, _BOUND, _RUNNING, _SUCCEEDED = (
    int(s)
    for s in (
        TaskStatus.PENDING,
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
    )
)
_FAILED = int(TaskStatus.FAILED)

# Statuses holding resources on a node.
OCCUPYING = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING}
)
# Volcano's AllocatedStatus: counts toward a job's allocation and a queue's share.
ALLOCATED = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
_PENDING_ONLY = frozenset({TaskStatus.PENDING})
# ReadyTaskNum: Bound + Binding + Running + Allocated + Succeeded.
READY = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED}
)


class EvictionCause(enum.StrEnum):
    """Why the scheduler evicts a pod; the value is the label the Kubernetes backend's metrics use."""

    PREEMPT = "preempt"
    RECLAIM = "reclaim"
    SHUFFLE = "shuffle"
    RESIZE = "elastic"  # an elastic resize, halt or migration: the pod is recreated pending


class Eviction(NamedTuple):
    """An eviction's cause (typed, for whoever acts on it) and its message (for people: the pod's
    status message, the Event, the decision history)."""

    cause: EvictionCause
    message: str


@dataclass(eq=False, slots=True)
class TaskInfo:
    uid: str  # namespace/name of the pod
    name: str
    namespace: str
    job: str  # JobInfo uid
    role: str  # task name (volcano.sh/task-spec), "" for bare pods
    index: int  # task index within its role (ordering fallback)
    resreq: np.ndarray
    priority: int = 0
    status: TaskStatus = TaskStatus.PENDING
    node: int = -1  # index into NodeSet, -1 when unplaced
    best_effort: bool = False
    preemptable: bool = True
    critical: bool = False  # kube-system or system-critical priority class
    preemption_policy: str = "PreemptLowerPriority"
    signature: Any = None  # key of the static (node-label) predicate cache
    labels: dict[str, str] = field(default_factory=dict)
    pod: Pod | None = None
    creation: float = 0.0

    @property
    def has_pod_affinity(self) -> bool:
        aff = self.pod.spec.affinity if self.pod is not None else None
        return aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None)

    @property
    def anti_terms(self) -> list[Any]:
        """The pod's required anti-affinity terms (other pods must keep away from it), or []."""
        aff = self.pod.spec.affinity if self.pod is not None else None
        if aff is None or aff.pod_anti_affinity is None:
            return []
        return aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution or []


@dataclass(slots=True)
class Summed:
    """A job's summed task requests as :meth:`JobInfo.allocated_view` / ``pending_view`` keep them:
    the width they were summed at, the read-only vector and the ``tasks_version`` it holds for."""

    width: int
    total: np.ndarray
    tasks_version: int


@dataclass(eq=False)
class JobInfo:
    """A PodGroup and its tasks (Volcano's JobInfo)."""

    uid: str  # namespace/podgroup-name
    name: str
    namespace: str
    queue: str = "default"
    seq: int = 0  # when the cache first saw it (the order of SchedulerCache.jobs)
    priority: int = 0
    min_available: int = 0
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: np.ndarray | None = None
    pg: PodGroup | None = None
    creation: float = 0.0
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    # Per-session scratch: fit errors of tasks that found no node, and job-level ones.
    fit_errors: dict[str, str] = field(default_factory=dict)
    job_fit_errors: str = ""
    # The PodGroup phase as this session sees it (enqueue moves Pending -> Inqueue).
    sphase: str = ""
    # Condition the gang plugin decided at session close: (type, reason, message).
    condition: tuple[str, str, str] | None = None
    # Conditions other plugins/actions add this session: (type, reason, message), e.g. Resized.
    extra_conditions: list[tuple[str, str, str]] = field(default_factory=list)
    # Per-status counts (maintained by set_status / add / remove).
    counts: list[int] = field(default_factory=lambda: [0] * _STATUSES)
    # Pending best-effort tasks (maintained with counts).
    be_pending: int = 0
    # allocated_view's / pending_view's last answer (a Summed): worked out again once a task
    # came, went or changed status since.
    _allocated: Summed | None = None
    _pending: Summed | None = None
    # Bumped whenever a task comes, goes or changes status, node or pod (set_status), not with a
    # new PodGroup: what is derived from the job's tasks alone can be kept under it.
    tasks_version: int = 0
    # Bumped whenever a task comes, goes or changes status, or the cache takes a new PodGroup:
    # what is derived from the job alone can be kept between sessions under it.
    version: int = 0
    # Values derived from this job alone, kept between sessions: see framework/memo.py's JobRecord.
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def phase(self) -> str:
        return self.pg.status.phase if self.pg is not None else ""

    def add(self, task: TaskInfo) -> None:
        self.tasks_version += 1
        self.version += 1
        self.tasks[task.uid] = task
        self.counts[task.status] += 1
        if task.best_effort and task.status == TaskStatus.PENDING:
            self.be_pending += 1

    def remove(self, task: TaskInfo) -> None:
        self.tasks_version += 1
        self.version += 1
        if self.tasks.pop(task.uid, None) is not None:
            self.counts[task.status] -= 1
            if task.best_effort and task.status == TaskStatus.PENDING:
                self.be_pending -= 1

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        self.tasks_version += 1
        self.version += 1
        self.counts[task.status] -= 1
        if task.best_effort:
            self.be_pending += (status == TaskStatus.PENDING) - (task.status == TaskStatus.PENDING)
        task.status = status
        self.counts[status] += 1

    def count(self, statuses: Iterable[TaskStatus]) -> int:
        c = self.counts
        n = 0
        for s in statuses:
            n += c[s]
        return n

    @property
    def ready_num(self) -> int:
        c = self.counts
        return c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING] + c[_SUCCEEDED]

    @property
    def scheduled_num(self) -> int:
        """Tasks placed or ended: allocated, binding, bound, running, succeeded or failed (Volcano's
        ScheduledTaskNum, with allocated and binding tasks counted already: lavaflow writes a
        PodGroup's Running with its bindings, not a period later)."""
        c = self.counts
        return c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING] + c[_SUCCEEDED] + c[_FAILED]

    @property
    def allocated_num(self) -> int:
        """Tasks holding resources (statuses in ``ALLOCATED``)."""
        c = self.counts
        return c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING]

    @property
    def waiting_num(self) -> int:
        return self.counts[_PIPELINED]

    def pending_best_effort_num(self) -> int:
        return self.be_pending if self.counts[_PENDING] else 0

    def is_ready(self) -> bool:
        # ready_num + pending_best_effort_num(), spelled out: it runs in every job comparison
        c = self.counts
        ready = c[_ALLOCATED] + c[_BINDING] + c[_BOUND] + c[_RUNNING] + c[_SUCCEEDED]
        return ready + (self.be_pending if c[_PENDING] else 0) >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_num + self.ready_num + self.pending_best_effort_num() >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_num + self.ready_num < self.min_available

    def is_pending(self) -> bool:
        return self.pg is None or (self.sphase or self.phase) in NOT_ADMITTED

    def valid_task_num(self) -> int:
        """Tasks that can still count toward the gang (not failed / releasing)."""
        c = self.counts
        return len(self.tasks) - c[TaskStatus.FAILED] - c[TaskStatus.RELEASING] - c[TaskStatus.UNKNOWN]

    def tasks_with(self, status: TaskStatus) -> list[TaskInfo]:
        if self.counts[status] == 0:
            return []
        return [t for t in self.tasks.values() if t.status == status]

    def allocated_vector(self, width: int) -> np.ndarray:
        """Requests of the tasks holding resources (a new array each call: callers may change it)."""
        return self.allocated_view(width).copy()

    def allocated_view(self, width: int) -> np.ndarray:
        """:meth:`allocated_vector` without the copy, for callers that only read it."""
        known = self._allocated
        if known is not None and known.tasks_version == self.tasks_version and known.width == width:
            return known.total
        return self._summed("_allocated", ALLOCATED, width)

    def pending_view(self, width: int) -> np.ndarray:
        """Requests of the pending tasks, for callers that only read them (not a copy)."""
        known = self._pending
        if known is not None and known.tasks_version == self.tasks_version and known.width == width:
            return known.total
        return self._summed("_pending", _PENDING_ONLY, width)

    def _summed(self, memo: str, statuses: frozenset[TaskStatus], width: int) -> np.ndarray:
        """The summed requests of the tasks in ``statuses``, kept in attribute ``memo`` until a
        task comes, goes or changes status (the kept array itself: callers must not change it).
        When the sum has exactly the bits it had before (a task went from binding to running, a
        released one went away), the earlier array is kept, so that what callers keep under its
        identity (queue sums) still holds."""
        tasks = self.tasks
        total = np.zeros(width)
        if len(tasks) == 1:
            # One task (most jobs of a big cluster), without the generator and list below.
            (task,) = tasks.values()
            if task.status in statuses:
                r = task.resreq
                if len(r) == width:
                    total = r.copy()  # 0 + r is r (requests are never -0.0)
                else:
                    total[: len(r)] += r
        elif any(self.counts[st] for st in statuses):
            rows = [t.resreq for t in tasks.values() if t.status in statuses]
            if rows and all(len(r) == width for r in rows):
                # The same additions in the same order as the loop below (add.accumulate runs
                # along the rows one after another, from the zero row), in one numpy call.
                rows.insert(0, total)
                total = np.add.accumulate(np.array(rows), axis=0)[-1].copy()
            else:
                for r in rows:
                    total[: len(r)] += r
        prev: Summed | None = getattr(self, memo)
        if prev is not None and prev.width == width and prev.total.tobytes() == total.tobytes():
            total = prev.total
        else:
            total.flags.writeable = False
        setattr(self, memo, Summed(width, total, self.tasks_version))
        return total

    def ready_by_role(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks.values():
            if t.status in READY:
                out[t.role] = out.get(t.role, 0) + 1
        return out


@dataclass(eq=False)
class QueueInfo:
    name: str
    weight: int = 1
    capability: np.ndarray | None = None  # +inf where unset
    guarantee: np.ndarray | None = None
    deserved: np.ndarray | None = None  # explicit spec.deserved (capacity plugin)
    parent: str = ""
    priority: int = 0
    state: str = "Open"
    reclaimable: bool = True
    queue: Queue | None = None
    creation: float = 0.0

    @property
    def is_open(self) -> bool:
        return self.state in ("", "Open")


class NodeSet:
    """All nodes as arrays: one row per node, one column per resource.

    ``used`` includes every task occupying the node (allocated, binding, bound,
    running and releasing); ``releasing`` the part that is going away;
    ``pipelined`` resources promised to pipelined tasks of this session.
    """

    def __init__(self, width: int) -> None:
        self.names: list[str] = []
        self.pos: dict[str, int] = {}
        self.width = width
        self.allocatable = np.zeros((0, width))
        self.used = np.zeros((0, width))
        self.releasing = np.zeros((0, width))
        self.pipelined = np.zeros((0, width))
        self.schedulable = np.zeros(0, dtype=bool)  # ready and not cordoned
        self.labels: list[dict[str, str]] = []
        self.taints: list[list[Taint]] = []
        self.tasks: list[dict[str, TaskInfo]] = []
        # The placed tasks whose pods carry required anti-affinity terms (the predicates plugin
        # checks every new pod against them): kept as tasks are put and taken, so a session need
        # not scan every placed task to find the few (usually none) that have such terms.
        self.anti: dict[str, TaskInfo] = {}
        self.version = 0  # bumped when labels/taints/membership change
        # Per node, the cpu and memory that kube-scheduler's non-zero requests add to what its
        # tasks request (a container asking for no cpu counts 0.1 core, none for memory 200 MiB,
        # in its LeastAllocated and MostAllocated scores): kept from the first time a plugin asks
        # (track_nonzero), with what each task added, so that nothing else pays for it.
        self.nonzero: np.ndarray | None = None
        self._nonzero_of: dict[str, tuple[float, float]] = {}
        self._nonzero_fn: Callable[[TaskInfo], tuple[float, float]] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def widen(self, width: int) -> None:
        if width <= self.width:
            return
        extra = width - self.width
        for attr in ("allocatable", "used", "releasing", "pipelined"):
            arr = getattr(self, attr)
            setattr(self, attr, np.hstack([arr, np.zeros((arr.shape[0], extra))]))
        self.width = width

    def _grow(self) -> None:
        n = len(self.names)
        if n <= self.allocatable.shape[0]:
            return
        cap = max(16, 2 * self.allocatable.shape[0])
        for attr in ("allocatable", "used", "releasing", "pipelined"):
            arr = getattr(self, attr)
            new = np.zeros((cap, self.width))
            new[: arr.shape[0]] = arr
            setattr(self, attr, new)
        sched = np.zeros(cap, dtype=bool)
        sched[: len(self.schedulable)] = self.schedulable
        self.schedulable = sched
        if self.nonzero is not None:
            nz = np.zeros((cap, 2))
            nz[: self.nonzero.shape[0]] = self.nonzero
            self.nonzero = nz

    def put_task(self, node: int, task: TaskInfo) -> None:
        self.tasks[node][task.uid] = task
        if task.anti_terms:
            self.anti[task.uid] = task
        if self._nonzero_fn is not None and task.status != TaskStatus.PIPELINED:
            self._put_nonzero(node, task)

    def take_task(self, node: int, uid: str) -> None:
        if self.tasks[node].pop(uid, None) is not None and self.anti:
            self.anti.pop(uid, None)
        if self._nonzero_of:
            extra = self._nonzero_of.pop(uid, None)
            if extra is not None and self.nonzero is not None:
                self.nonzero[node, 0] -= extra[0]
                self.nonzero[node, 1] -= extra[1]

    def _put_nonzero(self, node: int, task: TaskInfo) -> None:
        assert self._nonzero_fn is not None and self.nonzero is not None
        extra = self._nonzero_fn(task)
        if extra[0] or extra[1]:
            self._nonzero_of[task.uid] = extra
            self.nonzero[node, 0] += extra[0]
            self.nonzero[node, 1] += extra[1]

    def track_nonzero(self, extra: Callable[[TaskInfo], tuple[float, float]]) -> np.ndarray:
        """The per-node extra cpu and memory of kube-scheduler's non-zero requests (see
        ``nonzero``), ``extra(task)`` giving a task's: worked out over the placed tasks the first
        time, then kept as tasks are put and taken. Pipelined tasks are left out, as they are of
        ``used``."""
        if self.nonzero is None:
            self.nonzero = np.zeros((self.allocatable.shape[0], 2))
            self._nonzero_fn = extra
            for node, tasks in enumerate(self.tasks):
                for task in tasks.values():
                    if task.status != TaskStatus.PIPELINED:
                        self._put_nonzero(node, task)
        return self.nonzero

    def upsert(
        self, name: str, allocatable: np.ndarray, labels: dict[str, str], taints: list[Taint], schedulable: bool
    ) -> int:
        i = self.pos.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self.pos[name] = i
            self.labels.append({})
            self.taints.append([])
            self.tasks.append({})
            self._grow()
        self.allocatable[i, : len(allocatable)] = allocatable
        self.labels[i] = labels
        self.taints[i] = taints
        self.schedulable[i] = schedulable
        self.version += 1
        return i

    def remove(self, name: str) -> None:
        """Nodes are never compacted (indices stay stable); a removed node is unschedulable."""
        i = self.pos.get(name)
        if i is None:
            return
        self.schedulable[i] = False
        self.allocatable[i] = 0.0
        self.version += 1

    # Views over the live rows -------------------------------------------------
    def view(self, attr: str) -> np.ndarray:
        rows: np.ndarray = getattr(self, attr)[: len(self.names)]
        return rows

    def idle(self) -> np.ndarray:
        n = len(self.names)
        return self.allocatable[:n] - self.used[:n]

    def future_idle(self) -> np.ndarray:
        n = len(self.names)
        return self.allocatable[:n] - self.used[:n] + self.releasing[:n] - self.pipelined[:n]

    def fits_idle(self, i: int, req: np.ndarray) -> bool:
        """Whether ``req`` fits in node ``i``'s idle resources: ``np.all(allocatable[i] - used[i]
        + EPS >= req)``, column by column on Python floats (the same IEEE operations, so the same
        answer, NaN included; rows of unequal width raise as numpy's broadcast would)."""
        for a, u, r in zip(self.allocatable[i].tolist(), self.used[i].tolist(), req.tolist(), strict=True):
            if not a - u + EPS >= r:
                return False
        return True
