"""Completed, Failed and Terminated: the job is done. An action only kills what is left of its
pods (finished ones kept), and SyncJob has nothing more to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.volcano import Job

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ..actions import ActionsMixin
    from ..util import Request


def execute(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
    ctl._kill(job, pods, keep_finished=True)
    ctl._counts(job, pods)


def before_pods(ctl: ActionsMixin, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> str | None:
    return None
