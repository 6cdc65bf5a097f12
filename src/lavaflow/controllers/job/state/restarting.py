"""Restarting: the killed pods go; past maxRetry the job fails, else it is Pending again once
few enough of its pods are still terminating for minAvailable to fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job, JobPhase
from ..tally import TERMINATING

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin


def before_pods(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> str | None:
    if job.status.retry_count >= job.spec.max_retry:
        ctl._kill(job, pods, keep_finished=True)
        ctl._set_phase(
            job,
            JobPhase.FAILED,
            "MaxRetryExceeded",
            f"job restarted {job.status.retry_count} times (maxRetry {job.spec.max_retry})",
        )
        return None
    total = sum(t.replicas for t in job.spec.tasks)
    if total - counts[TERMINATING] >= job.spec.min_available:
        ctl._set_phase(job, JobPhase.PENDING)
        return JobPhase.PENDING
    return None
