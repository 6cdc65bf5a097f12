"""The restart actions (RestartJob, RestartTask, RestartPartition, RestartPod), taken while
Pending, Running or Restarting: kill the pods concerned (finished ones kept on the last retry),
count the restart and move to Restarting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import TASK_SPEC_KEY, Job, JobAction, JobPhase
from ..util import podgroup_name

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin
    from ..util import Request


def restart(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request, bump: bool) -> None:
    keep = last_retry(job)
    if action == JobAction.RESTART_JOB:
        ctl._kill(job, pods, keep_finished=keep)
        job.status.version += 1
        ctl.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
    elif action in (JobAction.RESTART_TASK, JobAction.RESTART_PARTITION):
        ctl._kill(job, pods, keep_finished=keep, only=lambda p: p.metadata.labels.get(TASK_SPEC_KEY) == req.task)
        restarts = ctl.task_restarts.setdefault(job.key, {})
        restarts[req.task] = restarts.get(req.task, 0) + 1
    else:  # RestartPod
        ctl._kill(job, pods, keep_finished=False, only=lambda p: p.name == req.pod)
        restarts = ctl.task_restarts.setdefault(job.key, {})
        restarts[req.task] = restarts.get(req.task, 0) + 1
    if bump:
        job.status.retry_count += 1
    ctl._set_phase(job, JobPhase.RESTARTING, action)


def last_retry(job: Job) -> bool:
    return job.status.retry_count >= job.spec.max_retry - 1
