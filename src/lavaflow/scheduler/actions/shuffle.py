"""shuffle: evict the running tasks the plugins name as victims (e.g. rescheduling's
lowNodeUtilization), so that they are placed again, elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.registry import Action, register_action
from ..framework.statement import Statement
from ..model import Eviction, EvictionCause, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session


@register_action
class ShuffleAction(Action):
    name = "shuffle"

    def execute(self, ssn: Session) -> None:
        if not ssn.fns.get("VictimTasks"):
            return
        running = [t for job in ssn.jobs.values() for t in job.tasks.values() if t.status == TaskStatus.RUNNING]
        victims = ssn.victim_tasks(running)
        if not victims:
            return
        stmt = Statement(ssn)
        for task in victims:
            if task.status == TaskStatus.RUNNING:
                stmt.evict(task, Eviction(EvictionCause.SHUFFLE, "shuffle"))
                ssn.record(task.job, "shuffle", f"evicted {task.name} (rescheduling)")
        stmt.commit()
