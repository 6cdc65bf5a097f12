"""drf: dominant resource fairness — jobs with the smaller dominant share go first.

With ``enableHierarchy: true`` (Volcano's HDRF) the plugin also orders queues and
chooses reclaim victims by hierarchical dominant share. The tree is
root → queue path segments → jobs; a queue's path and per-level weights come
from its annotations ``volcano.sh/hierarchy`` ("root/sci/dev") and
``volcano.sh/hierarchy-weights`` ("1/2/8"), or, when those are absent, from its
``spec.parent`` chain and ``spec.weight`` (as Volcano's effective hierarchy does).

A leaf (job) is *saturated* when it holds all it asked for in some resource, or
when it asks for a resource the cluster has fully handed out. An inner node
rescales each non-empty, unsaturated child to the smallest unsaturated dominant
share among its siblings (saturated children count as they are), sums them and
takes the dominant share of the sum; it is saturated when all its children are.
Queues compare level by level from the root: an unsaturated subtree goes before
a saturated one, otherwise the smaller share/weight goes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..framework.memo import MISS, CacheRecord, JobRecord, JobsRecord, Reuse
from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT
from ..framework.session_plugins import enabled_names

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..cache import SchedulerCache
    from ..framework.memo import Kept
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo, TaskInfo

SHARE_DELTA = 1e-6


@dataclass(slots=True)
class DrfJobs:
    """The jobs' read-only allocation vectors and their shares as a session opened them (lazily:
    without HDRF or namespace order), by job uid in job order."""

    allocated: dict[str, np.ndarray]
    shares: dict[str, float]


# A job's dominant share, under (its tasks_version, the total's key).
DRF_SHARE: JobRecord[float] = JobRecord("drf_share")
# All the jobs' DrfJobs, under the jobs' token and (the total's key, width).
DRF_JOBS: JobsRecord[DrfJobs] = JobsRecord("drf.jobs")
# The cluster's total as shares divide by it (its bytes), as one object while it stays the same.
DRF_TOTAL: CacheRecord[bytes] = CacheRecord("drf.total")

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
_POD_COLUMN = 2  # pods are never a dominant (nor a saturating) resource


class HNode:
    """A node of the HDRF tree: inner nodes have ``children``; job leaves have ``children is None``."""

    __slots__ = ("name", "weight", "allocated", "share", "saturated", "request", "children")

    def __init__(
        self,
        name: str,
        weight: float,
        width: int,
        children: dict[str, HNode] | None = None,
        allocated: np.ndarray | None = None,
        share: float = 0.0,
        request: np.ndarray | None = None,
    ) -> None:
        self.name = name
        self.weight = weight
        self.allocated = np.zeros(width) if allocated is None else allocated
        self.share = share
        self.saturated = False
        self.request = np.zeros(width) if request is None else request
        self.children = children

    def clone(self) -> HNode:
        children: dict[str, HNode] | None = None if self.children is None else {}
        node = HNode(
            self.name, self.weight, len(self.allocated), children, self.allocated.copy(), self.share, self.request
        )
        node.saturated = self.saturated
        if self.children is not None and children is not None:
            for key, child in self.children.items():
                children[key] = child.clone()
        return node


def parse_weight(text: str | float) -> float:
    try:
        w = float(text)
    except (TypeError, ValueError):
        w = 0.0
    return w if w >= 1 else 1.0  # Volcano: weights below 1 count as 1


def queue_paths(queues: dict[str, QueueInfo]) -> dict[str, tuple[list[str], list[float]]]:
    """Per queue name: (path segments from "root", weight per segment).

    Annotations win when both are set; otherwise the path follows spec.parent up
    to root, each level weighted by that queue's spec.weight. A parent cycle or a
    missing parent ends the walk at root.
    """
    out: dict[str, tuple[list[str], list[float]]] = {}

    def build(name: str, seen: set[str]) -> tuple[list[str], list[float]]:
        if name in out:
            return out[name]
        q = queues.get(name)
        ann = (q.queue.metadata.annotations if q is not None and q.queue is not None else {}) or {}
        hier, weights = ann.get(HIERARCHY_ANNOTATION, ""), ann.get(HIERARCHY_WEIGHTS_ANNOTATION, "")
        if hier and weights:
            paths = hier.split("/")
            ws = weights.split("/")
            res = (paths, [parse_weight(ws[i]) if i < len(ws) else 1.0 for i in range(len(paths))])
        elif name == "root" or q is None or name in seen:
            res = (["root"], [1.0])
        else:
            parent = q.parent or "root"
            if parent not in queues and parent != "root":
                parent = "root"
            ppaths, pweights = build(parent, seen | {name})
            res = (ppaths + [name], pweights + [parse_weight(q.weight)])
        out[name] = res
        return res

    for name in queues:
        build(name, set())
    return out


@register_plugin
class DRFPlugin(Plugin):
    name = "drf"

    @classmethod
    def prepare_jobs(cls, jobs: Sequence[JobInfo], width: int, total: np.ndarray, cache: SchedulerCache) -> None:
        total = _share_total(total)
        tkey, t = _total_key(cache, total), total.tolist()
        for job in jobs:
            key = (job.tasks_version, tkey)
            kept: Kept[float] | None = job.memo.get(DRF_SHARE.name)
            if kept is None or kept.key != key:
                DRF_SHARE.put(job, key, _dominant_share(job.allocated_view(width).tolist(), t))

    def on_session_open(self, ssn: Session) -> None:
        width = len(ssn.index)
        self.total = total = _share_total(ssn.total)
        self.allocated: dict[str, np.ndarray] = {}
        self._shares: dict[str, float] = {}
        self._stale: set[str] = set()
        # A job's share only changes with its tasks or the cluster's total: kept under the job's
        # tasks_version (not its version, which PodGroup status writes move too) and the total
        # (the same bytes object while the total stays the same).
        tkey = _total_key(ssn.cache, total)
        # Without HDRF (whose tree leaves share these arrays) and namespace order, a job's
        # allocation is the job's own read-only vector, copied only when a task of it is allocated
        # or released this session, and its share is worked out again only when next read.
        self.hierarchy = hierarchy = _hierarchy_enabled(ssn, self.name)
        namespaced = _switch(ssn, self.name, "NamespaceOrder")
        lazy = not hierarchy and not namespaced
        # Lazily, the jobs' read-only vectors and their shares are those of the last session while
        # its jobs stand (ssn.jobs_token) and the total is the same: copies of its dicts as they
        # were at its opening, no job visited.
        # Under the last session's token, only the jobs that changed since are looked at again.
        found = DRF_JOBS.lookup(ssn, (tkey, width)) if lazy else None
        seen = None if found is None else found.value
        if found is not None and found.how is Reuse.SAME:
            assert seen is not None
            self.allocated = dict(seen.allocated)
            self._shares = dict(seen.shares)
        else:
            jobs: Iterable[tuple[str, JobInfo]] = ssn.jobs.items()
            if found is not None and found.how is Reuse.SINCE:
                assert seen is not None
                self.allocated = dict(seen.allocated)  # the same jobs in the same order: the same keys
                self._shares = dict(seen.shares)
                jobs = [(uid, ssn.jobs[uid]) for uid in found.changed]
            for uid, job in jobs:
                alloc = job.allocated_view(width) if lazy else job.allocated_vector(width)
                self.allocated[uid] = alloc
                key = (job.tasks_version, tkey)
                kept: Kept[float] | None = job.memo.get(DRF_SHARE.name)
                if kept is not None and kept.key == key:
                    self._shares[uid] = kept.value
                else:
                    self._shares[uid] = DRF_SHARE.put(job, key, self._share(alloc))
            if lazy:
                DRF_JOBS.put(ssn, DrfJobs(dict(self.allocated), dict(self._shares)), (tkey, width))

        stale = self._stale
        shares = self._shares

        def job_order(l: JobInfo, r: JobInfo) -> int:
            if stale:
                self._refresh()
            ls, rs = shares.get(l.uid, 0.0), shares.get(r.uid, 0.0)
            if abs(ls - rs) <= SHARE_DELTA:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            palloc = self.allocated.get(preemptor.job, np.zeros(width)) + preemptor.resreq
            pshare = self._share(palloc)
            victims = []
            for t in preemptees:
                valloc = self.allocated.get(t.job, np.zeros(width)) - t.resreq
                if pshare < self._share(valloc) - SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        # A job's allocation is copied on its first change when it is the job's read-only vector;
        # its share is worked out again when next read (``share``, job order), which HDRF's and
        # namespace order's handlers, running after these, do through ``share``.
        def on_allocate(task: TaskInfo) -> None:
            a = self.allocated.get(task.job)
            if a is not None:
                if not a.flags.writeable:
                    a = self.allocated[task.job] = a.copy()
                a += task.resreq
                stale.add(task.job)

        def on_deallocate(task: TaskInfo) -> None:
            a = self.allocated.get(task.job)
            if a is not None:
                if not a.flags.writeable:
                    a = self.allocated[task.job] = a.copy()
                a -= task.resreq
                stale.add(task.job)

        handlers: tuple[Callable[[TaskInfo], None], Callable[[TaskInfo], None]] = (on_allocate, on_deallocate)
        if namespaced:
            handlers = namespace_order(ssn, self, on_allocate, on_deallocate)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_event_handler(*handlers)

        if hierarchy:
            self._open_hierarchy(ssn)

    @property
    def share(self) -> dict[str, float]:
        """Each job's dominant share (job uid -> share), as of now."""
        if self._stale:
            self._refresh()
        return self._shares

    def _refresh(self) -> None:
        # Jobs whose allocation changed since their share was last worked out: the share is a
        # function of the allocation alone, so it is worked out when next read (job order), not
        # at every task allocated or released (the same value, from the same vector).
        for uid in self._stale:
            self._shares[uid] = self._share(self.allocated[uid])
        self._stale.clear()

    # ------------------------------------------------------------------ HDRF
    def _open_hierarchy(self, ssn: Session) -> None:
        width = len(ssn.index)
        self.width = width
        self.paths = queue_paths(ssn.queues)
        self.root = HNode("root", 1.0, width, children={})
        self.total_allocated = np.zeros(width)
        self.requests: dict[str, np.ndarray] = {}
        for uid, job in ssn.jobs.items():
            req = np.zeros(width)
            for t in job.tasks.values():
                req[: len(t.resreq)] += t.resreq
            self.requests[uid] = req
            self.total_allocated += self.allocated[uid]
            self._place_leaf(self.root, job, self.allocated[uid], self.share[uid])
        self._update_tree(self.root, self.total_allocated)

        def queue_order(l: QueueInfo, r: QueueInfo) -> int:
            ret = self.compare_queues(self.root, l, r)
            return -1 if ret < 0 else (1 if ret > 0 else 0)

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            ljob = ssn.jobs.get(reclaimer.job)
            if ljob is None or ljob.queue not in ssn.queues or reclaimer.job not in self.allocated:
                return [], PERMIT
            lqueue = ssn.queues[ljob.queue]
            root = self.root.clone()
            total = self.total_allocated + reclaimer.resreq
            lalloc = self.allocated[ljob.uid] + reclaimer.resreq
            self._place_leaf(root, ljob, lalloc, self._share(lalloc))
            self._update_tree(root, total)
            victims = []
            for t in reclaimees:
                rjob = ssn.jobs.get(t.job)
                if rjob is None or rjob.queue not in ssn.queues or t.job not in self.allocated:
                    continue
                rqueue = ssn.queues[rjob.queue]
                # Each candidate is judged alone: take it away, compare, put it back.
                ralloc = self.allocated[rjob.uid] - t.resreq
                self._place_leaf(root, rjob, ralloc, self._share(ralloc))
                self._update_tree(root, total - t.resreq)
                ret = self.compare_queues(root, lqueue, rqueue)
                ralloc = self.allocated[rjob.uid]
                self._place_leaf(root, rjob, ralloc.copy(), self._share(ralloc))
                self._update_tree(root, total)
                if ret < 0:
                    victims.append(t)
            return victims, PERMIT

        def on_change(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            if job is None or job.queue not in ssn.queues or task.job not in self.allocated:
                return
            self._place_leaf(self.root, job, self.allocated[task.job], self.share[task.job])
            self._update_tree(self.root, self.total_allocated)

        def on_allocate_h(task: TaskInfo) -> None:
            if task.job in self.allocated:
                self.total_allocated += task.resreq
            on_change(task)

        def on_deallocate_h(task: TaskInfo) -> None:
            if task.job in self.allocated:
                self.total_allocated -= task.resreq
            on_change(task)

        ssn.add_queue_order_fn(self.name, queue_order)
        ssn.add_reclaimable_fn(self.name, reclaimable)
        # Registered after the job-share handler, so the job's allocation is already updated.
        ssn.add_event_handler(on_allocate_h, on_deallocate_h)

    def _place_leaf(self, root: HNode, job: JobInfo, allocated: np.ndarray, share: float) -> None:
        """Create the job's path if needed and (re)attach its leaf with this allocation."""
        paths, weights = self.paths.get(job.queue, (["root"], [1.0]))
        node = root
        for i in range(1, len(paths)):
            assert node.children is not None  # inner nodes have children
            child = node.children.get(paths[i])
            if child is None or child.children is None:
                child = node.children[paths[i]] = HNode(paths[i], weights[i], self.width, children={})
            node = child
        assert node.children is not None
        leaf = node.children.get(job.uid)
        if leaf is None or leaf.children is not None:
            leaf = node.children[job.uid] = HNode(job.uid, 1.0, self.width)
        leaf.request = self.requests.get(job.uid, leaf.request)
        leaf.allocated = allocated
        leaf.share = share

    def _update_tree(self, root: HNode, total_allocated: np.ndarray) -> None:
        # Resources the cluster still has some of; asking for one that is used up saturates a job.
        total = self.total.tolist()
        used = total_allocated.tolist()
        demanding = [i for i in range(min(len(total), len(used))) if i != _POD_COLUMN and used[i] < total[i]]
        self._update_node(root, set(demanding))

    def _update_node(self, node: HNode, demanding: set[int]) -> None:
        if node.children is None:
            node.saturated = _saturated(node.allocated, node.request, demanding)
            return
        mdr = 1.0
        for child in node.children.values():
            self._update_node(child, demanding)
            if child.share != 0 and not child.saturated:
                s = self._share(child.allocated)
                if s < mdr:
                    mdr = s
        alloc = np.zeros(self.width)
        saturated = True
        for child in node.children.values():
            if not child.saturated:
                saturated = False
            if child.share != 0:
                alloc += child.allocated if child.saturated else child.allocated * (mdr / child.share)
        node.allocated = alloc
        node.share = self._share(alloc)
        node.saturated = saturated

    def compare_queues(self, root: HNode, lqueue: QueueInfo, rqueue: QueueInfo) -> float:
        """< 0 when ``lqueue`` goes first: level by level, unsaturated before saturated, then share/weight."""
        lpaths, lweights = self.paths.get(lqueue.name, (["root"], [1.0]))
        rpaths, rweights = self.paths.get(rqueue.name, (["root"], [1.0]))
        lnode: HNode | None = root
        rnode: HNode | None = root
        depth = min(len(lpaths), len(rpaths))
        for i in range(depth):
            # A subtree without jobs is not in the tree: it counts as empty and demanding.
            lsat, rsat = lnode is not None and lnode.saturated, rnode is not None and rnode.saturated
            if not lsat and rsat:
                return -1.0
            if lsat and not rsat:
                return 1.0
            lv = (lnode.share / lnode.weight) if lnode is not None else 0.0
            rv = (rnode.share / rnode.weight) if rnode is not None else 0.0
            if lv != rv:
                return lv - rv
            if i < depth - 1:
                lnode = _child(lnode, lpaths[i + 1])
                rnode = _child(rnode, rpaths[i + 1])
        return 0.0

    def _share(self, alloc: np.ndarray) -> float:
        return _dominant_share(alloc.tolist(), self.total.tolist())


def _share_total(total: np.ndarray) -> np.ndarray:
    """The cluster's total as shares divide by it: a resource nobody has counts as infinite."""
    out = total.copy()
    out[out <= 0] = np.inf
    return out


def _total_key(cache: SchedulerCache, total: np.ndarray) -> bytes:
    """The bytes of ``total`` (from :func:`_share_total`), as the same object while the total
    stays the same: what is kept under it is recognised by identity."""
    tkey = total.tobytes()
    kept = DRF_TOTAL.get(cache, tkey)
    if kept is not MISS:
        return kept
    return DRF_TOTAL.put(cache, tkey, tkey)


def _dominant_share(a: list[float], t: list[float]) -> float:
    """The largest of a[i] / t[i], pods left out (they are not a dominant resource). Scalar
    arithmetic: the same IEEE divisions as the vector form (a few columns are cheaper in Python
    than in numpy)."""
    best = 0.0
    for i in range(min(len(a), len(t))):
        if i == _POD_COLUMN:
            continue
        v: float = a[i] / t[i]
        if v != v:  # NaN propagates, as np.max does
            return v
        if v > best:
            best = v
    return best


def _hierarchy_enabled(ssn: Session, name: str) -> bool:
    """Volcano reads the switch of the first drf entry in the tiers."""
    for tier in ssn.tiers:
        for opt in tier.plugins:
            if opt.name == name:
                return opt.enabled("Hierarchy")
    return False


def _child(node: HNode | None, key: str) -> HNode | None:
    if node is None or node.children is None:
        return None
    child = node.children.get(key)
    return child if child is not None and child.children is not None else None


def _saturated(allocated: np.ndarray, request: np.ndarray, demanding: set[int]) -> bool:
    """A job holds all it asked for in some resource, or asks for one the cluster has used up."""
    a = allocated.tolist()
    r = request.tolist()
    for i in range(min(len(a), len(r))):
        if i == _POD_COLUMN or a[i] == 0:
            continue
        if r[i] != 0 and a[i] >= r[i]:
            return True
        if i not in demanding and r[i] != 0:
            return True
    return False


def _switch(ssn: Session, name: str, point: str) -> bool:
    return any(name in names for names in enabled_names(ssn.tiers, point))


NAMESPACE_WEIGHT_KEY = "volcano.sh/namespace.weight"


def namespace_order(
    ssn: Session, drf: DRFPlugin, on_allocate: Callable[[TaskInfo], None], on_deallocate: Callable[[TaskInfo], None]
) -> tuple[Callable[[TaskInfo], None], Callable[[TaskInfo], None]]:
    """enableNamespaceOrder: inside a queue, the namespace with the smaller weighted dominant share goes first.

    A namespace's weight is the largest ``volcano.sh/namespace.weight`` in ``spec.hard`` of its
    ResourceQuotas (default 1), as in Volcano before 1.8. A namespace's allocation counts each
    admitted job as the larger of its allocation and its minResources, so that admission
    (enqueue) shares a queue between namespaces too.
    """
    weights: dict[str, float] = {}
    for rq in ssn.cache.objects.get("ResourceQuota", {}).values():
        w = rq.spec.hard.get(NAMESPACE_WEIGHT_KEY)
        if w is not None and float(w) > 0:
            weights[rq.namespace] = max(weights.get(rq.namespace, 0.0), float(w))
    width = len(ssn.index)
    part: dict[str, np.ndarray] = {}  # job uid -> what it counts in its namespace
    ns_alloc: dict[str, np.ndarray] = {}
    ns_share: dict[str, float] = {}

    def contribution(job: JobInfo, admitted: bool = False) -> np.ndarray:
        alloc = drf.allocated.get(job.uid)
        alloc = np.zeros(width) if alloc is None else alloc
        if job.min_resources is not None and (admitted or not job.is_pending()):
            counted: np.ndarray = np.maximum(alloc, job.min_resources[:width])
            return counted
        return alloc.copy()

    def refresh(job: JobInfo, admitted: bool = False) -> None:
        new = contribution(job, admitted)
        old = part.get(job.uid)
        a = ns_alloc.setdefault(job.namespace, np.zeros(width))
        a += new if old is None else new - old
        part[job.uid] = new
        ns_share[job.namespace] = drf._share(a) / weights.get(job.namespace, 1.0)

    for job in ssn.jobs.values():
        refresh(job)

    def order(l: str, r: str) -> int:
        ls, rs = ns_share.get(l, 0.0), ns_share.get(r, 0.0)
        if abs(ls - rs) <= SHARE_DELTA:
            return 0
        return -1 if ls < rs else 1

    def allocated(task: TaskInfo) -> None:
        on_allocate(task)
        if task.job in ssn.jobs:
            refresh(ssn.jobs[task.job])

    def deallocated(task: TaskInfo) -> None:
        on_deallocate(task)
        if task.job in ssn.jobs:
            refresh(ssn.jobs[task.job])

    ssn.add_job_enqueued_fn(drf.name, lambda job: refresh(job, True))
    ssn.add_namespace_order_fn(drf.name, order)
    return allocated, deallocated
