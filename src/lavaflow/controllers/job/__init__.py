"""Volcano's Job controller, one module a subject (as Volcano's pkg/controllers/job).

A Job gets a PodGroup at once; its pods ``<job>-<task>-<index>`` are created only after the
PodGroup has been admitted (left Pending), respecting task ``dependsOn``. Pod and PodGroup
changes and Commands become *events* (PodPending, PodFailed, PodEvicted, Unknown,
TaskCompleted, TaskFailed, JobUpdated, CommandIssued); lifecycle policies map events (or exit
codes) to *actions* — task-level policies before job-level ones — and the action runs through
Volcano's state machine (``state/``). A policy with a ``timeout`` delays its action; the delay
is cancelled when the pod leaves Pending (for PodPending) or runs again, and running another
non-sync action for the job cancels the job's other delayed actions.

- ``controller``: JobController, its watches and the reconcile of one job (requests in order)
- ``handlers``: Job, Pod, PodGroup and Command events → requests
- ``policies``: lifecycle policies (request → action, delay) and the delayed actions
- ``state/``: one module a phase: what an action does in it, and its steps of SyncJob
- ``actions``: SyncJob, killing pods, a new job's setup, a deleted job's cleanup, updates
- ``pods``, ``podgroup``: the job's pods (templates, creation, scale-down) and its PodGroup
- ``status``, ``tally``: phase changes and the status' pod counts, kept from pod events
- ``plugins/``: the job plugins, one module each (env, svc, ssh and the training frameworks)
- ``base``, ``util``: the controller's per-object state; what the modules share
"""

from .actions import generated_objects
from .controller import JobController
from .util import pod_name

__all__ = ["JobController", "generated_objects", "pod_name"]
