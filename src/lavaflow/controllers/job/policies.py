"""Lifecycle policies: which action a request (a pod or PodGroup event, a Command, a delayed
action) leads to, task policies before the job's, and after what delay; the delayed actions
themselves (one per job or pod, cancelled when the pod or the job moves on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import admission
from ...api.core import Pod
from ...api.volcano import Job, JobEvent
from .base import JobBase
from .util import (
    EVENT_OUT_OF_SYNC,
    EVENT_POD_FAILED,
    EVENT_POD_PENDING,
    EVENT_POD_RUNNING,
    EVENT_POD_SUCCEEDED,
    POD_SUCCEEDED,
    SYNC,
    Request,
)

_ANY = JobEvent.ANY.value

if TYPE_CHECKING:  # pragma: no cover
    from ...api.volcano import LifecyclePolicy


class PolicyMixin(JobBase):
    def timer_fired(self, key: str, payload: Any) -> None:
        req, token = payload
        if token in self._timer_tokens:
            del self._timer_tokens[token]
            self.requests.setdefault(key, []).append(req)

    def _delay(self, key: str, req: Request, seconds: float, scope: str) -> None:
        # One pending delay per scope (the job, or one pod of it).
        for k, s in self._timer_tokens.values():
            if k == key and s == scope:
                return
        self._next_token += 1
        self._timer_tokens[self._next_token] = (key, scope)
        self.schedule(self.clock() + seconds, key, (req, self._next_token))

    def _cancel(self, key: str, scope: str | None = None) -> None:
        for token, (k, s) in list(self._timer_tokens.items()):
            if k == key and (scope is None or s == scope):
                del self._timer_tokens[token]

    def _resolve(self, job: Job, req: Request) -> tuple[str, float | None]:
        """The action for a request (task policies first) and its delay, if any."""
        if req.action is not None:
            return req.action, None
        if req.event in (EVENT_OUT_OF_SYNC, EVENT_POD_RUNNING, EVENT_POD_SUCCEEDED):
            return SYNC, None
        if req.version is not None and req.version != job.status.version:
            return SYNC, None  # an event of an older incarnation
        task = next((t for t in job.spec.tasks if t.name == req.task), None)
        levels = ([task.policies] if task is not None else []) + [job.spec.policies]
        for policies in levels:
            for pol in policies:
                events = _events(pol)
                if pol.exit_code is not None:
                    if req.event == EVENT_POD_FAILED and req.exit_code == pol.exit_code:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event == EVENT_POD_PENDING:
                    if EVENT_POD_PENDING in events and pol.timeout:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event in events or (_ANY in events and req.event != EVENT_POD_PENDING):
                    return pol.action or SYNC, _timeout(pol)
        return SYNC, None

    def _plain_sync(self, job: Job, req: Request) -> bool:
        """A request whose whole effect is SyncJob, at once (no policy, no delay)."""
        return (
            req.event in (EVENT_POD_PENDING, EVENT_POD_RUNNING, EVENT_OUT_OF_SYNC)
            and req.action is None
            and self._resolve(job, req) == (SYNC, None)
        )

    def _task_completed(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None or task.replicas == 0:
            return False
        tally = self.tallies[job.key]
        mine = tally.task_pods(task_name)
        return mine >= task.replicas and tally.task_phase(task_name, POD_SUCCEEDED) == mine


def _events(policy: LifecyclePolicy) -> set[str]:
    return set(policy.events) | ({policy.event} if policy.event else set())


def _timeout(pol: LifecyclePolicy) -> float | None:
    if not pol.timeout:
        return None
    try:
        return admission.parse_duration(pol.timeout)
    except ValueError:
        return None
