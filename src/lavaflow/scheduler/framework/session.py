"""A scheduling session: one cycle's view of the cluster state and the operations on it.

Volcano splits its session the same way: this module holds the state (jobs, nodes, queues) and
the operations that change it (framework/session.go); ``session_plugins.py`` the plugins'
callbacks and their combination by tier (session_plugins.go); ``node_selection.py`` node
filtering and scoring with its caches. ``Statement`` changes the state only through the
operations listed under "state operations" below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model import Eviction, JobInfo, NodeSet, QueueInfo, TaskInfo, TaskStatus
from ..resources import ResourceIndex
from .memo import session_jobs_token
from .node_choice import NodeChoice, NodeSampler
from .node_selection import NodeSelection
from .registry import PLUGINS, Plugin
from .session_plugins import ABSTAIN, PERMIT, REJECT, UNCACHED, SessionPlugins

if TYPE_CHECKING:  # pragma: no cover
    from ..cache import SchedulerCache
    from .conf import SchedulerConfiguration
    from .statement import Statement

__all__ = ["ABSTAIN", "PERMIT", "REJECT", "UNCACHED", "Session"]

log = logging.getLogger(__name__)


# What a disposed-of session's node selection is left with in place of the session.
_DISPOSED = SessionPlugins(())
# Task statuses as globals: read per task placed, bound or undone (a member read off its class costs more).
_PENDING, _ALLOCATED, _PIPELINED, _BINDING, _RELEASING = (
    TaskStatus.PENDING,
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.RELEASING,
)


LAVAFLOW_CHOICE = NodeChoice()


class Session(SessionPlugins):
    """One scheduling cycle over the cache's live state."""

    def __init__(
        self,
        cache: SchedulerCache,
        conf: SchedulerConfiguration,
        now: float = 0.0,
        sampler: NodeSampler | None = None,
    ) -> None:
        super().__init__(conf.tiers)
        self.cache = cache
        self.conf = conf
        self.now = now
        self.index: ResourceIndex = cache.index
        self.nodes: NodeSet = cache.nodes
        self.queues: dict[str, QueueInfo] = cache.queues
        # Only jobs with a PodGroup and an existing queue are scheduled (Volcano's snapshot rule).
        queues = cache.queues
        self.jobs: dict[str, JobInfo] = {uid: j for uid, j in cache.scheduled_jobs().items() if j.queue in queues}
        self.total = self.nodes.view("allocatable").sum(axis=0) if len(self.nodes) else np.zeros(len(self.index))
        self.plugins: dict[str, Plugin] = {}
        # Per-session decisions, read by the backend and by explanations.
        self.pipelined: list[TaskInfo] = []
        self.log: list[tuple[str, str, str]] = []  # (job uid, action, message)
        self.enqueued: set[str] = set()
        self.allocated_here: list[TaskInfo] = []  # tasks this session allocated (dispatched or not)
        self.held_statements: list[Statement] = []  # pipelined jobs' statements, discarded at close
        self.session_nominated: set[str] = set()  # jobs nominated by this session's evictions
        # Every statement opened in this session, so that abort() can discard what was not committed.
        self.statements: list[Statement] = []
        self.error: BaseException | None = None  # what made the session abort, if it did
        versions: list[int] = []
        append = versions.append
        for job in self.jobs.values():  # (every job of a large cluster: only what is not clean is reset)
            if job.fit_errors:
                job.fit_errors = {}
            if job.job_fit_errors:
                job.job_fit_errors = ""
            pg = job.pg
            job.sphase = pg.status.phase if pg is not None else ""  # job.phase
            if job.extra_conditions:
                job.extra_conditions = []
            append(job.version)
        # The jobs' token (see memo.session_jobs_token); with the same jobs, the token of the last
        # session and the uids of the jobs that changed since it opened (None and nothing otherwise).
        self.jobs_token, self.jobs_previous_token, self.jobs_changed = session_jobs_token(
            cache, tuple(self.jobs.values()), versions
        )
        # Volcano's node choice (node_choice.py) when the scheduler was given it, else lavaflow's.
        self.node_choice: NodeChoice = sampler.choice if sampler is not None else LAVAFLOW_CHOICE
        self.volcano_task_order = self.node_choice.volcano
        self.selection = NodeSelection(self.nodes, self.index, self, cache.static_masks, sampler)

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
        self._undo_uncommitted()

    def abort(self, error: BaseException) -> None:
        """Give up on a session an action or plugin raised in: undo what no statement committed.

        Every statement's uncommitted operations are discarded (newest statement first), then the
        pipelined placements and the allocations never dispatched are undone, as at close. What
        was committed stands — its binds and evictions were handed to the cache (and, with
        ``cache.on_bind``, may already be on their way) — so the cache is left as after the last
        committed statement. Plugins' on_session_close is not called; their deallocate handlers
        are, but one that raises is logged and skipped so that the state is always restored.
        """
        self.error = error

        def guarded(fn: Callable[[TaskInfo], None] | None) -> Callable[[TaskInfo], None] | None:
            if fn is None:
                return None

            def call(task: TaskInfo) -> None:
                try:
                    fn(task)
                except Exception:  # the session is being thrown away; its state must still be undone
                    log.exception("event handler failed while aborting a session (task %s)", task.uid)

            return call

        self.event_handlers = [(guarded(a), guarded(d)) for a, d in self.event_handlers]
        for stmt in reversed(self.statements):
            if stmt.operations:
                stmt.discard()
        self.selection.node_limit = None
        self._undo_uncommitted()

    def dispose(self) -> None:
        """Untie a finished session from the reference cycles it is built of, so that it and what
        only it holds (plugin callbacks and their closures, per-session plugin state such as the
        elastic plugin's jobs) are freed by reference counting once nobody holds the session,
        instead of piling up as cyclic garbage (about two hundred objects a session) for the
        collector's full passes over the whole heap.

        The plugins' callbacks close over the session and their plugin, and the node selection
        points back at the session: those go.  What is read after a session (its log, jobs,
        queues, plugin objects and their accounting, e.g. ``proportion``) stays; the session can
        no longer answer the actions' questions.  The scheduler disposes of a session when it opens
        the next one.
        """
        self.fns.clear()
        self.event_handlers.clear()
        self.score_keys.clear()
        self._tier_cache.clear()
        self._order_fns.clear()
        self.statements.clear()
        self.held_statements.clear()
        for plugin in self.plugins.values():
            if getattr(plugin, "ssn", None) is self:
                plugin.ssn = None  # type: ignore[attr-defined]
        self.selection.plugins = _DISPOSED

    def _undo_uncommitted(self) -> None:
        # Pipelined placements never outlive their session.
        for stmt in reversed(self.held_statements):
            stmt.discard()
        self.held_statements.clear()
        for task in self.pipelined:
            if task.status == _PIPELINED:
                job = self.cache.jobs.get(task.job)
                self.nodes.pipelined[task.node] -= task.resreq
                self.nodes.take_task(task.node, task.uid)
                if job is not None:
                    job.set_status(task, _PENDING)
                task.node = -1
        self.pipelined.clear()
        # Allocations never dispatched (backfill of a gang that did not become ready) are dropped too.
        for task in self.allocated_here:
            if task.status == _ALLOCATED:
                job = self.cache.jobs.get(task.job)
                if job is not None:
                    self._unplace(job, task)
                    self.notify_deallocated(task)
        self.allocated_here.clear()
        self.statements.clear()

    def wake_at(self, time: float, rule: str | None = None) -> None:
        """Ask for a scheduling cycle at ``time`` even if nothing else changes (time-based rules).

        ``rule``: the asking rule works out all its wake times again in every session, so the
        times it asks for now replace those it asked for in earlier sessions."""
        if time > self.now:
            if rule is None:
                self.cache.decisions.wakeups.append(time)
            else:
                self.cache.decisions.rule_wakeups.append((time, rule))

    def record(self, job: JobInfo | str, action: str, message: str) -> None:
        uid = job if isinstance(job, str) else job.uid
        self.log.append((uid, action, message))

    def _callbacks_changed(self) -> None:
        self.selection.forget_scores()

    # ------------------------------------------------------------------ node selection
    @property
    def node_limit(self) -> np.ndarray | None:
        """Nodes the task being placed may use (a job's HyperNode while allocate tries it), or None."""
        return self.selection.node_limit

    @node_limit.setter
    def node_limit(self, mask: np.ndarray | None) -> None:
        self.selection.node_limit = mask

    def static_mask(self, task: TaskInfo, key: Any, build: Callable[[], np.ndarray]) -> np.ndarray:
        return self.selection.static_mask(task, key, build)

    def predicate_mask(self, task: TaskInfo) -> np.ndarray:
        return self.selection.predicate_mask(task)

    def node_scores(self, task: TaskInfo, candidates: np.ndarray, skip: tuple[str, ...] = ()) -> np.ndarray:
        return self.selection.node_scores(task, candidates, skip)

    def fit_error(self, task: TaskInfo, use_future: bool = True) -> str:
        return self.selection.fit_error(task, use_future)

    def select_node(self, task: TaskInfo, future: bool = False) -> tuple[int, bool]:
        return self.selection.select_node(task, future)

    # ------------------------------------------------------------------ shares
    def queue_allocated(self) -> dict[str, np.ndarray]:
        width = len(self.index)
        out = {name: np.zeros(width) for name in self.queues}
        for job in self.jobs.values():
            if job.queue in out:
                out[job.queue] += job.allocated_view(width)
        return out

    # ------------------------------------------------------------------ direct allocation (backfill)
    def allocate(self, task: TaskInfo, node: int) -> None:
        """Allocate outside a statement and bind at once (Volcano's ssn.Allocate)."""
        job = self.jobs[task.job]
        self.place(task, node, _ALLOCATED)
        self.notify_allocated(task)
        if job.is_ready():
            for t in job.tasks_with(_ALLOCATED):
                self.bind(t)

    # ------------------------------------------------------------------ state operations
    # The interface Statement changes the session state through. place/unplace/release/unrelease
    # change the state only; the caller then runs the plugins' event handlers
    # (notify_allocated / notify_deallocated), so that a statement has recorded the operation
    # before any plugin code runs. bind and evict hand a decision to the cache.
    def track(self, stmt: Statement) -> None:
        """Remember a statement opened in this session (its uncommitted operations are undone on abort)."""
        self.statements.append(stmt)

    def place(self, task: TaskInfo, node: int, status: TaskStatus) -> None:
        """``task`` takes ``node``: ALLOCATED counts in the node's ``used``, PIPELINED in its
        ``pipelined`` (resources being released)."""
        self._place(self.jobs[task.job], task, node, status)

    def unplace(self, task: TaskInfo) -> None:
        """Undo ``place``: the task is pending again and its node has the resources back."""
        if task.status == _PIPELINED and task in self.pipelined:
            self.pipelined.remove(task)
        self._unplace(self.jobs[task.job], task)

    def release(self, task: TaskInfo) -> TaskStatus:
        """Tentatively evict ``task``: it becomes RELEASING; returns the status it had."""
        job = self.jobs[task.job]
        before = task.status
        self.nodes.releasing[task.node] += task.resreq
        job.set_status(task, _RELEASING)
        return before

    def unrelease(self, task: TaskInfo, before: TaskStatus) -> None:
        """Undo ``release``: the task has status ``before`` again."""
        self.nodes.releasing[task.node] -= task.resreq
        self.jobs[task.job].set_status(task, before)

    def bind(self, task: TaskInfo) -> None:
        """Send an allocated task's bind: it becomes BINDING and the cache queues (or hands over) the bind."""
        self.jobs[task.job].set_status(task, _BINDING)
        self.cache.bind(task, self.nodes.names[task.node])

    def evict(self, task: TaskInfo, reason: Eviction) -> None:
        """Send a released task's eviction to the cache."""
        self.cache.evict(task, reason)

    def report_resize(self, job: JobInfo, kind: str, message: str, count: int = 0, event: bool = True) -> None:
        """Tell the backend of an elastic start, resize, halt or migration of ``job`` (its binds and
        evictions went through statements): the resize counters and, with ``event``, a Kubernetes
        Event on its PodGroup."""
        if event:
            self.cache.decisions.events.append(("PodGroup", job.uid, "Normal", kind, message))
        self.cache.decisions.resizes.append((job.uid, kind, message, count))

    def _place(self, job: JobInfo, task: TaskInfo, node: int, status: TaskStatus) -> None:
        task.node = node
        if status == _PIPELINED:
            self.nodes.pipelined[node] += task.resreq
            self.pipelined.append(task)
        else:
            self.nodes.used[node] += task.resreq
            self.allocated_here.append(task)
        job.set_status(task, status)
        self.nodes.put_task(node, task)  # (with its new status: a pipelined one is not in use)

    def _unplace(self, job: JobInfo, task: TaskInfo) -> None:
        node = task.node
        if task.status == _PIPELINED:
            self.nodes.pipelined[node] -= task.resreq
        else:
            self.nodes.used[node] -= task.resreq
        self.nodes.take_task(node, task.uid)
        job.set_status(task, _PENDING)
        task.node = -1
