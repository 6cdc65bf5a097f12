"""Node selection for one session: predicates, scores and fit explanations over all nodes at once.

A predicate returns a boolean mask over all nodes and the masks are ANDed; node-order fns return
scores over candidate nodes and are summed; the best node is an ``argmax`` (ties to the lowest
index). Three caches keep the work per task small:

- node-label predicates per pod signature (``static_mask``), kept in the scheduler cache across
  sessions and reset whenever a node's labels, taints or membership change;
- per task class (the node-order fns' ``cache_key``s), the scores over all nodes, and per request
  vector the resource fit over all nodes: only the rows of nodes whose usage changed since they
  were computed are recomputed (``_class_array``);
- for a gang's run of same-class tasks, one plan (``plan_run``) for the whole run, rescoring only
  the node each placement fills.

With Volcano's node choice (``sampler`` set, see node_choice.py) a task's nodes are the sample a
search from the rotating start index finds among the feasible ones, and a tie between the best
goes to one of them at random; the same caches give the scores of the sample.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import NodeSet, TaskInfo
from ..resources import EPS, ResourceIndex
from .node_choice import NodeSampler
from .session_plugins import UNCACHED, SessionPlugins


class _ClassScores:
    """A task class's per-node values and the score epoch they are up to date with (rows changed
    after it are recomputed on the next read)."""

    __slots__ = ("epoch", "values")

    def __init__(self, epoch: int, values: np.ndarray) -> None:
        self.epoch = epoch
        self.values = values


@dataclass
class RunPlan:
    """Where a run of same-class tasks goes (:meth:`NodeSelection.plan_run`): valid for a task
    whose score class and predicate mask are ``key`` and ``mask``, one placement after another."""

    key: tuple[Any, ...]
    mask: np.ndarray
    nodes: list[int]
    used: int = 0  # placements of the plan made so far


class NodeSelection:
    """Filters and scores nodes for tasks with the session's predicate and node-order callbacks."""

    def __init__(
        self,
        nodes: NodeSet,
        index: ResourceIndex,
        plugins: SessionPlugins,
        static_cache: dict[Any, np.ndarray],
        sampler: NodeSampler | None = None,
    ) -> None:
        self.nodes = nodes
        self.sampler = sampler
        self.index = index
        self.plugins = plugins
        self._static_cache = static_cache
        # Per task class: [epoch, values over all nodes]; see _class_array.
        self._score_cache: dict[Hashable, _ClassScores] = {}
        self._score_epoch = 0
        self._score_log: list[np.ndarray] = []  # rows whose usage changed, one entry per epoch
        self._score_snap: np.ndarray | None = None  # nodes.used when last compared
        self._score_nodes: Any = None
        # Nodes the task being placed may use (a job's HyperNode while allocate tries it), or None.
        self.node_limit: np.ndarray | None = None

    def forget_scores(self) -> None:
        """Drop every cached score (the node-order callbacks changed)."""
        if self._score_cache:
            self._score_cache.clear()

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
        for tier in self.plugins.tiered("Predicate"):
            for _, fn in tier:
                m, _explain = fn(task)
                mask &= m
        return mask

    def node_scores(self, task: TaskInfo, candidates: np.ndarray, skip: tuple[str, ...] = ()) -> np.ndarray:
        scores = np.zeros(len(candidates))
        for tier in self.plugins.tiered("NodeOrder"):
            for name, fn in tier:
                if name not in skip:
                    scores += fn(task, candidates)
        return scores

    def _class_key(self, task: TaskInfo) -> tuple[tuple[Any, ...] | None, tuple[str, ...]]:
        """The task's score class (None when some node-order fn cannot be cached), and the
        fns whose cache_key answered UNCACHED for this task (scored over the candidates only)."""
        parts = []
        apart: tuple[str, ...] = ()
        keys = self.plugins.score_keys
        for tier in self.plugins.tiered("NodeOrder"):
            for name, _ in tier:
                ck = keys.get(name)
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
        rows = flat // used.shape[1]  # (ascending, as flat is)
        if len(rows) > 1:
            # np.unique's result, without np.unique: it imports numpy.ma on its first call (46 M
            # instructions, 0.7 % of a 200-node simulation), and these rows are sorted already.
            rows = rows[:1] if rows[0] == rows[-1] else rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
        if len(rows):
            snap[rows] = used[rows]
            self._score_log.append(rows)
            self._score_epoch += 1
        return self._score_epoch

    def _class_array(self, key: Hashable, epoch: int, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """A per-node array for a task class, recomputing only the rows changed since it was cached.

        ``compute(rows)`` must be elementwise per node (row i depends on node i only),
        so recomputing a subset of rows gives exactly what a full computation would.
        """
        n = len(self.nodes)
        entry = self._score_cache.get(key)
        if entry is not None and entry.epoch == epoch:
            return entry.values
        rows: np.ndarray | None
        if entry is None or epoch - entry.epoch > max(64, n // 8):
            rows = None
        else:
            log = self._score_log
            since = entry.epoch
            rows = log[since] if epoch - since == 1 else np.unique(np.concatenate(log[since:epoch]))
            if len(rows) * 4 > n:
                rows = None
        if rows is None or entry is None:
            if len(self._score_cache) > 512:
                self._score_cache.clear()
            values = compute(np.arange(n))
            self._score_cache[key] = _ClassScores(epoch, values)
            return values
        values = entry.values
        values[rows] = compute(rows)
        entry.epoch = epoch
        return values

    def _best(self, task: TaskInfo, cand: np.ndarray, epoch: int | None = None) -> int:
        scores = self._scores(task, cand, epoch)
        if self.sampler is not None:
            return self.sampler.pick(cand, scores)
        return int(cand[int(np.argmax(scores))])

    def _scores(self, task: TaskInfo, cand: np.ndarray, epoch: int | None = None) -> np.ndarray:
        key, apart = self._class_key(task)
        if key is None:
            scores = self.node_scores(task, cand)
        else:
            if epoch is None:
                epoch = self._changed_rows()
            full = self._class_array(("score", key), epoch, lambda rows: self.node_scores(task, rows, apart))
            scores = full[cand]
            if apart:
                others = tuple(n for n in self.plugins.score_keys if n not in apart)
                scores = scores + self.node_scores(task, cand, others)
        return scores

    def _resource_fit(self, req: np.ndarray, nz: np.ndarray, epoch: int) -> np.ndarray:
        """Per node: idle (allocatable - used) covers ``req`` in every requested column."""
        alloc = self.nodes.allocatable
        used = self.nodes.used
        want = req[nz]
        cols: list[tuple[int, float]] | None = None

        def compute(rows: np.ndarray) -> np.ndarray:
            nonlocal cols
            if len(rows) == 1:
                # The one node a placement changed: the same IEEE operations on Python floats.
                if cols is None:
                    cols = list(zip(nz.tolist(), want.tolist()))
                i = int(rows[0])
                a, u = alloc[i].tolist(), used[i].tolist()
                return np.array([all(a[c] - u[c] + EPS >= w for c, w in cols)])
            idle = alloc[rows][:, nz] - used[rows][:, nz]
            fit: np.ndarray = np.all(idle + EPS >= want, axis=1)
            return fit

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
        for tier in self.plugins.tiered("Predicate"):
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

    def plan_run(self, task: TaskInfo, count: int) -> RunPlan | None:
        """The nodes :meth:`select_node` would give ``count`` tasks of ``task``'s class one after
        the other, each allocated (on idle resources) where it was placed before the next is
        chosen — worked out at once instead of rescoring after every placement.

        Only the best ``count`` candidates (by score, then index) can be chosen: a node that got
        no task keeps its score, and while fewer than ``count`` tasks are placed one of those is
        untouched and beats every other candidate. Their scores and fit with 1, 2, ... more tasks
        are computed with the node's usage raised exactly as an allocation raises it (the rows
        are set for the call and put back). None when the shortcut does not apply (a node-order
        callback that cannot be cached, no requests, no node that fits idle, NaN scores).
        """
        n = len(self.nodes)
        if n == 0 or count < 2 or self.sampler is not None:
            return None  # (a sample is drawn for each task)
        key, apart = self._class_key(task)
        if key is None or apart:
            return None
        req = task.resreq
        nz = np.nonzero(req > 0)[0]
        if not len(nz):
            return None
        mask = self.predicate_mask(task)
        epoch = self._changed_rows()
        cand = np.flatnonzero(mask & self._resource_fit(req, nz, epoch))
        if not len(cand):
            return None
        full = self._class_array(("score", key), epoch, lambda rows: self.node_scores(task, rows, apart))
        s0 = full[cand]
        if np.isnan(s0).any():
            return None
        m = min(count, len(cand))
        top = cand[np.lexsort((cand, -s0))[:m]]
        nodes = top.tolist()
        score = s0[np.searchsorted(cand, top)].tolist()
        fits = [True] * m
        used = self.nodes.used
        alloc = self.nodes.allocatable
        cols = list(zip(nz.tolist(), req[nz].tolist()))
        saved: dict[int, np.ndarray] = {}
        plan: list[int] = []
        try:
            for step in range(count):
                best = -1
                for r in range(m):
                    if fits[r] and (
                        best < 0 or score[r] > score[best] or (score[r] == score[best] and nodes[r] < nodes[best])
                    ):
                        best = r
                if best < 0:
                    break  # no node fits idle any more: select_node decides the rest (pipelining)
                i = nodes[best]
                plan.append(i)
                if step == count - 1:
                    break
                # The node with one more task, as an allocation leaves it: its fit and score.
                if i not in saved:
                    saved[i] = used[i].copy()
                used[i] += req
                a, u = alloc[i].tolist(), used[i].tolist()
                fits[best] = all(a[c] - u[c] + EPS >= w for c, w in cols)
                sc = float(self.node_scores(task, np.array([i]), apart)[0])
                if sc != sc:
                    return None
                score[best] = sc
        finally:
            for i, row in saved.items():
                used[i] = row
        return RunPlan(key=key, mask=mask, nodes=plan)

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
        if self.sampler is not None:
            return self._select_sampled(task, mask, fit, nz, future, epoch)
        cand = np.flatnonzero(fit)
        if len(cand):
            return self._best(task, cand, epoch), True
        if not future:
            return -1, False
        if len(nz):
            fidle = (alloc - used + self.nodes.releasing[:n] - self.nodes.pipelined[:n])[:, nz]
            fit = mask & np.all(fidle + EPS >= req[nz], axis=1)
        else:
            fit = mask
        cand = np.flatnonzero(fit)
        if len(cand):
            return self._best(task, cand), False
        return -1, False

    def _select_sampled(
        self, task: TaskInfo, mask: np.ndarray, idle_fit: np.ndarray, nz: np.ndarray, future: bool, epoch: int
    ) -> tuple[int, bool]:
        """Volcano's allocate: the feasible nodes (the task fits what will be free once releasing
        resources are gone, or what is free now when ``future`` is off) are sampled; of the
        sample, the nodes the task fits now are scored first, the others only when there is
        none."""
        sampler = self.sampler
        assert sampler is not None
        n = len(self.nodes)
        if future and len(nz):
            nodes = self.nodes
            fidle = (nodes.allocatable[:n] - nodes.used[:n] + nodes.releasing[:n] - nodes.pipelined[:n])[:, nz]
            feasible = mask & np.all(fidle + EPS >= task.resreq[nz], axis=1)
        else:
            feasible = idle_fit
        sample = sampler.sample(np.flatnonzero(feasible), n)
        if not len(sample):
            return -1, False
        now = sample[idle_fit[sample]]
        if len(now):
            return self._best(task, now, epoch), True
        if not future:
            return -1, False
        return self._best(task, sample), False
