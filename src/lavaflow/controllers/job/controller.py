"""The Job controller: its watches, and the reconcile of one job: the job's requests taken in
order, each resolved by the lifecycle policies and run through the state of the job's phase
(``state/``), then the status written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...api.core import Pod
from ...api.volcano import Job
from ..base import COMMAND_KEY
from .handlers import HandlersMixin
from .plugins import pods_changed
from .state import OTHER, STATES
from .status import snapshot
from .tally import Tally
from .util import (
    EVENT_OUT_OF_SYNC,
    EVENT_POD_FAILED,
    EVENT_POD_PENDING,
    EVENT_POD_RUNNING,
    EVENT_POD_SUCCEEDED,
    EVENT_TASK_COMPLETED,
    EVENT_TASK_FAILED,
    POD_PENDING,
    SYNC,
    Request,
)

if TYPE_CHECKING:  # pragma: no cover
    from ...store.base import Store
    from ..base import Clock


class JobController(HandlersMixin):
    def __init__(self, store: Store, clock: Clock, priority_of: Callable[[str | None], int] | None = None) -> None:
        super().__init__(store, clock, priority_of)
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", self._on_pg)
        store.watch("Command", self._on_command)

    def sync(self, key: str) -> None:
        if key.startswith(COMMAND_KEY):
            self._consume(key[len(COMMAND_KEY) :])
            return
        self._own_writes.discard(key)  # (a write that never came back: this sync decides afresh)
        job: Job | None = self.store.get("Job", key)
        if job is None:
            self._cleanup(key, self.pods_by_job.get(key, {}))
            return
        pods = self.pods_by_job.get(key)
        if pods is None:
            pods = self.pods_by_job[key] = {}
            self.tallies[key] = Tally()
        before = snapshot(job.status)
        transitions = self._transitions
        if not job.status.state.phase:
            self._initiate(job)
        reqs = self.requests.pop(key, [])
        reqs.append(Request(EVENT_OUT_OF_SYNC))
        last = len(reqs) - 1
        plain = [self._plain_sync(job, r) for r in reqs]
        for i, req in enumerate(reqs):
            if i < last and plain[i] and plain[i + 1]:
                # A pod created or started, followed by another plain sync: SyncJob converges in
                # one pass, so only the last of a run of them is executed.
                if req.event == EVENT_POD_RUNNING:
                    self._cancel(job.key, f"pod/{req.pod}")
                continue
            self._handle(job, pods, req)
        if job.spec.plugins:
            pods_changed(job, pods, self.store)
        if snapshot(job.status) != before:
            if self._transitions == transitions:
                self._own_writes.add(key)
            try:
                if self.store.update_later(job) is not None:  # applied at once: its event is past
                    self._own_writes.discard(key)
            except BaseException:
                self._own_writes.discard(key)
                raise

    def _handle(self, job: Job, pods: dict[str, Pod], req: Request) -> None:
        # Derived events: a task completed, or a task failed beyond its retries.
        if req.event == EVENT_POD_SUCCEEDED and self._task_completed(job, req.task, pods):
            req = Request(EVENT_TASK_COMPLETED, req.task, req.pod, version=req.version)
        if req.event == EVENT_POD_FAILED:
            task = next((t for t in job.spec.tasks if t.name == req.task), None)
            if (
                task is not None
                and task.max_retry != -1
                and self.task_restarts.get(job.key, {}).get(task.name, 0) >= task.max_retry
            ):
                action, delay = self._resolve(job, Request(EVENT_TASK_FAILED, req.task, req.pod, version=req.version))
                if action != SYNC:
                    req = Request(EVENT_TASK_FAILED, req.task, req.pod, version=req.version)
        if req.event in (EVENT_POD_RUNNING,) or (req.event == EVENT_POD_SUCCEEDED):
            self._cancel(job.key, f"pod/{req.pod}")
        if (
            req.event == EVENT_POD_PENDING
            and req.pod
            and req.pod in pods
            and str(pods[req.pod].status.phase) != POD_PENDING
        ):
            return
        action, delay = self._resolve(job, req)
        if delay:
            self._delay(
                job.key,
                Request(req.event, req.task, req.pod, req.exit_code, action, req.version),
                delay,
                f"pod/{req.pod}" if req.pod else "job",
            )
            return
        if action != SYNC:
            self._cancel(job.key)
        STATES.get(job.status.state.phase, OTHER).execute(self, job, pods, action, req)

    def acts_on_each_end(self, key: str) -> bool:
        """Whether a sync of Job ``key`` may act on one of its pods ending alone — a lifecycle
        policy (of the job or a task) or a minSuccess reached by that pod — so that pods ending at
        one instant must reach it one at a time. True for a Job not known here."""
        job = self.store.get("Job", key)
        if not isinstance(job, Job):
            return True
        spec = job.spec
        return spec.min_success is not None or bool(spec.policies) or any(t.policies for t in spec.tasks)

    def retry_forbidden(self, namespace: str) -> None:
        """Usage in ``namespace`` went down: jobs whose pods were refused try again."""
        for key in self.forbidden.get(namespace, {}):
            self.mark(key)
