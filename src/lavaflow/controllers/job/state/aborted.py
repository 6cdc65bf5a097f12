"""Aborted: final for reporting, but a ResumeJob still restarts the job (Volcano's aborted
state); any other action only kills what is left."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job, JobAction, JobPhase

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin
    from ..util import Request


def execute(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
    if action != JobAction.RESUME_JOB:
        ctl._kill(job, pods, keep_finished=True)
        ctl._counts(job, pods)
        return
    job.status.retry_count += 1
    ctl._set_phase(job, JobPhase.RESTARTING, JobAction.RESUME_JOB)
    ctl._sync(job, pods)
