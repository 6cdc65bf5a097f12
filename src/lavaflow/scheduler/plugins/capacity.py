"""capacity: queues with explicit shares.

Each queue's ``spec.deserved`` is its fair share, ``spec.capability`` a hard
limit and ``spec.guarantee`` reserved for it. Allocation and admission are
checked against the queue and every ancestor (hierarchical queues through
``spec.parent``); with ``enableHierarchy`` only leaf queues take jobs. A queue
below its deserved share in a resource it asks for may reclaim from queues above
theirs, but never below a victim queue's guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT, REJECT
from ..model import ALLOCATED
from ..resources import EPS, PODS, describe, short_in
from ._shares import elastic_of, reserved_by_admission, share_queue_order, within_deserved_fn

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, QueueInfo, TaskInfo


@dataclass
class CapAttr:
    name: str
    parent: str
    deserved: np.ndarray
    capability: np.ndarray
    guarantee: np.ndarray
    real_capability: np.ndarray
    allocated: np.ndarray
    inqueue: np.ndarray
    elastic: np.ndarray
    share: float = 0.0


def _deserved(given: np.ndarray | None, real: np.ndarray) -> np.ndarray:
    """A queue's deserved resources: as given, unset ones defaulting to its real capability (no
    fair-share limit), none above it."""
    deserved = given.copy() if given is not None else np.full(len(real), np.nan)
    out: np.ndarray = np.minimum(np.where(np.isnan(deserved), real, deserved), real)
    return out


def _dims(req: np.ndarray) -> np.ndarray:
    dims = req > 0
    if len(dims) > PODS:
        dims[PODS] = False
    return dims


@register_plugin
class CapacityPlugin(Plugin):
    name = "capacity"

    def on_session_open(self, ssn: Session) -> None:
        width = len(ssn.index)
        total = ssn.total.copy()
        hierarchy = any(opt.name == self.name and opt.enabled("Hierarchy") for t in ssn.tiers for opt in t.plugins)
        guarantee_sum = np.zeros(width)
        for q in ssn.queues.values():
            if q.guarantee is not None and q.parent in ("root", ""):
                guarantee_sum += q.guarantee
        self.attrs: dict[str, CapAttr] = {}
        q_deserved: dict[str, np.ndarray | None] = {}  # as given (None: unset)
        for q in ssn.queues.values():
            q_deserved[q.name] = q.deserved
            guarantee = q.guarantee.copy() if q.guarantee is not None else np.zeros(width)
            capability = q.capability.copy() if q.capability is not None else np.full(width, np.inf)
            real = np.minimum(capability, total - guarantee_sum + guarantee)
            deserved = _deserved(q.deserved, real)
            self.attrs[q.name] = CapAttr(
                name=q.name,
                parent=q.parent if q.name != "root" else "",
                deserved=deserved,
                capability=capability,
                guarantee=guarantee,
                real_capability=real,
                allocated=np.zeros(width),
                inqueue=np.zeros(width),
                elastic=np.zeros(width),
            )
        self.children = {name for a in self.attrs.values() for name in [a.parent] if name}
        for job in ssn.jobs.values():
            for a in self._chain(job.queue):
                for t in job.tasks.values():
                    if t.status in ALLOCATED:
                        a.allocated += t.resreq
                a.inqueue += reserved_by_admission(job, width)
                a.elastic += elastic_of(job, width)
        if hierarchy:
            self._hierarchical_capabilities(q_deserved)
        for a in self.attrs.values():
            self._update_share(a)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            dims = _dims(task.resreq.copy())
            for a in self._chain(queue.name):
                if not np.all(a.allocated[dims] + task.resreq[dims] <= a.real_capability[dims] + EPS):
                    job = ssn.jobs.get(task.job)
                    if job is not None:
                        job.job_fit_errors = (
                            f"queue {a.name} is at its capability ({describe(ssn.index, a.real_capability)}; "
                            f"allocated {describe(ssn.index, a.allocated)})"
                        )
                    return False
            return True

        def enqueueable(job: JobInfo) -> int:
            q = ssn.queues.get(job.queue)
            if q is None:
                return REJECT
            if not q.is_open:
                job.job_fit_errors = f"queue {q.name} is {q.state.lower()}"
                return REJECT
            if hierarchy and q.name in self.children:
                job.job_fit_errors = f"queue {q.name} is not a leaf queue; jobs go to leaf queues only"
                return REJECT
            if job.min_resources is None:
                return PERMIT
            req = job.min_resources
            dims = _dims(req.copy())
            for a in self._chain(job.queue):
                need = req + a.allocated + a.inqueue - a.elastic
                if not np.all(need[dims] <= a.real_capability[dims] + EPS):
                    short = short_in(ssn.index, need, a.real_capability, dims)
                    job.job_fit_errors = (
                        f"queue {a.name} cannot admit minResources ({describe(ssn.index, req)}) within its capability in {short} "
                        f"({describe(ssn.index, a.real_capability)}; allocated {describe(ssn.index, a.allocated)}, "
                        f"admitted {describe(ssn.index, a.inqueue)})"
                    )
                    return REJECT
            return PERMIT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                for a in self._chain(job.queue):
                    a.inqueue += job.min_resources

        def preemptive(queue: QueueInfo, task: TaskInfo) -> bool:
            a = self.attrs.get(queue.name)
            if a is None:
                return False
            dims = _dims(task.resreq.copy())
            future = a.allocated + task.resreq
            if not np.all(future[dims] <= a.real_capability[dims] + EPS):
                return False
            return bool(np.any(future[dims] <= a.deserved[dims] + EPS))

        def reclaimable(reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            victims = []
            left: dict[str, np.ndarray] = {}
            for t in reclaimees:
                job = ssn.jobs.get(t.job)
                if job is None or job.queue not in self.attrs:
                    continue
                a = self.attrs[job.queue]
                alloc = left.setdefault(a.name, a.allocated.copy())
                dims = _dims(t.resreq.copy())
                over = np.any(alloc[dims] > a.deserved[dims] + EPS)
                keeps_guarantee = np.all(alloc - t.resreq + EPS >= np.minimum(a.guarantee, alloc))
                if over and keeps_guarantee:
                    alloc -= t.resreq
                    victims.append(t)
            return victims, PERMIT

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None:
                for a in self._chain(job.queue):
                    a.allocated += task.resreq
                    self._update_share(a)

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None:
                for a in self._chain(job.queue):
                    a.allocated -= task.resreq
                    self._update_share(a)

        ssn.add_queue_order_fn(self.name, share_queue_order(self.attrs))
        ssn.add_allocatable_fn(self.name, allocatable)
        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)
        ssn.add_preemptive_fn(self.name, preemptive)
        ssn.add_reclaimable_fn(self.name, reclaimable)
        ssn.add_event_handler(on_allocate, on_deallocate)
        ssn.add_within_deserved_fn(self.name, within_deserved_fn(self))

    def _hierarchical_capabilities(self, given_deserved: dict[str, np.ndarray | None]) -> None:
        """Volcano's capacity plugin with enableHierarchy works real capabilities out from the
        root down: the root's is its capability, infinite when unset (not the cluster's size, as
        without the hierarchy), and each child's is what its parent's leaves over its siblings'
        guarantees, plus its own guarantee, within its capability (checkHierarchicalQueue).
        Deserved shares follow (unset: the real capability)."""
        kids: dict[str, list[CapAttr]] = {}
        for a in self.attrs.values():
            if a.parent:
                kids.setdefault(a.parent, []).append(a)
        root = self.attrs.get("root")
        if root is None:
            return
        root.real_capability = root.capability.copy()
        todo, seen = [root], {"root"}
        while todo:
            parent = todo.pop()
            children = [c for c in kids.get(parent.name, []) if c.name not in seen]
            guarantees = sum((c.guarantee for c in children), np.zeros_like(parent.real_capability))
            left = np.maximum(parent.real_capability - guarantees, 0.0)
            for c in children:
                seen.add(c.name)
                c.real_capability = np.minimum(left + c.guarantee, c.capability)
                todo.append(c)
        for a in self.attrs.values():
            a.deserved = _deserved(given_deserved.get(a.name), a.real_capability)

    def _chain(self, name: str) -> list[CapAttr]:
        """The queue and its ancestors (root excluded unless asked for directly)."""
        out: list[CapAttr] = []
        seen = set()
        while name and name in self.attrs and name not in seen:
            seen.add(name)
            a = self.attrs[name]
            if name != "root" or not out:
                out.append(a)
            name = a.parent
        return out

    @staticmethod
    def _update_share(a: CapAttr) -> None:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(a.deserved > 0, a.allocated / a.deserved, np.where(a.allocated > 0, 1.0, 0.0))
        if len(r) > PODS:
            r[PODS] = 0.0
        a.share = float(np.nanmax(r)) if len(r) else 0.0
