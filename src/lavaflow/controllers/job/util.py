"""What the job controller's modules share: the request a Job event becomes, the names of a
job's pods and PodGroup, groups of pod phases and actions, and readers of labels and owner
references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...api.core import Pod, PodPhase
from ...api.volcano import JobAction, JobEvent, JobPhase
from ...elastic import spec as elastic_spec

if TYPE_CHECKING:  # pragma: no cover
    from ...api.meta import OwnerReference
    from ...api.volcano import Job, TaskSpec

# Pod phases, events and actions read per pod event, as plain strs (.value): a global costs a
# fraction of a member read off its class, and two exact strs compare on CPython's fast path,
# which a str and a member do not (see scheduler.model.NOT_ADMITTED).
POD_PENDING = PodPhase.PENDING.value
POD_RUNNING = PodPhase.RUNNING.value
POD_SUCCEEDED = PodPhase.SUCCEEDED.value
POD_FAILED = PodPhase.FAILED.value
EVENT_POD_PENDING = JobEvent.POD_PENDING.value
EVENT_POD_RUNNING = JobEvent.POD_RUNNING.value
EVENT_POD_SUCCEEDED = JobEvent.POD_SUCCEEDED.value
EVENT_POD_FAILED = JobEvent.POD_FAILED.value
EVENT_OUT_OF_SYNC = JobEvent.OUT_OF_SYNC.value
EVENT_TASK_COMPLETED = JobEvent.TASK_COMPLETED.value
EVENT_TASK_FAILED = JobEvent.TASK_FAILED.value
ALIVE = (POD_PENDING, POD_RUNNING)
FINISHED = (POD_SUCCEEDED, POD_FAILED)
SYNC = JobAction.SYNC_JOB.value
RESTARTS = (
    JobAction.RESTART_JOB.value,
    JobAction.RESTART_TASK.value,
    JobAction.RESTART_POD.value,
    JobAction.RESTART_PARTITION.value,
)
KILL_TO: dict[str, JobPhase] = {
    JobAction.ABORT_JOB: JobPhase.ABORTING,
    JobAction.TERMINATE_JOB: JobPhase.TERMINATING,
    JobAction.COMPLETE_JOB: JobPhase.COMPLETING,
}


@dataclass(slots=True)
class Request:
    event: str
    task: str = ""
    pod: str = ""  # pod name
    exit_code: int | None = None
    action: str | None = None  # explicit (Command or delayed action)
    version: int | None = None


def pod_name(job: Job, task: TaskSpec, index: int) -> str:
    return f"{job.name}-{task.name}-{index}"


def podgroup_name(job: Job) -> str:
    return f"{job.name}-{job.metadata.uid}"


def task_min(task: TaskSpec) -> int:
    return task.min_available if task.min_available is not None else task.replicas


def resized_out(pod: Pod) -> bool:
    return pod.status.reason == elastic_spec.RESIZE_REASON or elastic_spec.RESIZED_OUT in pod.metadata.annotations


def is_vcjob(ref: OwnerReference) -> bool:
    return ref.kind == "Job" and ref.api_version.startswith("batch.volcano.sh")


def owner_ref(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": job.api_version,
        "kind": "Job",
        "name": job.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def to_int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
