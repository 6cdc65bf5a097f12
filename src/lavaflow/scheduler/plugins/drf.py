"""drf: dominant resource fairness — jobs with the smaller dominant share go first."""

from __future__ import annotations

import numpy as np

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT

SHARE_DELTA = 1e-6


@register_plugin
class DRFPlugin(Plugin):
    name = "drf"

    def on_session_open(self, ssn) -> None:
        width = len(ssn.index)
        total = ssn.total.copy()
        total[total <= 0] = np.inf
        self.total = total
        self.allocated: dict[str, np.ndarray] = {}
        self.share: dict[str, float] = {}
        for uid, job in ssn.jobs.items():
            alloc = job.allocated_vector(width)
            self.allocated[uid] = alloc
            self.share[uid] = self._share(alloc)

        def job_order(l, r) -> int:
            ls, rs = self.share.get(l.uid, 0.0), self.share.get(r.uid, 0.0)
            if abs(ls - rs) <= SHARE_DELTA:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor, preemptees):
            palloc = self.allocated.get(preemptor.job, np.zeros(width)) + preemptor.resreq
            pshare = self._share(palloc)
            victims = []
            for t in preemptees:
                valloc = self.allocated.get(t.job, np.zeros(width)) - t.resreq
                if pshare < self._share(valloc) - SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        def on_allocate(task) -> None:
            a = self.allocated.get(task.job)
            if a is not None:
                a += task.resreq
                self.share[task.job] = self._share(a)

        def on_deallocate(task) -> None:
            a = self.allocated.get(task.job)
            if a is not None:
                a -= task.resreq
                self.share[task.job] = self._share(a)

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_event_handler(on_allocate, on_deallocate)

    def _share(self, alloc: np.ndarray) -> float:
        # pods are not a dominant resource. Scalar arithmetic: the same IEEE divisions
        # as the vector form (a few columns are cheaper in Python than in numpy).
        a = alloc.tolist()
        t = self.total.tolist()
        best = 0.0
        for i in range(min(len(a), len(t))):
            if i == 2:
                continue
            v = a[i] / t[i]
            if v != v:  # NaN propagates, as np.max does
                return v
            if v > best:
                best = v
        return best
