"""priority: order jobs and tasks by PriorityClass value; only lower priority is preemptable."""

from __future__ import annotations

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT


@register_plugin
class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn) -> None:
        def task_order(l, r) -> int:
            if l.priority == r.priority:
                return 0
            return -1 if l.priority > r.priority else 1

        def job_order(l, r) -> int:
            if l.priority == r.priority:
                return 0
            return -1 if l.priority > r.priority else 1

        def preemptable(preemptor, preemptees):
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

        def job_starving(job) -> bool:
            return job.ready_num + job.waiting_num < len(job.tasks)

        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_job_starving_fn(self.name, job_starving)
