"""enqueue: admit pending PodGroups (Pending -> Inqueue) while plugins say they fit.

Admission is what keeps a cluster from filling up with pods that can never run
together: a Volcano Job's pods are created only once its PodGroup is Inqueue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...api.volcano import PodGroupPhase
from ..framework.registry import Action, register_action
from ._queues import JobQueue, OrderedQueue, job_queue

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session

_INQUEUE = PodGroupPhase.INQUEUE.value  # (a plain str: see model.NOT_ADMITTED)


@register_action
class EnqueueAction(Action):
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        per_queue: dict[str, JobQueue] = {}
        for job in ssn.jobs.values():
            if not job.is_pending():
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if not queue.is_open:
                job.job_fit_errors = f"queue {queue.name} is {queue.state.lower()}; no new jobs are admitted"
                ssn.record(job, "enqueue", job.job_fit_errors)
                continue
            per_queue.setdefault(queue.name, job_queue(ssn)).push(job)
        queues = OrderedQueue(ssn.queue_key, (ssn.queues[name] for name in per_queue))
        while queues:
            queue = queues.pop()
            jobs = per_queue[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.sphase = _INQUEUE
                job.job_fit_errors = ""
                ssn.enqueued.add(job.uid)
                ssn.record(job, "enqueue", "admitted: PodGroup Pending -> Inqueue")
            else:
                ssn.record(job, "enqueue", job.job_fit_errors or "not admitted")
            queues.push(queue)
