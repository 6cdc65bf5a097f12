"""Watch handlers: Job, Pod, PodGroup and Command events become requests (PodFailed,
PodEvicted, Unknown, JobUpdated, CommandIssued, ...) or marks for the job's next sync."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...api.core import Pod
from ...api.volcano import (
    JOB_NAME_KEY,
    JOB_VERSION_KEY,
    TASK_SPEC_KEY,
    Job,
    JobEvent,
    PodGroup,
    PodGroupPhase,
)
from ..base import COMMAND_KEY
from .actions import ActionsMixin
from .tally import Tally
from .util import (
    ALIVE,
    EVENT_POD_FAILED,
    EVENT_POD_PENDING,
    EVENT_POD_RUNNING,
    EVENT_POD_SUCCEEDED,
    POD_FAILED,
    POD_PENDING,
    POD_RUNNING,
    POD_SUCCEEDED,
    Request,
    is_vcjob,
    resized_out,
    to_int,
)

_PG_UNKNOWN = PodGroupPhase.UNKNOWN.value  # (a plain str, read per PodGroup event: see util)

if TYPE_CHECKING:  # pragma: no cover
    from ...api.volcano import Command


class HandlersMixin(ActionsMixin):
    def _request(self, key: str, req: Request) -> None:
        self.requests.setdefault(key, []).append(req)
        self.mark(key)

    def _on_job(self, event: str, job: Job, old: Job | None) -> None:
        if event == "DELETED":
            self.specs.pop(job.key, None)
            self.mark(job.key)
            return
        prev = self.specs.get(job.key)
        if prev is not None and prev[0] is job.spec:
            # A status write: the spec object is the one already seen. The controller's own write
            # of a status whose phase did not move needs no reconcile (as Volcano ignores
            # status-only updates): the sync that wrote it changed nothing else it reads.
            if job.key in self._own_writes:
                self._own_writes.discard(job.key)
            else:
                self.mark(job.key)
            return
        spec = job.spec.model_dump()
        self.specs[job.key] = (job.spec, spec)
        if prev is not None and prev[1] != spec:
            self._request(job.key, Request(JobEvent.JOB_UPDATED))
        else:
            self.mark(job.key)

    def _job_key_of(self, obj: Pod | PodGroup) -> str | None:
        name = obj.metadata.labels.get(JOB_NAME_KEY) or obj.metadata.annotations.get(JOB_NAME_KEY)
        if name is None:
            for ref in obj.metadata.owner_references:
                if is_vcjob(ref):
                    name = ref.name
        return f"{obj.namespace}/{name}" if name else None

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        meta = pod.metadata
        labels = meta.labels
        name = labels.get(JOB_NAME_KEY) or meta.annotations.get(JOB_NAME_KEY)
        if not name:
            key = self._job_key_of(pod)
            if key is None:
                return
        else:
            key = f"{meta.namespace or 'default'}/{name}"  # _job_key_of(pod)
        uid = meta.uid
        pod_name = meta.name
        if event == "DELETED":
            pods = self.pods_by_job.get(key)
            if pods is not None and pods.get(pod_name) is pod:
                del pods[pod_name]
                self.tallies[key].drop(pod_name)
            before = self.pod_phase.pop(uid, None)
            if uid in self.killing:
                self.killing.discard(uid)
                self.mark(key)
            elif resized_out(pod):
                # The elastic scheduler shrank the job: the pod comes back as a pending worker
                # (no PodEvicted policy, no restart).
                self.mark(key)
            elif before in ALIVE:
                version = to_int(meta.annotations.get(JOB_VERSION_KEY))
                self._request(
                    key, Request(JobEvent.POD_EVICTED, labels.get(TASK_SPEC_KEY, ""), pod_name, version=version)
                )
            else:
                self.mark(key)
            return
        pods = self.pods_by_job.get(key)
        if pods is None:
            pods = self.pods_by_job[key] = {}
            tally = self.tallies[key] = Tally()
        else:
            tally = self.tallies[key]
        pods[pod_name] = pod
        tally.put(pod)
        now: str = pod.status.phase
        pod_phase = self.pod_phase
        before = pod_phase.get(uid)
        pod_phase[uid] = now
        if before == now:
            self.mark(key)
            return
        if event == "ADDED" or now == POD_PENDING:
            event = EVENT_POD_PENDING
        elif now == POD_RUNNING:
            event = EVENT_POD_RUNNING
        elif now == POD_FAILED:
            if resized_out(pod):
                # a worker the elastic scheduler took away, ending before it is gone (torchrun
                # exits 1 on the resize's SIGTERM): not a failure for the job's policies
                self.mark(key)
                return
            version = to_int(meta.annotations.get(JOB_VERSION_KEY))
            task = labels.get(TASK_SPEC_KEY, "")
            self._request(key, Request(EVENT_POD_FAILED, task, pod_name, pod.status.exit_code, version=version))
            return
        elif now == POD_SUCCEEDED:
            event = EVENT_POD_SUCCEEDED
        else:
            self.mark(key)
            return
        version = to_int(meta.annotations.get(JOB_VERSION_KEY))
        self._request(key, Request(event, labels.get(TASK_SPEC_KEY, ""), pod_name, None, None, version))

    def _on_pg(self, event: str, pg: PodGroup, old: PodGroup | None) -> None:
        for ref in pg.metadata.owner_references:
            if is_vcjob(ref):
                key = f"{pg.namespace}/{ref.name}"
                if event == "DELETED":
                    before = self.pg_phase.pop(pg.key, None)
                    phase = ""
                    owned = self.podgroups_of.get(key)
                    if owned is not None:
                        owned.pop(pg.key, None)
                        if not owned:
                            del self.podgroups_of[key]
                else:
                    before = self.pg_phase.get(pg.key)
                    phase = self.pg_phase[pg.key] = pg.status.phase
                    self.podgroups_of.setdefault(key, {})[pg.key] = None
                if phase == _PG_UNKNOWN and before != _PG_UNKNOWN:
                    self._request(key, Request(JobEvent.UNKNOWN))
                elif event != "MODIFIED" or phase != before:
                    # As Volcano's updatePodGroup: only a new phase concerns the job (its sync
                    # reads nothing else of an existing PodGroup but the annotations it copies).
                    self.mark(key)

    def _on_command(self, event: str, cmd: Command, old: Command | None) -> None:
        if event == "DELETED":
            return
        target = cmd.target if isinstance(cmd.target, dict) else {}
        if target.get("kind") == "Job":
            self.mark(COMMAND_KEY + cmd.key)

    def _consume(self, key: str) -> None:
        taken = self.take_command(key)
        if taken is None:
            return
        cmd, target = taken
        job_key = f"{cmd.namespace}/{target}"
        if self.store.get("Job", job_key) is not None:
            self._request(job_key, Request(JobEvent.COMMAND_ISSUED, action=cmd.action))
