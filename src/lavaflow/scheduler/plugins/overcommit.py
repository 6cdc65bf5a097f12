"""overcommit: admit a PodGroup only while admitted minResources fit in total × factor − used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..framework import arguments as A
from ..framework.memo import JobsRecord, Reuse
from ..framework.registry import Plugin, register_plugin
from ..framework.session import ABSTAIN, PERMIT, REJECT
from ..resources import EPS, amounts, describe, short_in
from ._shares import admission_dims, preemptable_below, prepare_admission_vectors, reserved_or_none

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..cache import SchedulerCache
    from ..framework.session import Session
    from ..model import JobInfo


@dataclass(slots=True)
class Admitted:
    """The admitted-but-unallocated total as a session opened it, and what it was summed from."""

    ident: tuple[int, tuple[int, ...]]  # (width, the ids of the summed vectors in order)
    lefts: list[np.ndarray]  # the summed vectors, held so that their ids stay theirs
    total: np.ndarray
    per_job: list[np.ndarray | None]  # each job's reserved vector or None, in job order
    at: dict[str, int]  # job uid -> its place in per_job


# The Admitted total, under the jobs' token and the width.
ADMITTED: JobsRecord[Admitted] = JobsRecord("overcommit.inqueue")


@register_plugin
class OvercommitPlugin(Plugin):
    name = "overcommit"
    ARGUMENTS = {"overcommit-factor": A.NUMBER}

    @classmethod
    def prepare_jobs(cls, jobs: Sequence[JobInfo], width: int, total: np.ndarray, cache: SchedulerCache) -> None:
        prepare_admission_vectors(jobs, width)  # reserved_or_none's, kept under each job's version

    def on_session_open(self, ssn: Session) -> None:
        factor = self.arg_float("overcommit-factor", 1.2)
        if factor < 1.0:
            factor = 1.2
        width = len(ssn.index)
        used = ssn.nodes.view("used").sum(axis=0) if len(ssn.nodes) else np.zeros(width)
        # The admitted-but-unallocated resources, summed in job order; the reserved vectors are
        # kept under each job's version, so the same vectors (the same objects, held here so
        # that their ids stay theirs) in the same order give the same sum as last session.
        # With the jobs as the last session saw them (ssn.jobs_token), the same vectors: no job visited.
        # Under the last session's token, only the jobs that changed since are looked at again.
        found = ADMITTED.lookup(ssn, width)
        kept = found.value
        if found.how is Reuse.SAME:
            assert kept is not None
            self.inqueue = kept.total.copy()
        else:
            if found.how is Reuse.SINCE:
                assert kept is not None
                per_job = list(kept.per_job)
                at = kept.at
                jobs = ssn.jobs
                for uid in found.changed:
                    per_job[at[uid]] = reserved_or_none(jobs[uid], width)
            else:
                per_job = [reserved_or_none(job, width) for job in ssn.jobs.values()]
                at = {uid: i for i, uid in enumerate(ssn.jobs)}
            lefts = [left for left in per_job if left is not None]
            ident = (width, tuple(map(id, lefts)))
            last = ADMITTED.last(ssn)
            if last is not None and last.ident == ident:
                self.inqueue = last.total.copy()
            else:
                self.inqueue = np.zeros(width)
                for left in lefts:
                    self.inqueue += left
            ADMITTED.put(ssn, Admitted(ident, lefts, self.inqueue.copy(), per_job, at), width)
        limit = ssn.total * factor - used
        messages: dict[tuple[bytes, bytes], str] = {}  # many waiting jobs ask for the same amounts

        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return ABSTAIN
            req = job.min_resources
            dims = admission_dims(req)
            if np.all(self.inqueue[dims] + req[dims] <= limit[dims] + EPS):
                return PERMIT
            if ssn.within_deserved(job) or np.all(
                (self.inqueue + req - preemptable_below(ssn, job, width))[dims] <= limit[dims] + EPS
            ):
                # The cluster is full, but the job's queue is below its deserved share (reclaim can
                # take back what it deserves) or lower-priority work can be preempted for it:
                # leave the decision to the queue plugins.
                return ABSTAIN
            free = np.where(dims, np.maximum(limit - self.inqueue, 0.0), 0.0)
            key = (req.tobytes(), free.tobytes())
            msg = messages.get(key)
            if msg is None:
                short = short_in(ssn.index, self.inqueue + req, limit, dims)
                msg = messages[key] = (
                    f"minResources ({describe(ssn.index, req)}) exceed what the cluster can admit in {short} "
                    f"(overcommit factor {factor:g}: {amounts(ssn.index, free, short)} left)"
                )
            job.job_fit_errors = msg
            return REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                self.inqueue += job.min_resources

        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)
