"""Garbage collector: deletes finished Jobs ``ttlSecondsAfterFinished`` after they finished.

A Job that is Completed, Failed or Terminated with a TTL expires at its last
transition time plus the TTL; deleting it removes its pods, PodGroup and the
plugins' objects (the job controller cleans up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api.volcano import Job, JobPhase
from .base import Controller

if TYPE_CHECKING:  # pragma: no cover
    from ..store.base import Store
    from .base import Clock


FINISHED = (JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED)


class GarbageCollector(Controller):
    def __init__(self, store: Store, clock: Clock) -> None:
        super().__init__(store, clock)
        self.scheduled: set[str] = set()
        store.watch("Job", self._on_job)

    def _on_job(self, event: str, job: Job, old: Job | None) -> None:
        if event == "DELETED" or job.spec.ttl_seconds_after_finished is None:
            return
        if job.status.state.phase in FINISHED and job.key not in self.scheduled:
            self.scheduled.add(job.key)
            expire = float(job.status.state.last_transition_time or self.clock()) + job.spec.ttl_seconds_after_finished
            if expire <= self.clock():
                self.mark(job.key)
            else:
                self.schedule(expire, job.key)

    def sync(self, key: str) -> None:
        job = self.store.get("Job", key)
        self.scheduled.discard(key)
        if job is None or job.spec.ttl_seconds_after_finished is None or job.status.state.phase not in FINISHED:
            return
        expire = float(job.status.state.last_transition_time or 0) + job.spec.ttl_seconds_after_finished
        if self.clock() + 1e-9 >= expire:
            self.store.delete("Job", key)
        else:
            self.scheduled.add(key)
            self.schedule(expire, key)
