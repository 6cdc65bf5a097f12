"""Running: the actions of a job under way (Pending and Restarting take them alike), and
Running's step of SyncJob: the job ends once minSuccess of its pods succeeded, an elastic
training job's running workers finished, or every pod finished (Completed, or Failed short
of a task's or the job's minimum); too few pods running sends it back to Pending."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job, JobPhase
from ....elastic import spec as elastic_spec
from ..util import ALIVE, KILL_TO, POD_FAILED, POD_PENDING, POD_RUNNING, POD_SUCCEEDED, RESTARTS, task_min
from .restart import restart

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin
    from ..util import Request


def execute(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
    """An action while Pending, Running or Restarting (a restart from Restarting is not counted again)."""
    if action in RESTARTS:
        restart(ctl, job, pods, action, req, bump=job.status.state.phase != JobPhase.RESTARTING)
    elif action in KILL_TO:
        ctl._kill(job, pods, keep_finished=True)
        ctl._set_phase(job, KILL_TO[action], action)
    ctl._sync(job, pods)


def after_pods(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> None:
    total = sum(t.replicas for t in job.spec.tasks)
    if total == 0:
        return
    if job.spec.min_success is not None and counts[POD_SUCCEEDED] >= job.spec.min_success:
        ctl._kill(job, pods, keep_finished=True)
        ctl._set_phase(
            job,
            JobPhase.COMPLETING,
            "MinSuccess",
            f"{counts[POD_SUCCEEDED]} pods succeeded (minSuccess {job.spec.min_success})",
        )
        if not ctl.tallies[job.key].phase(*ALIVE):
            ctl._set_phase(job, JobPhase.COMPLETED)
        return
    if (
        counts[POD_RUNNING] == 0
        and counts[POD_SUCCEEDED] > 0
        and counts[POD_FAILED] == 0
        and elastic_spec.has_speed_model(job.metadata.annotations)
        and elastic_spec.job_shape(job) is not None
    ):
        # An elastic training job is done when its running workers finished their work:
        # workers it never needed (still pending) go.
        ctl._kill(job, pods, keep_finished=True)
        ctl._set_phase(job, JobPhase.COMPLETED)
        return
    created = counts[POD_PENDING] + counts[POD_RUNNING] + counts[POD_SUCCEEDED] + counts[POD_FAILED]
    if created >= total and counts[POD_PENDING] == 0 and counts[POD_RUNNING] == 0:
        job_min = job.spec.min_available
        if job_min >= sum(task_min(t) for t in job.spec.tasks):
            for task in job.spec.tasks:
                ok = ctl.tallies[job.key].task_phase(task.name, POD_SUCCEEDED)
                if ok < task_min(task):
                    ctl._set_phase(
                        job,
                        JobPhase.FAILED,
                        "TaskFailed",
                        f"task {task.name}: {ok} pods succeeded, {task_min(task)} required",
                    )
                    return
        if job.spec.min_success is not None:
            ctl._set_phase(
                job,
                JobPhase.FAILED,
                "MinSuccessNotReached",
                f"{counts[POD_SUCCEEDED]} pods succeeded (minSuccess {job.spec.min_success})",
            )
        elif counts[POD_SUCCEEDED] >= job_min:
            ctl._set_phase(job, JobPhase.COMPLETED)
        else:
            ctl._set_phase(
                job,
                JobPhase.FAILED,
                "NotEnoughSucceeded",
                f"{counts[POD_SUCCEEDED]} pods succeeded, minAvailable {job_min}",
            )
        return
    if (
        counts[POD_PENDING] > total - job.spec.min_available
        and counts[POD_RUNNING] + counts[POD_SUCCEEDED] < job.spec.min_available
    ):
        ctl._set_phase(job, JobPhase.PENDING)
