"""Plugin callbacks of a session: registration, and their combination by tier.

Plugins register callbacks on the session when it opens (``add_job_order_fn``, ...); the
session answers the actions' questions (``job_order``, ``job_ready``, ``preemptable``, ...) by
combining them with Volcano's rules (framework/session_plugins.go): order functions — the first
non-zero answer wins; JobReady/Allocatable/Predicate/Preemptive — AND; Overused — OR; vote
functions (JobPipelined/JobEnqueueable) — a Reject anywhere refuses, a Permit in a tier decides,
all-abstain permits; JobStarving — AND within the first tier that registers any; victim
selection (Preemptable/Reclaimable) — per tier the intersection of the non-abstaining plugins'
candidates, the first tier with an answer decides.

:class:`SessionPlugins` is the part of :class:`~.session.Session` that holds them; it knows
nothing of the cluster state.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model import JobInfo, QueueInfo, TaskInfo

if TYPE_CHECKING:  # pragma: no cover
    from .conf import Tier

PERMIT, ABSTAIN, REJECT = 1, 0, -1
# A node-order cache_key's answer for a task whose score depends on more than each node's own
# row: that fn is then computed over the candidates only, the others stay cached.
UNCACHED = object()

# A registered callback: its signature depends on the extension point (see the add_* methods).
Fn = Callable[..., Any]
# (allocate(task), deallocate(task)), either may be None.
EventHandler = tuple[Callable[[TaskInfo], None] | None, Callable[[TaskInfo], None] | None]
# A predicate's explanation: (task, mask of the nodes it fails) -> {reason: count of nodes}.
Explain = Callable[[TaskInfo, np.ndarray], dict[str, int]]
# A job's candidate node sets in order of preference, and why it waits when it fits none.
Domains = tuple[list[tuple[str, np.ndarray | None]], str]


def _cmp_default(l_creation: float, l_uid: str, r_creation: float, r_uid: str) -> int:
    if l_creation != r_creation:
        return -1 if l_creation < r_creation else 1
    if l_uid != r_uid:
        return -1 if l_uid < r_uid else 1
    return 0


class _EnabledNames:
    """Per tier the names of the plugins with one switch on, kept with the tiers list they were
    read from (found by the list's id; holding the list keeps that id from being reused)."""

    __slots__ = ("tiers", "names")

    def __init__(self, tiers: Sequence[Tier], names: tuple[tuple[str, ...], ...]) -> None:
        self.tiers = tiers
        self.names = names


# (id of a tiers list, switch) -> the names enabled under that switch
_ENABLED: dict[tuple[int, str], _EnabledNames] = {}


def enabled_names(tiers: Sequence[Tier], switch: str) -> tuple[tuple[str, ...], ...]:
    """Per tier, in order, the names of the plugins whose switch ``switch`` is on: the same for
    every session of a configuration, so worked out once per tiers list (kept with the list, so
    that its id is not reused while the entry stands)."""
    key = (id(tiers), switch)
    hit = _ENABLED.get(key)
    if hit is not None and hit.tiers is tiers:
        return hit.names
    names = tuple(tuple(opt.name for opt in tier.plugins if opt.enabled(switch)) for tier in tiers)
    if len(_ENABLED) > 256:
        _ENABLED.clear()
    _ENABLED[key] = _EnabledNames(tiers, names)
    return names


def _pod_uid(task: TaskInfo) -> str:
    pod = task.pod
    uid = pod.metadata.uid if pod is not None else None
    return uid or task.uid


def _volcano_task_order(left: TaskInfo, right: TaskInfo) -> int:
    """Volcano's order of two tasks no plugin told apart (its job controller's CompareTask): by
    their index in their task (``volcano.sh/task-index``), then by creation time (whole seconds,
    as the API gives them), then by pod UID — the tasks of one Job are not grouped by task name,
    and between pods of equal index made in one second the order is as random as their UIDs (by
    name where pods have none, as in the simulator)."""
    if left.index != right.index:
        return -1 if left.index < right.index else 1
    lc, rc = math.floor(left.creation), math.floor(right.creation)
    if lc != rc:
        return -1 if lc < rc else 1
    lu, ru = _pod_uid(left), _pod_uid(right)
    return -1 if lu < ru else (1 if lu > ru else 0)


class SessionPlugins:
    """The plugins' callbacks by extension point, and their combination by tier."""

    # Volcano's default task order (``_volcano_task_order``) instead of lavaflow's (task name,
    # index, pod): with Volcano's node choice, the session sets it.
    volcano_task_order = False

    def __init__(self, tiers: Sequence[Tier]) -> None:
        self.tiers = tiers
        self.fns: dict[str, dict[str, Fn]] = {}
        self.event_handlers: list[EventHandler] = []
        # node-order fn name -> its cache_key (None: not cacheable); read by node selection.
        self.score_keys: dict[str, Fn | None] = {}
        self._tier_cache: dict[tuple[str, str | None], list[list[tuple[str, Fn]]]] = {}
        self._order_fns: dict[str, tuple[Fn, ...]] = {}  # orders' (and JobValid's) fns, tiers flattened

    # ------------------------------------------------------------------ registration
    def _add(self, point: str, name: str, fn: Fn) -> None:
        fns = self.fns.get(point)
        if fns is None:
            fns = self.fns[point] = {}
        fns[name] = fn
        if self._tier_cache or self._order_fns:
            self._tier_cache.clear()
            self._order_fns.clear()
        self._callbacks_changed()

    def _callbacks_changed(self) -> None:
        """Hook: a callback was registered (the session forgets scores computed with the old set)."""

    def add_job_order_fn(self, name: str, fn: Fn) -> None:
        self._add("JobOrder", name, fn)

    def add_queue_order_fn(self, name: str, fn: Fn) -> None:
        self._add("QueueOrder", name, fn)

    def add_namespace_order_fn(self, name: str, fn: Fn) -> None:
        """fn(namespace, namespace) -> int: inside a queue, which namespace's jobs go next."""
        self._add("NamespaceOrder", name, fn)

    def add_task_order_fn(self, name: str, fn: Fn) -> None:
        self._add("TaskOrder", name, fn)

    def add_predicate_fn(self, name: str, fn: Fn) -> None:
        """fn(task) -> (bool mask over nodes, explain(task, failing mask) -> {reason: count})."""
        self._add("Predicate", name, fn)

    def add_node_order_fn(self, name: str, fn: Fn, cache_key: Fn | None = None) -> None:
        """fn(task, candidate node indices) -> float scores (vectorised BatchNodeOrder).

        ``cache_key(task)``, when given, promises that the score of node i depends
        only on that node's own allocatable/used rows, labels and taints and on the
        task only through ``cache_key(task)``; the session then keeps each task
        class's scores over all nodes and rescores only the nodes that changed.
        """
        self._add("NodeOrder", name, fn)
        self.score_keys[name] = cache_key

    def add_job_valid_fn(self, name: str, fn: Fn) -> None:
        self._add("JobValid", name, fn)

    def add_job_ready_fn(self, name: str, fn: Fn) -> None:
        self._add("JobReady", name, fn)

    def add_job_pipelined_fn(self, name: str, fn: Fn) -> None:
        self._add("JobPipelined", name, fn)

    def add_job_starving_fn(self, name: str, fn: Fn) -> None:
        self._add("JobStarving", name, fn)

    def add_job_enqueueable_fn(self, name: str, fn: Fn) -> None:
        self._add("JobEnqueueable", name, fn)

    def add_job_enqueued_fn(self, name: str, fn: Fn) -> None:
        self._add("JobEnqueued", name, fn)

    def add_allocatable_fn(self, name: str, fn: Fn) -> None:
        self._add("Allocatable", name, fn)

    def add_overused_fn(self, name: str, fn: Fn) -> None:
        self._add("Overused", name, fn)

    def add_overused_reason_fn(self, name: str, fn: Fn) -> None:
        """fn(queue) -> str or None: why allocate passes over an overused queue, in the plugin's
        words (e.g. the capability it reached); the first answer in tier order is used."""
        self._add("OverusedReason", name, fn)

    def add_within_deserved_fn(self, name: str, fn: Fn) -> None:
        """fn(job) -> bool or None: would the job's queue stay within its deserved share if the
        job were admitted? None: the plugin keeps no share for that queue. The first answer in
        tier order is used (overcommit asks, proportion and capacity answer)."""
        self._add("WithinDeserved", name, fn)

    def add_deserved_shares_fn(self, name: str, fn: Fn) -> None:
        """fn() -> {queue name: deserved resource vector}: the queue shares a plugin worked out,
        for status and the simulator's timeline; the first plugin in tier order that registers one."""
        self._add("DeservedShares", name, fn)

    def add_preemptable_fn(self, name: str, fn: Fn) -> None:
        self._add("Preemptable", name, fn)

    def add_reclaimable_fn(self, name: str, fn: Fn) -> None:
        self._add("Reclaimable", name, fn)

    def add_preemptive_fn(self, name: str, fn: Fn) -> None:
        self._add("Preemptive", name, fn)

    def add_job_domains_fn(self, name: str, fn: Fn) -> None:
        """fn(job, purpose) -> None (no constraint) or (candidates, reason): the node sets the job's
        gang must be placed within, in order of preference — [(label, bool mask over nodes or None
        for all nodes)] — and why the job waits when it fits none (network topology). ``purpose``
        is "allocate", or "evict" when preempt/reclaim look for room."""
        self._add("JobDomains", name, fn)

    def add_victim_tasks_fn(self, name: str, fn: Fn) -> None:
        """fn(running tasks) -> tasks to evict (the shuffle action; e.g. rescheduling)."""
        self._add("VictimTasks", name, fn)

    def add_event_handler(
        self,
        allocate: Callable[[TaskInfo], None] | None = None,
        deallocate: Callable[[TaskInfo], None] | None = None,
    ) -> None:
        """allocate(task) / deallocate(task) are called as tasks gain or lose resources."""
        self.event_handlers.append((allocate, deallocate))

    # ------------------------------------------------------------------ events
    def notify_allocated(self, task: TaskInfo) -> None:
        """Run every plugin's allocate handler: ``task`` now holds (or is promised) its node's resources."""
        for alloc, _ in self.event_handlers:
            if alloc is not None:
                alloc(task)

    def notify_deallocated(self, task: TaskInfo) -> None:
        """Run every plugin's deallocate handler: ``task`` gave its node's resources back."""
        for _, dealloc in self.event_handlers:
            if dealloc is not None:
                dealloc(task)

    # ------------------------------------------------------------------ combination
    def tiered(self, point: str, switch: str | None = None) -> Iterable[list[tuple[str, Fn]]]:
        """Per tier, the (plugin name, fn) registered for ``point`` and switched on."""
        key = (point, switch)
        cached = self._tier_cache.get(key)
        if cached is None:
            cached = self._tier_cache[key] = self._tiers_of(point, switch)
        return cached

    def _tiers_of(self, point: str, switch: str | None) -> list[list[tuple[str, Fn]]]:
        fns = self.fns.get(point)
        if not fns:
            return []
        out = []
        for names in enabled_names(self.tiers, switch or point):
            found = []
            for name in names:
                fn = fns.get(name)
                if fn is not None:
                    found.append((name, fn))
            out.append(found)
        return out

    def _order(self, point: str, left: Any, right: Any) -> int:
        # Orders combine as "the first non-zero answer in tier order", so the tiers flatten.
        fns = self._order_fns.get(point)
        if fns is None:
            fns = self._order_fns[point] = tuple(fn for tier in self.tiered(point) for _, fn in tier)
        for fn in fns:
            r: int = fn(left, right)
            if r != 0:
                return r
        return 0

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        r = self._order("JobOrder", left, right)
        return r or _cmp_default(left.creation, left.uid, right.creation, right.uid)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        r = self._order("QueueOrder", left, right)
        return r or _cmp_default(left.creation, left.name, right.creation, right.name)

    def namespace_order(self, left: str, right: str) -> int:
        return self._order("NamespaceOrder", left, right) or (left > right) - (left < right)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        r = self._order("TaskOrder", left, right)
        if r:
            return r
        if self.volcano_task_order:
            return _volcano_task_order(left, right)
        if left.role != right.role:
            return -1 if left.role < right.role else 1
        if left.index != right.index:
            return -1 if left.index < right.index else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    @property
    def job_key(self) -> Callable[[JobInfo], Any]:
        return functools.cmp_to_key(self.job_order)

    @property
    def queue_key(self) -> Callable[[QueueInfo], Any]:
        return functools.cmp_to_key(self.queue_order)

    @property
    def task_key(self) -> Callable[[TaskInfo], Any]:
        return functools.cmp_to_key(self.task_order)

    def _all(self, point: str, *args: Any, switch: str | None = None) -> bool:
        for tier in self.tiered(point, switch):
            for _, fn in tier:
                if not fn(*args):
                    return False
        return True

    def job_valid(self, job: JobInfo) -> tuple[bool, str]:
        """(valid, reason): a job without enough valid pods is not scheduled."""
        # Asked for every job with pending tasks in every session: the tiers' fns flattened once
        # (the first refusal in tier order wins, so the tiers need not be told apart).
        fns = self._order_fns.get("JobValid")
        if fns is None:
            fns = self._order_fns["JobValid"] = tuple(fn for tier in self.tiered("JobValid") for _, fn in tier)
        for fn in fns:
            ok, reason = fn(job)
            if not ok:
                return False, reason
        return True, ""

    def job_ready(self, job: JobInfo) -> bool:
        return self._all("JobReady", job)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self._all("Allocatable", queue, task)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self._all("Preemptive", queue, task)

    def overused(self, queue: QueueInfo) -> bool:
        for tier in self.tiered("Overused"):
            for _, fn in tier:
                if fn(queue):
                    return True
        return False

    def _first(self, point: str, *args: Any) -> Any:
        """The first answer other than None, in tier order."""
        for tier in self.tiered(point):
            for _, fn in tier:
                r = fn(*args)
                if r is not None:
                    return r
        return None

    def overused_reason(self, queue: QueueInfo) -> str | None:
        reason: str | None = self._first("OverusedReason", queue)
        return reason

    def within_deserved(self, job: JobInfo) -> bool:
        return bool(self._first("WithinDeserved", job))

    def deserved_shares(self) -> dict[str, np.ndarray]:
        shares: dict[str, np.ndarray] | None = self._first("DeservedShares")
        return shares or {}

    def _vote(self, point: str, job: JobInfo, switch: str | None = None) -> bool:
        for tier in self.tiered(point, switch):
            permit = False
            for _, fn in tier:
                v = fn(job)
                if v < 0:
                    return False
                if v > 0:
                    permit = True
            if permit:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("JobPipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("JobEnqueueable", job, switch="JobEnqueued")

    def job_enqueued(self, job: JobInfo) -> None:
        for tier in self.tiered("JobEnqueued"):
            for _, fn in tier:
                fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.tiered("JobStarving"):
            if tier:
                return all(fn(job) for _, fn in tier)
        return False

    def job_domains(self, job: JobInfo, purpose: str = "allocate") -> Domains | None:
        fns = self.fns.get("JobDomains")
        if not fns:
            return None
        for tier in self.tiered("JobDomains"):
            for _, fn in tier:
                got: Domains | None = fn(job, purpose)
                if got is not None:
                    return got
        return None

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """The union of every plugin's victims, in the order first named."""
        out: dict[str, TaskInfo] = {}
        for tier in self.tiered("VictimTasks"):
            for _, fn in tier:
                for t in fn(tasks):
                    out.setdefault(t.uid, t)
        return list(out.values())

    def _victims(self, point: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self.tiered(point):
            result: list[TaskInfo] | None = None
            abstained = True
            for _, fn in tier:
                got, vote = fn(actor, candidates)
                if vote == ABSTAIN:
                    continue
                abstained = False
                if not got:
                    result = []
                    break
                result = got if result is None else [t for t in result if t in got]
            if not abstained and result is not None:
                return result
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("Preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("Reclaimable", reclaimer, candidates)
