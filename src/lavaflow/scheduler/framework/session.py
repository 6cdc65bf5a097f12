"""A scheduling session: one cycle's view of the cluster and the plugin callbacks.

Callbacks are combined by tier with Volcano's rules (framework/session_plugins.go):
order functions — the first non-zero answer wins; JobReady/Allocatable/Predicate/
Preemptive — AND; Overused — OR; vote functions (JobPipelined/JobEnqueueable) —
a Reject anywhere refuses, a Permit in a tier decides, all-abstain permits;
JobStarving — AND within the first tier that registers any; victim selection
(Preemptable/Reclaimable) — per tier the intersection of the non-abstaining
plugins' candidates, the first tier with an answer decides.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model import JobInfo, NodeSet, QueueInfo, TaskInfo, TaskStatus
from ..resources import EPS, ResourceIndex
from .registry import PLUGINS, Plugin

if TYPE_CHECKING:  # pragma: no cover
    from ..cache import SchedulerCache
    from .conf import SchedulerConfiguration

PERMIT, ABSTAIN, REJECT = 1, 0, -1
# A node-order cache_key's answer for a task whose score depends on more than each node's own
# row: that fn is then computed over the candidates only, the others stay cached.
UNCACHED = object()


def _cmp_default(l_creation: float, l_uid: str, r_creation: float, r_uid: str) -> int:
    if l_creation != r_creation:
        return -1 if l_creation < r_creation else 1
    if l_uid != r_uid:
        return -1 if l_uid < r_uid else 1
    return 0


class Session:
    """One scheduling cycle over the cache's live state."""

    def __init__(self, cache: SchedulerCache, conf: SchedulerConfiguration, now: float = 0.0) -> None:
        self.cache = cache
        self.conf = conf
        self.now = now
        self.index: ResourceIndex = cache.index
        self.nodes: NodeSet = cache.nodes
        self.queues: dict[str, QueueInfo] = cache.queues
        # Only jobs with a PodGroup and an existing queue are scheduled (Volcano's snapshot rule).
        self.jobs: dict[str, JobInfo] = {
            uid: j for uid, j in cache.jobs.items() if j.pg is not None and j.queue in cache.queues
        }
        self.total = self.nodes.view("allocatable").sum(axis=0) if len(self.nodes) else np.zeros(len(self.index))
        self.tiers = conf.tiers
        self.plugins: dict[str, Plugin] = {}
        self.fns: dict[str, dict[str, Callable]] = {}
        self.event_handlers: list[tuple[Callable | None, Callable | None]] = []
        # Per-session decisions, read by the backend and by explanations.
        self.pipelined: list[TaskInfo] = []
        self.log: list[tuple[str, str, str]] = []  # (job uid, action, message)
        self.enqueued: set[str] = set()
        self.allocated_here: list[TaskInfo] = []  # tasks this session allocated (dispatched or not)
        self.held_statements: list = []  # pipelined jobs' statements, discarded at close
        self.session_nominated: set[str] = set()  # jobs nominated by this session's evictions
        for job in self.jobs.values():
            job.fit_errors = {}
            job.job_fit_errors = ""
            job.sphase = job.phase
            if job.extra_conditions:
                job.extra_conditions = []
        self._static_cache: dict[Any, np.ndarray] = cache.static_masks
        self._tier_cache: dict[tuple[str, str | None], list[list[tuple[str, Callable]]]] = {}
        self._order_fns: dict[str, tuple[Callable, ...]] = {}
        self._score_keys: dict[str, Callable | None] = {}
        # Per task class: (node-set key, epoch, scores over all nodes); see _class_scores.
        self._score_cache: dict[Any, list] = {}
        self._score_epoch = 0
        self._score_log: list[np.ndarray] = []  # rows whose usage changed, one entry per epoch
        self._score_snap: np.ndarray | None = None  # nodes.used when last compared
        self._score_nodes: Any = None
        # Nodes the task being placed may use (a job's HyperNode while allocate tries it), or None.
        self.node_limit: np.ndarray | None = None

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        for tier in self.tiers:
            for opt in tier.plugins:
                cls = PLUGINS.get(opt.name)
                if cls is None:
                    continue
                plugin = cls(opt.arguments)
                self.plugins[opt.name] = plugin
                plugin.on_session_open(self)

    def close(self) -> None:
        for plugin in self.plugins.values():
            plugin.on_session_close(self)
        # Pipelined placements never outlive their session.
        for stmt in reversed(self.held_statements):
            stmt.discard()
        self.held_statements.clear()
        for task in self.pipelined:
            if task.status == TaskStatus.PIPELINED:
                job = self.cache.jobs.get(task.job)
                self.nodes.pipelined[task.node] -= task.resreq
                self.nodes.tasks[task.node].pop(task.uid, None)
                if job is not None:
                    job.set_status(task, TaskStatus.PENDING)
                task.node = -1
        self.pipelined.clear()
        # Allocations never dispatched (backfill of a gang that did not become ready) are dropped too.
        for task in self.allocated_here:
            if task.status == TaskStatus.ALLOCATED:
                job = self.cache.jobs.get(task.job)
                if job is not None:
                    self._unplace(job, task)
        self.allocated_here.clear()

    def wake_at(self, time: float) -> None:
        """Ask for a scheduling cycle at ``time`` even if nothing else changes (time-based rules)."""
        if time > self.now:
            self.cache.decisions.wakeups.append(time)

    def record(self, job: JobInfo | str, action: str, message: str) -> None:
        uid = job if isinstance(job, str) else job.uid
        self.log.append((uid, action, message))

    # ------------------------------------------------------------------ registration
    def _add(self, point: str, name: str, fn: Callable) -> None:
        self.fns.setdefault(point, {})[name] = fn
        self._tier_cache.clear()
        self._order_fns.clear()
        self._score_cache.clear()

    def add_job_order_fn(self, name: str, fn: Callable) -> None:
        self._add("JobOrder", name, fn)

    def add_queue_order_fn(self, name: str, fn: Callable) -> None:
        self._add("QueueOrder", name, fn)

    def add_namespace_order_fn(self, name: str, fn: Callable) -> None:
        """fn(namespace, namespace) -> int: inside a queue, which namespace's jobs go next."""
        self._add("NamespaceOrder", name, fn)

    def add_task_order_fn(self, name: str, fn: Callable) -> None:
        self._add("TaskOrder", name, fn)

    def add_predicate_fn(self, name: str, fn: Callable) -> None:
        """fn(task) -> (bool mask over nodes, explain(task, failing mask) -> {reason: count})."""
        self._add("Predicate", name, fn)

    def add_node_order_fn(self, name: str, fn: Callable, cache_key: Callable | None = None) -> None:
        """fn(task, candidate node indices) -> float scores (vectorised BatchNodeOrder).

        ``cache_key(task)``, when given, promises that the score of node i depends
        only on that node's own allocatable/used rows, labels and taints and on the
        task only through ``cache_key(task)``; the session then keeps each task
        class's scores over all nodes and rescores only the nodes that changed.
        """
        self._add("NodeOrder", name, fn)
        self._score_keys[name] = cache_key

    def add_job_valid_fn(self, name: str, fn: Callable) -> None:
        self._add("JobValid", name, fn)

    def add_job_ready_fn(self, name: str, fn: Callable) -> None:
        self._add("JobReady", name, fn)

    def add_job_pipelined_fn(self, name: str, fn: Callable) -> None:
        self._add("JobPipelined", name, fn)

    def add_job_starving_fn(self, name: str, fn: Callable) -> None:
        self._add("JobStarving", name, fn)

    def add_job_enqueueable_fn(self, name: str, fn: Callable) -> None:
        self._add("JobEnqueueable", name, fn)

    def add_job_enqueued_fn(self, name: str, fn: Callable) -> None:
        self._add("JobEnqueued", name, fn)

    def add_allocatable_fn(self, name: str, fn: Callable) -> None:
        self._add("Allocatable", name, fn)

    def add_overused_fn(self, name: str, fn: Callable) -> None:
        self._add("Overused", name, fn)

    def add_preemptable_fn(self, name: str, fn: Callable) -> None:
        self._add("Preemptable", name, fn)

    def add_reclaimable_fn(self, name: str, fn: Callable) -> None:
        self._add("Reclaimable", name, fn)

    def add_preemptive_fn(self, name: str, fn: Callable) -> None:
        self._add("Preemptive", name, fn)

    def add_job_domains_fn(self, name: str, fn: Callable) -> None:
        """fn(job, purpose) -> None (no constraint) or (candidates, reason): the node sets the job's
        gang must be placed within, in order of preference — [(label, bool mask over nodes or None
        for all nodes)] — and why the job waits when it fits none (network topology). ``purpose``
        is "allocate", or "evict" when preempt/reclaim look for room."""
        self._add("JobDomains", name, fn)

    def job_domains(self, job: JobInfo, purpose: str = "allocate") -> tuple[list[tuple[str, np.ndarray | None]], str] | None:
        fns = self.fns.get("JobDomains")
        if not fns:
            return None
        for tier in self._tiered("JobDomains"):
            for _, fn in tier:
                got = fn(job, purpose)
                if got is not None:
                    return got
        return None

    def add_victim_tasks_fn(self, name: str, fn: Callable) -> None:
        """fn(running tasks) -> tasks to evict (the shuffle action; e.g. rescheduling)."""
        self._add("VictimTasks", name, fn)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """The union of every plugin's victims, in the order first named."""
        out: dict[str, TaskInfo] = {}
        for tier in self._tiered("VictimTasks"):
            for _, fn in tier:
                for t in fn(tasks):
                    out.setdefault(t.uid, t)
        return list(out.values())

    def add_event_handler(self, allocate: Callable | None = None, deallocate: Callable | None = None) -> None:
        """allocate(task) / deallocate(task) are called as tasks gain or lose resources."""
        self.event_handlers.append((allocate, deallocate))

    # ------------------------------------------------------------------ combination
    def _tiered(self, point: str, switch: str | None = None) -> Iterable[list[tuple[str, Callable]]]:
        """Per tier, the (plugin name, fn) registered for ``point`` and switched on."""
        key = (point, switch)
        cached = self._tier_cache.get(key)
        if cached is None:
            cached = self._tier_cache[key] = self._tiers_of(point, switch)
        return cached

    def _tiers_of(self, point: str, switch: str | None) -> list[list[tuple[str, Callable]]]:
        fns = self.fns.get(point)
        if not fns:
            return []
        switch = switch or point
        out = []
        for tier in self.tiers:
            found = []
            for opt in tier.plugins:
                fn = fns.get(opt.name)
                if fn is not None and opt.enabled(switch):
                    found.append((opt.name, fn))
            out.append(found)
        return out

    def _order(self, point: str, left: Any, right: Any) -> int:
        # Orders combine as "the first non-zero answer in tier order", so the tiers flatten.
        fns = self._order_fns.get(point)
        if fns is None:
            fns = self._order_fns[point] = tuple(fn for tier in self._tiered(point) for _, fn in tier)
        for fn in fns:
            r = fn(left, right)
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
        if left.role != right.role:
            return -1 if left.role < right.role else 1
        if left.index != right.index:
            return -1 if left.index < right.index else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    job_key = property(lambda self: functools.cmp_to_key(self.job_order))
    queue_key = property(lambda self: functools.cmp_to_key(self.queue_order))
    task_key = property(lambda self: functools.cmp_to_key(self.task_order))

    def _all(self, point: str, *args: Any, switch: str | None = None) -> bool:
        for tier in self._tiered(point, switch):
            for _, fn in tier:
                if not fn(*args):
                    return False
        return True

    def job_valid(self, job: JobInfo) -> tuple[bool, str]:
        """(valid, reason): a job without enough valid pods is not scheduled."""
        for tier in self._tiered("JobValid"):
            for _, fn in tier:
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
        for tier in self._tiered("Overused"):
            for _, fn in tier:
                if fn(queue):
                    return True
        return False

    def _vote(self, point: str, job: JobInfo, switch: str | None = None) -> bool:
        for tier in self._tiered(point, switch):
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
        for tier in self._tiered("JobEnqueued"):
            for _, fn in tier:
                fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self._tiered("JobStarving"):
            if tier:
                return all(fn(job) for _, fn in tier)
        return False

    def _victims(self, point: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self._tiered(point):
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

    # ------------------------------------------------------------------ predicates and scores
    def static_mask(self, task: TaskInfo, key: Any, build: Callable[[], np.ndarray]) -> np.ndarray:
        """Cache of node-label predicates per pod signature; reset when nodes change."""
        k = (key, self.nodes.version)
        mask = self._static_cache.get(k)
        if mask is None:
            if len(self._static_cache) > 4096:
                self._static_cache.clear()
            mask = build()
            self._static_cache[k] = mask
        return mask

    def predicate_mask(self, task: TaskInfo) -> np.ndarray:
        mask = self.nodes.schedulable[: len(self.nodes)].copy()
        if self.node_limit is not None:
            mask &= self.node_limit
        for tier in self._tiered("Predicate"):
            for _, fn in tier:
                m, _explain = fn(task)
                mask &= m
        return mask

    def node_scores(self, task: TaskInfo, candidates: np.ndarray, skip: tuple[str, ...] = ()) -> np.ndarray:
        scores = np.zeros(len(candidates))
        for tier in self._tiered("NodeOrder"):
            for name, fn in tier:
                if name not in skip:
                    scores += fn(task, candidates)
        return scores

    def _class_key(self, task: TaskInfo) -> tuple[Any, tuple[str, ...]]:
        """The task's score class (None when some node-order fn cannot be cached), and the
        fns whose cache_key answered UNCACHED for this task (scored over the candidates only)."""
        parts = []
        apart: tuple[str, ...] = ()
        for tier in self._tiered("NodeOrder"):
            for name, _ in tier:
                ck = self._score_keys.get(name)
                if ck is None:
                    return None, ()
                part = ck(task)
                if part is UNCACHED:
                    apart += (name,)
                else:
                    parts.append(part)
        return tuple(parts), apart

    def _changed_rows(self) -> int:
        """Advance the usage epoch with the nodes whose ``used`` row changed; returns the epoch."""
        nodes = self.nodes
        n = len(nodes)
        used = nodes.used[:n]
        ident = (nodes.version, n, nodes.width, id(nodes.allocatable), id(nodes.used))
        snap = self._score_snap
        if self._score_nodes != ident or snap is None or snap.shape != used.shape:
            # Node set changed: every cached score is stale.
            self._score_nodes = ident
            self._score_cache.clear()
            self._score_log.clear()
            self._score_epoch = 0
            self._score_snap = used.copy()
            return 0
        # Usually one or two rows changed: find them in the flat comparison (cheaper than any(axis=1)).
        flat = np.flatnonzero(used != snap)
        if len(flat) == 0:
            return self._score_epoch
        rows = flat // used.shape[1]
        if len(rows) > 1:
            rows = rows[:1] if rows[0] == rows[-1] else np.unique(rows)
        if len(rows):
            snap[rows] = used[rows]
            self._score_log.append(rows)
            self._score_epoch += 1
        return self._score_epoch

    def _class_array(self, key: Any, epoch: int, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """A per-node array for a task class, recomputing only the rows changed since it was cached.

        ``compute(rows)`` must be elementwise per node (row i depends on node i only),
        so recomputing a subset of rows gives exactly what a full computation would.
        """
        n = len(self.nodes)
        entry = self._score_cache.get(key)
        if entry is not None and entry[0] == epoch:
            return entry[1]
        if entry is None or epoch - entry[0] > max(64, n // 8):
            rows = None
        else:
            log = self._score_log
            rows = log[entry[0]] if epoch - entry[0] == 1 else np.unique(np.concatenate(log[entry[0] : epoch]))
            if len(rows) * 4 > n:
                rows = None
        if rows is None:
            if len(self._score_cache) > 512:
                self._score_cache.clear()
            values = compute(np.arange(n))
            self._score_cache[key] = [epoch, values]
            return values
        entry[1][rows] = compute(rows)
        entry[0] = epoch
        return entry[1]

    def _best(self, task: TaskInfo, cand: np.ndarray, epoch: int | None = None) -> int:
        key, apart = self._class_key(task)
        if key is None:
            scores = self.node_scores(task, cand)
        else:
            if epoch is None:
                epoch = self._changed_rows()
            full = self._class_array(("score", key), epoch, lambda rows: self.node_scores(task, rows, apart))
            scores = full[cand]
            if apart:
                scores = scores + self.node_scores(task, cand, tuple(n for n in self._score_keys if n not in apart))
        return int(cand[int(np.argmax(scores))])

    def _resource_fit(self, req: np.ndarray, nz: np.ndarray, epoch: int) -> np.ndarray:
        """Per node: idle (allocatable - used) covers ``req`` in every requested column."""
        alloc = self.nodes.allocatable
        used = self.nodes.used
        want = req[nz]

        def compute(rows: np.ndarray) -> np.ndarray:
            idle = alloc[rows][:, nz] - used[rows][:, nz]
            return np.all(idle + EPS >= want, axis=1)

        return self._class_array(("fit", req.tobytes()), epoch, compute)

    def fit_error(self, task: TaskInfo, use_future: bool = True) -> str:
        """A kube-scheduler-style explanation of why no node fits ``task``."""
        n = len(self.nodes)
        if n == 0:
            return "0/0 nodes are available: the cluster has no nodes"
        reasons: dict[str, int] = {}
        alive = self.nodes.schedulable[:n]
        not_ready = int(n - alive.sum())
        if not_ready:
            reasons["node(s) were unschedulable or not ready"] = not_ready
        remaining = alive.copy()
        if self.node_limit is not None:
            outside = int((remaining & ~self.node_limit).sum())
            if outside:
                reasons["node(s) outside the job's HyperNode"] = outside
            remaining &= self.node_limit
        for tier in self._tiered("Predicate"):
            for _, fn in tier:
                m, explain = fn(task)
                failing = remaining & ~m
                if failing.any():
                    for reason, count in explain(task, failing).items():
                        reasons[reason] = reasons.get(reason, 0) + count
                remaining &= m
        if remaining.any():
            idle = self.nodes.future_idle() if use_future else self.nodes.idle()
            req = task.resreq
            short = idle[remaining] + EPS < req
            for r in np.nonzero(req > 0)[0]:
                c = int(short[:, r].sum())
                if c:
                    reasons[f"Insufficient {self.index.names[r]}"] = c
        body = ", ".join(f"{c} {r}" for r, c in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"0/{n} nodes are available: {body}." if body else f"0/{n} nodes are available."

    def select_node(self, task: TaskInfo, future: bool = False) -> tuple[int, bool]:
        """Best node for ``task``: (index, fits idle). -1 when none fits.

        Nodes that fit the idle resources come before nodes that fit only once
        releasing resources are gone (Volcano's two gradients).
        """
        n = len(self.nodes)
        if n == 0:
            return -1, False
        mask = self.predicate_mask(task)
        if not mask.any():
            return -1, False
        req = task.resreq
        nz = np.nonzero(req > 0)[0]
        alloc = self.nodes.allocatable[:n]
        used = self.nodes.used[:n]
        # Nodes whose usage changed since the last call: per-class fit and scores are
        # kept over all nodes and only those rows are recomputed.
        epoch = self._changed_rows()
        fit = mask & self._resource_fit(req, nz, epoch) if len(nz) else mask
        cand = np.flatnonzero(fit)
        if len(cand):
            return self._best(task, cand, epoch), True
        if not future:
            return -1, False
        fidle = (alloc - used + self.nodes.releasing[:n] - self.nodes.pipelined[:n])[:, nz] if len(nz) else None
        fit = mask & np.all(fidle + EPS >= req[nz], axis=1) if len(nz) else mask
        cand = np.flatnonzero(fit)
        if len(cand):
            return self._best(task, cand), False
        return -1, False

    # ------------------------------------------------------------------ shares
    def queue_allocated(self) -> dict[str, np.ndarray]:
        width = len(self.index)
        out = {name: np.zeros(width) for name in self.queues}
        for job in self.jobs.values():
            if job.queue in out:
                out[job.queue] += job.allocated_vector(width)
        return out

    # ------------------------------------------------------------------ direct allocation (backfill)
    def allocate(self, task: TaskInfo, node: int) -> None:
        """Allocate outside a statement and bind at once (Volcano's ssn.Allocate)."""
        job = self.jobs[task.job]
        self._place(job, task, node, TaskStatus.ALLOCATED)
        if job.is_ready():
            for t in job.tasks_with(TaskStatus.ALLOCATED):
                self.dispatch(job, t)

    def dispatch(self, job: JobInfo, task: TaskInfo) -> None:
        job.set_status(task, TaskStatus.BINDING)
        self.cache.bind(task, self.nodes.names[task.node])

    # Primitive state changes shared with Statement ---------------------------------
    def _place(self, job: JobInfo, task: TaskInfo, node: int, status: TaskStatus) -> None:
        task.node = node
        self.nodes.tasks[node][task.uid] = task
        if status == TaskStatus.PIPELINED:
            self.nodes.pipelined[node] += task.resreq
            self.pipelined.append(task)
        else:
            self.nodes.used[node] += task.resreq
            self.allocated_here.append(task)
        job.set_status(task, status)
        for alloc, _ in self.event_handlers:
            if alloc is not None:
                alloc(task)

    def _unplace(self, job: JobInfo, task: TaskInfo) -> None:
        node = task.node
        if task.status == TaskStatus.PIPELINED:
            self.nodes.pipelined[node] -= task.resreq
        else:
            self.nodes.used[node] -= task.resreq
        self.nodes.tasks[node].pop(task.uid, None)
        job.set_status(task, TaskStatus.PENDING)
        task.node = -1
        for _, dealloc in self.event_handlers:
            if dealloc is not None:
                dealloc(task)

    def _release(self, job: JobInfo, task: TaskInfo) -> TaskStatus:
        before = task.status
        self.nodes.releasing[task.node] += task.resreq
        job.set_status(task, TaskStatus.RELEASING)
        for _, dealloc in self.event_handlers:
            if dealloc is not None:
                dealloc(task)
        return before

    def _unrelease(self, job: JobInfo, task: TaskInfo, before: TaskStatus) -> None:
        self.nodes.releasing[task.node] -= task.resreq
        job.set_status(task, before)
        for alloc, _ in self.event_handlers:
            if alloc is not None:
                alloc(task)

