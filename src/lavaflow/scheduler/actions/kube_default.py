"""kube-default: place pods one at a time like kube-scheduler, without gangs.

Every PodGroup is admitted at once and each pending pod is bound as soon as a
node fits it, in creation order. This is the baseline that deadlocks on the
Spark example: drivers take all the room their executors need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...api.volcano import PodGroupPhase
from ..framework.registry import Action, register_action
from ..model import TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import TaskInfo

_INQUEUE = PodGroupPhase.INQUEUE.value  # (a plain str: see model.NOT_ADMITTED)


@register_action
class KubeDefaultAction(Action):
    name = "kube-default"

    def execute(self, ssn: Session) -> None:
        pending: list[TaskInfo] = []
        for job in ssn.jobs.values():
            if job.is_pending():
                job.sphase = _INQUEUE
            pending.extend(t for t in job.tasks.values() if t.status == TaskStatus.PENDING)
        pending.sort(key=lambda t: (-t.priority, t.creation, t.uid))
        for task in pending:
            job = ssn.jobs[task.job]
            node, _ = ssn.select_node(task, future=False)
            if node < 0:
                job.fit_errors[task.uid] = ssn.fit_error(task, use_future=False)
                continue
            ssn.place(task, node, TaskStatus.ALLOCATED)
            ssn.notify_allocated(task)
            ssn.bind(task)
