"""The phases, lifecycle events and actions of Volcano Jobs, PodGroups, JobFlows and pods, as
StrEnums (members are strings: they compare, hash and serialise as the value). Kept apart from the
pydantic models (volcano.py, core.py re-export them) so that code which only names a phase — the
command line's tables — does not build the models."""

from __future__ import annotations

from enum import StrEnum


class JobEvent(StrEnum):
    """What happens to a Volcano Job, as lifecycle policies name it (``*``: any of them); OutOfSync,
    CommandIssued, PodRunning and PodSucceeded are raised by the controller itself (a sync, a
    Command, a pod that started or succeeded) and cannot be named by a policy."""

    ANY = "*"
    POD_PENDING = "PodPending"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    JOB_UPDATED = "JobUpdated"
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    POD_RUNNING = "PodRunning"  # (lavaflow's: a pod started or finished; policies cannot name them)
    POD_SUCCEEDED = "PodSucceeded"


class JobAction(StrEnum):
    """What a lifecycle policy or a Command does to a Volcano Job; SyncJob and EnqueueJob are the
    controller's own."""

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    RESTART_PARTITION = "RestartPartition"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"


class JobPhase(StrEnum):
    """A Volcano Job's ``status.state.phase``."""

    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


# What a Job's lifecycle policies may name (the controller's own events and actions excluded).
_OWN_EVENTS = (JobEvent.OUT_OF_SYNC, JobEvent.COMMAND_ISSUED, JobEvent.POD_RUNNING, JobEvent.POD_SUCCEEDED)
JOB_EVENTS = tuple(e.value for e in JobEvent if e not in _OWN_EVENTS)
JOB_ACTIONS = tuple(a.value for a in JobAction if a not in (JobAction.SYNC_JOB, JobAction.ENQUEUE_JOB))
JOB_PHASES = tuple(p.value for p in JobPhase)
JOB_FINAL_PHASES = (JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED, JobPhase.ABORTED)


class PodGroupPhase(StrEnum):
    """A PodGroup's ``status.phase``."""

    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


PODGROUP_PHASES = tuple(p.value for p in PodGroupPhase)


class JobFlowPhase(StrEnum):
    """A JobFlow's ``status.state.phase`` (Succeed is the flow API's spelling). lavaflow's JobFlow
    controller writes all of them but Terminating."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEED = "Succeed"
    TERMINATING = "Terminating"
    FAILED = "Failed"


class PodPhase(StrEnum):
    """core/v1 PodPhase. Members are strings: they compare, hash and serialise as the phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
