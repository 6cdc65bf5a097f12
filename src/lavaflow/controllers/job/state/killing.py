"""Aborting, Terminating and Completing: the job's pods are being killed (finished ones kept);
once none is alive the job settles into Aborted, Terminated or Completed. A ResumeJob while
Aborting restarts the job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job, JobAction, JobPhase
from ..util import ALIVE, KILL_TO, RESTARTS

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin
    from ..util import Request

SETTLE_TO: dict[str, JobPhase] = {
    JobPhase.ABORTING: JobPhase.ABORTED,
    JobPhase.TERMINATING: JobPhase.TERMINATED,
    JobPhase.COMPLETING: JobPhase.COMPLETED,
}


def execute(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
    """An action while Terminating or Completing: a restart or another end only kills."""
    if action in RESTARTS or action in KILL_TO:
        ctl._kill(job, pods, keep_finished=True)
    ctl._sync(job, pods)


def execute_aborting(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
    """An action while Aborting: as while Terminating, but a ResumeJob restarts the job."""
    if action in RESTARTS or action in KILL_TO:
        ctl._kill(job, pods, keep_finished=True)
    elif action == JobAction.RESUME_JOB:
        job.status.retry_count += 1
        ctl._set_phase(job, JobPhase.RESTARTING, JobAction.RESUME_JOB)
    ctl._sync(job, pods)


def settle(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> None:
    """SyncJob while killing: the pods still alive are killed, or the job settles."""
    if ctl.tallies[job.key].phase(*ALIVE):
        alive = {n: p for n, p in pods.items() if p.status.phase in ALIVE}
        ctl._kill(job, alive, keep_finished=True)
    else:
        ctl._set_phase(job, SETTLE_TO[job.status.state.phase])
