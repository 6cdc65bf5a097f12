"""backfill: place best-effort tasks (no resource requests) of admitted jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.registry import Action, register_action
from ..model import TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session


@register_action
class BackfillAction(Action):
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        # Only jobs with pending best-effort tasks have anything to backfill (checked before the
        # ordering, which costs a plugin comparison per pair).
        jobs = [j for j in ssn.jobs.values() if j.pending_best_effort_num() and not j.is_pending()]
        for job in sorted(jobs, key=ssn.job_key):
            if not ssn.job_valid(job)[0]:
                continue  # e.g. a job the elastic policy sizes
            tasks = [t for t in job.tasks.values() if t.status == TaskStatus.PENDING and t.best_effort]
            for task in sorted(tasks, key=ssn.task_key):
                node, fits = ssn.select_node(task, future=False)
                if node < 0:
                    job.fit_errors[task.uid] = ssn.fit_error(task, use_future=False)
                    continue
                ssn.allocate(task, node)
