"""priority: order jobs and tasks by PriorityClass value; only lower priority is preemptable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo, TaskInfo


@register_plugin
class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        def task_order(l: TaskInfo, r: TaskInfo) -> int:
            if l.priority == r.priority:
                return 0
            return -1 if l.priority > r.priority else 1

        def job_order(l: JobInfo, r: JobInfo) -> int:
            if l.priority == r.priority:
                return 0
            return -1 if l.priority > r.priority else 1

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            pjob = ssn.jobs.get(preemptor.job)
            victims = []
            for t in preemptees:
                if t.job != preemptor.job:
                    vjob = ssn.jobs.get(t.job)
                    if pjob is not None and vjob is not None and vjob.priority < pjob.priority:
                        victims.append(t)
                elif t.priority < preemptor.priority:
                    victims.append(t)
            return victims, PERMIT

        def job_starving(job: JobInfo) -> bool:
            return job.ready_num + job.waiting_num < len(job.tasks)

        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_job_starving_fn(self.name, job_starving)
