"""Volcano's job state machine: what each phase of a Job does with an action, and its own steps
of SyncJob. One module a phase, or a few phases that behave alike:

=============  ==========================  ==========================================
phase          action                      effect
=============  ==========================  ==========================================
Pending,       RestartJob                  kill all pods (version+1, PodGroup deleted),
Running                                    retryCount+1 → Restarting
               RestartTask / RestartPod    kill the task's / the pod's pods,
                                           retryCount+1 → Restarting
               AbortJob                    kill (keep finished pods) → Aborting
               TerminateJob                kill (keep finished pods) → Terminating
               CompleteJob                 kill (keep finished pods) → Completing
Restarting     (sync)                      retryCount ≥ maxRetry → Failed, else → Pending
Aborting       (sync)                      no pod alive → Aborted
Aborted,       ResumeJob                   retryCount+1 → Restarting
Aborting
Completing /   (sync)                      no pod alive → Completed / Terminated
Terminating
=============  ==========================  ==========================================

``running`` (actions while Pending, Running or Restarting; Running's step), ``pending``
(Pending → Running), ``restarting`` (Restarting → Pending or Failed), ``restart`` (the restart
actions), ``killing`` (Aborting, Terminating, Completing), ``aborted`` and ``finished``
(Completed, Failed, Terminated). On the last retry finished pods are always kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....api.volcano import JobPhase
from . import aborted, finished, killing, pending, restarting, running

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from ....api.core import Pod
    from ....api.volcano import Job
    from ..actions import ActionsMixin
    from ..util import Request

    Execute = Callable[[ActionsMixin, Job, dict[str, Pod], str, Request], None]
    BeforePods = Callable[[ActionsMixin, Job, dict[str, Pod], dict[str, int]], str | None]
    AfterPods = Callable[[ActionsMixin, Job, dict[str, Pod], dict[str, int]], None]


@dataclass(frozen=True, slots=True)
class State:
    """A phase: ``execute`` runs an action in it (then SyncJob, unless the job is done);
    SyncJob calls ``before_pods`` before it sees to the PodGroup and the pods (it returns the
    phase to go on in, or None to end the sync) and ``after_pods`` after."""

    execute: Execute
    before_pods: BeforePods | None = None
    after_pods: AfterPods | None = None


STATES: dict[str, State] = {
    JobPhase.PENDING: State(running.execute, after_pods=pending.after_pods),
    JobPhase.RUNNING: State(running.execute, after_pods=running.after_pods),
    JobPhase.RESTARTING: State(running.execute, before_pods=restarting.before_pods),
    JobPhase.ABORTING: State(killing.execute_aborting, before_pods=killing.settle),
    JobPhase.TERMINATING: State(killing.execute, before_pods=killing.settle),
    JobPhase.COMPLETING: State(killing.execute, before_pods=killing.settle),
    JobPhase.ABORTED: State(aborted.execute, before_pods=finished.before_pods),
    JobPhase.COMPLETED: State(finished.execute, before_pods=finished.before_pods),
    JobPhase.FAILED: State(finished.execute, before_pods=finished.before_pods),
    JobPhase.TERMINATED: State(finished.execute, before_pods=finished.before_pods),
}
# A phase none of Volcano's (a status written by someone else): actions only kill, and SyncJob
# sees to the PodGroup and the pods.
OTHER = State(killing.execute)
