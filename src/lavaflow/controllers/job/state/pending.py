"""Pending: the job waits for its PodGroup to be admitted and its pods to start; once
minAvailable of them started (or it has no pods), it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job, JobPhase
from ..util import POD_FAILED, POD_RUNNING, POD_SUCCEEDED
from . import running

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin


def after_pods(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> None:
    started = counts[POD_RUNNING] + counts[POD_SUCCEEDED] + counts[POD_FAILED]
    total = sum(t.replicas for t in job.spec.tasks)
    if (total == 0) or (started >= job.spec.min_available and started > 0):
        ctl._set_phase(job, JobPhase.RUNNING)
        running.after_pods(ctl, job, pods, counts)
