"""Volcano Job controller: the whole lifecycle.

A Job gets a PodGroup at once; its pods ``<job>-<task>-<index>`` are created
only after the PodGroup has been admitted (left Pending), respecting task
``dependsOn``. Pod and PodGroup changes and Commands become *events*
(PodPending, PodFailed, PodEvicted, Unknown, TaskCompleted, TaskFailed,
JobUpdated, CommandIssued); lifecycle policies map events (or exit codes) to
*actions* — task-level policies before job-level ones — and the action runs
through Volcano's state machine:

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

On the last retry finished pods are always kept. A policy with a ``timeout``
delays its action; the delay is cancelled when the pod leaves Pending (for
PodPending) or runs again, and running another non-sync action for the job
cancels the job's other delayed actions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..api import admission
from ..api.core import Pod, PodPhase, PodStatus
from ..api.meta import clone
from ..api.selectors import pod_requests
from ..api.volcano import (
    GROUP_NAME_ANNOTATION,
    JOB_FINAL_PHASES,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_RETRY_COUNT_KEY,
    JOB_VERSION_KEY,
    NUMA_POLICY_KEY,
    QUEUE_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_KEY,
    Job,
    JobAction,
    JobEvent,
    JobPhase,
    JobStatus,
    PodGroup,
    PodGroupPhase,
    TaskSpec,
)
from ..elastic import spec as elastic_spec
from ..store.base import Forbidden
from .base import COMMAND_KEY, Controller
from .job_plugins import discovery_config_maps, job_gone, plugins_for, pods_changed

log = logging.getLogger("lavaflow.controllers")

if TYPE_CHECKING:  # pragma: no cover
    from ..api.meta import OwnerReference
    from ..api.volcano import Command, LifecyclePolicy
    from ..store.base import Store
    from .base import Clock

K = TypeVar("K")
M = TypeVar("M", bound="BaseModel")


ALIVE = (PodPhase.PENDING, PodPhase.RUNNING)
FINISHED = (PodPhase.SUCCEEDED, PodPhase.FAILED)
SYNC = JobAction.SYNC_JOB
JOB_ACTIONS = (
    JobAction.RESTART_JOB,
    JobAction.ABORT_JOB,
    JobAction.TERMINATE_JOB,
    JobAction.COMPLETE_JOB,
    JobAction.RESUME_JOB,
)
RESTARTS = (JobAction.RESTART_JOB, JobAction.RESTART_TASK, JobAction.RESTART_POD, JobAction.RESTART_PARTITION)
KILL_TO: dict[str, JobPhase] = {
    JobAction.ABORT_JOB: JobPhase.ABORTING,
    JobAction.TERMINATE_JOB: JobPhase.TERMINATING,
    JobAction.COMPLETE_JOB: JobPhase.COMPLETING,
}
SETTLE_TO: dict[str, JobPhase] = {
    JobPhase.ABORTING: JobPhase.ABORTED,
    JobPhase.TERMINATING: JobPhase.TERMINATED,
    JobPhase.COMPLETING: JobPhase.COMPLETED,
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


def _events(policy: LifecyclePolicy) -> set[str]:
    return set(policy.events) | ({policy.event} if policy.event else set())


TERMINATING = "Terminating"  # a pod whose deletion is pending, as the Job status counts it
PHASES = (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.UNKNOWN, TERMINATING)
_PHASE_ORDER = {p: i for i, p in enumerate(PHASES)}


class _Tally:
    """A job's pod counts, kept up to date from pod events (never re-derived from all pods).

    ``counts``/``tasks`` count pods by the phase the job status reports (Terminating when a
    deletion is pending); ``raw`` counts each task's pods by ``status.phase``; ``indices``
    counts each task's pods by their task-index label.
    """

    __slots__ = ("seen", "counts", "tasks", "raw", "indices", "task_status", "dirty", "written")

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str, str, int | None]] = {}  # pod name -> (task, counted, raw, index)
        self.counts: dict[str, int] = dict.fromkeys(PHASES, 0)
        self.tasks: dict[str, dict[str, int]] = {}
        self.raw: dict[str, dict[str, int]] = {}
        self.indices: dict[str, dict[int, int]] = {}
        self.task_status: dict[str, dict[str, dict[str, int]]] = {}
        self.dirty = False  # task_status to rebuild
        self.written: JobStatus | None = None  # the status object the counts were last written into

    def put(self, pod: Pod) -> None:
        meta = pod.metadata
        labels = meta.labels
        raw = pod.status.phase
        counted = TERMINATING if meta.deletion_timestamp is not None else raw
        task = labels.get(TASK_SPEC_KEY, "")
        index = _int(labels.get(TASK_INDEX_KEY))
        entry = (task, counted, raw, index)
        seen = self.seen
        prev = seen.get(meta.name)
        if prev == entry:
            return
        seen[meta.name] = entry
        if prev is None:
            self._add(entry, 1)
            return
        if prev[0] != task or prev[3] != index:
            self._add(prev, -1)
            self._add(entry, 1)
            return
        # The same task and index (a pod's phase changed): what _add(prev, -1) then _add(entry, 1)
        # do, in the same order, without the index count that would go down and up again.
        before, before_raw = prev[1], prev[2]
        counts, by_phase, by_raw = self.counts, self.tasks[task], self.raw[task]
        counts[before] = counts.get(before, 0) - 1
        _bump(by_phase, before, -1)
        _bump(by_raw, before_raw, -1)
        counts[counted] = counts.get(counted, 0) + 1
        _bump(by_phase, counted, 1)
        _bump(by_raw, raw, 1)
        self.dirty = True

    def drop(self, name: str) -> None:
        prev = self.seen.pop(name, None)
        if prev is not None:
            self._add(prev, -1)

    def _add(self, entry: tuple[str, str, str, int | None], n: int) -> None:
        task, counted, raw, index = entry
        self.counts[counted] = self.counts.get(counted, 0) + n
        _bump(self.tasks.setdefault(task, {}), counted, n)
        _bump(self.raw.setdefault(task, {}), raw, n)
        if index is not None:
            _bump(self.indices.setdefault(task, {}), index, n)
        self.dirty = True

    def task_pods(self, task: str) -> int:
        return sum(self.raw.get(task, {}).values())

    def task_phase(self, task: str, *phases: str) -> int:
        raw = self.raw.get(task)
        return sum(raw.get(p, 0) for p in phases) if raw else 0

    def phase(self, *phases: str) -> int:
        """Pods (of every task) whose ``status.phase`` is one of ``phases``."""
        return sum(raw.get(p, 0) for raw in self.raw.values() for p in phases)

    def status(self) -> dict[str, dict[str, dict[str, int]]]:
        """Job status ``taskStatusCount``: a new dict when a count changed, else the same one."""
        if self.dirty:
            self.task_status = {
                t: {"phase": {p: c[p] for p in sorted(c, key=lambda p: _PHASE_ORDER.get(p, len(PHASES)))}}
                for t, c in sorted(self.tasks.items())
                if c
            }
            self.dirty = False
        return self.task_status


def _bump(counts: dict[K, int], key: K, n: int) -> None:
    v = counts.get(key, 0) + n
    if v:
        counts[key] = v
    else:
        counts.pop(key, None)


class JobController(Controller):
    def __init__(self, store: Store, clock: Clock, priority_of: Callable[[str | None], int] | None = None) -> None:
        super().__init__(store, clock)
        self.priority_of = priority_of or (lambda name: 0)
        # Called as on_phase(job, previous phase, new phase, time) on every phase change ("" before the
        # first): the simulator keeps each job's history for its report; the controller keeps none,
        # as it also runs on a cluster for ever.
        self.on_phase: Callable[[Job, str, str, float], None] | None = None
        # Everything below is per live object and dropped when the object goes.
        self.pods_by_job: dict[str, dict[str, Pod]] = {}
        self.tallies: dict[str, _Tally] = {}  # job key -> pod counts, from pod events
        self.requests: dict[str, list[Request]] = {}
        self.pod_phase: dict[str, str] = {}  # pod uid -> last phase seen
        self.killing: set[str] = set()  # uids of pods this controller deleted
        self.task_restarts: dict[str, dict[str, int]] = {}  # job key -> task -> restarts
        self.pg_phase: dict[str, str] = {}
        self.podgroups_of: dict[str, dict[str, None]] = {}  # job key -> keys of the PodGroups it owns
        self.specs: dict[
            str, tuple[Any, dict[str, Any]]
        ] = {}  # last accepted spec per job (to tell updates from status writes)
        self._templates: dict[
            str, dict[str, tuple[tuple[Any, ...], Pod, list[str]]]
        ] = {}  # job key -> task -> pod template
        self._name_sets: dict[str, dict[str, frozenset[str]]] = {}  # job key -> task -> its pods' names
        self.name_conflicts: set[tuple[str, str]] = set()  # (job key, pod name) another object holds
        self.forbidden: dict[str, dict[str, str]] = {}  # namespace -> job key -> why a pod create was refused
        # (Job resourceVersion, lavaflow.io/* annotations, the ``specs`` entry and all annotations
        # they were worked out from) last copied to the PodGroup
        self._elastic_seen: dict[str, tuple[str, dict[str, str], Any, dict[str, str]]] = {}
        self._timer_tokens: dict[int, tuple[str, str]] = {}  # live delayed actions: token -> (job, scope)
        self._transitions = 0  # phase changes made so far (a sync tells whether it made any)
        # Jobs whose status the controller is writing with the phase unmoved (their write's own
        # event needs no reconcile); the write may be applied after sync returns (update_later).
        self._own_writes: set[str] = set()
        self._next_token = 0
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", self._on_pg)
        store.watch("Command", self._on_command)

    # ------------------------------------------------------------------ events
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
                if _is_vcjob(ref):
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
            elif _resized_out(pod):
                # The elastic scheduler shrank the job: the pod comes back as a pending worker
                # (no PodEvicted policy, no restart).
                self.mark(key)
            elif before in ALIVE:
                version = _int(meta.annotations.get(JOB_VERSION_KEY))
                self._request(
                    key, Request(JobEvent.POD_EVICTED, labels.get(TASK_SPEC_KEY, ""), pod_name, version=version)
                )
            else:
                self.mark(key)
            return
        pods = self.pods_by_job.get(key)
        if pods is None:
            pods = self.pods_by_job[key] = {}
            tally = self.tallies[key] = _Tally()
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
        if event == "ADDED" or now == PodPhase.PENDING:
            event = JobEvent.POD_PENDING
        elif now == PodPhase.RUNNING:
            event = JobEvent.POD_RUNNING
        elif now == PodPhase.FAILED:
            if _resized_out(pod):
                # a worker the elastic scheduler took away, ending before it is gone (torchrun
                # exits 1 on the resize's SIGTERM): not a failure for the job's policies
                self.mark(key)
                return
            version = _int(meta.annotations.get(JOB_VERSION_KEY))
            task = labels.get(TASK_SPEC_KEY, "")
            self._request(key, Request(JobEvent.POD_FAILED, task, pod_name, pod.status.exit_code, version=version))
            return
        elif now == PodPhase.SUCCEEDED:
            event = JobEvent.POD_SUCCEEDED
        else:
            self.mark(key)
            return
        version = _int(meta.annotations.get(JOB_VERSION_KEY))
        self._request(key, Request(event, labels.get(TASK_SPEC_KEY, ""), pod_name, None, None, version))

    def _on_pg(self, event: str, pg: PodGroup, old: PodGroup | None) -> None:
        for ref in pg.metadata.owner_references:
            if _is_vcjob(ref):
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
                if phase == PodGroupPhase.UNKNOWN and before != PodGroupPhase.UNKNOWN:
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

    def timer_fired(self, key: str, payload: Any) -> None:
        req, token = payload
        if token in self._timer_tokens:
            del self._timer_tokens[token]
            self.requests.setdefault(key, []).append(req)

    # ------------------------------------------------------------------ helpers
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

    def _set_phase(self, job: Job, phase: str, reason: str = "", message: str = "") -> None:
        if job.status.state.phase == phase:
            return
        phase = str(phase)  # (a JobPhase: the object and whatever reads it get the plain string)
        now = self.clock()
        previous = job.status.state.phase
        job.status.state.phase = phase
        self._transitions += 1
        job.status.state.reason = str(reason) if reason else None
        job.status.state.message = message or None
        job.status.state.last_transition_time = now
        if self.on_phase is not None:
            self.on_phase(job, previous, phase, now)
        if phase in JOB_FINAL_PHASES:
            # A finished job releases its PodGroup, so its admission reserves nothing any more.
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
            self._cancel(job.key)

    def _min_resources(self, job: Job) -> dict[str, str]:
        """The requests of the pods a job needs at its minimum (Volcano's calcPGMinResources).

        Tasks by priority. When minAvailable covers the tasks' own minimums, each task's
        minAvailable pods come first and the rest of minAvailable is filled from the
        remaining replicas; otherwise (a minAvailable below the tasks' minimums, e.g. with
        dependsOn) the first minAvailable pods are taken.
        """
        tasks = sorted(
            job.spec.tasks,
            key=lambda t: -self.priority_of(t.template.spec.priority_class_name or job.spec.priority_class_name),
        )
        remaining = job.spec.min_available
        counts = [0] * len(tasks)
        if remaining >= sum(min(task_min(t), t.replicas) for t in tasks):
            for i, t in enumerate(tasks):
                counts[i] = min(task_min(t), t.replicas)
                remaining -= counts[i]
        for i, t in enumerate(tasks):
            if remaining <= 0:
                break
            n = min(t.replicas - counts[i], remaining)
            counts[i] += n
            remaining -= n
        total: dict[str, Decimal] = {}
        for t, n in zip(tasks, counts):
            if n <= 0:
                continue
            for k, v in pod_requests(t.template.spec).items():
                total[k] = total.get(k, Decimal(0)) + Decimal(repr(v)) * n
            total["pods"] = total.get("pods", Decimal(0)) + n
        return {k: format(v.normalize(), "f") for k, v in total.items()}

    def _pg_spec(self, job: Job) -> dict[str, Any]:
        return {
            "minMember": job.spec.min_available,
            "minTaskMember": {t.name: task_min(t) for t in job.spec.tasks},
            "queue": job.spec.queue or "default",
            "priorityClassName": job.spec.priority_class_name,
            "minResources": self._min_resources(job),
            "networkTopology": job.spec.network_topology.dump() if job.spec.network_topology else None,
        }

    def _ensure_podgroup(self, job: Job) -> PodGroup:
        key = f"{job.namespace}/{podgroup_name(job)}"
        existing: PodGroup | None = self.store.get("PodGroup", key)
        if existing is not None:
            return existing
        pg = PodGroup.model_validate(
            {
                "metadata": {
                    "name": podgroup_name(job),
                    "namespace": job.namespace,
                    "labels": dict(job.metadata.labels),
                    "annotations": self._pg_annotations(job),
                    "ownerReferences": [_owner_ref(job)],
                },
                "spec": self._pg_spec(job),
            }
        )
        created: PodGroup = self.store.create_later(pg)  # (on a cluster, sent while the sync goes on)
        return created

    def _template(self, job: Job, task: TaskSpec) -> tuple[Pod, list[str]]:
        """The job's pod for ``task`` without its index (validated once), and the task's pod names."""
        st = job.status
        sig = (
            task,
            task.replicas,
            job.metadata.uid,
            st.version,
            st.retry_count,
            job.spec.queue,
            job.spec.scheduler_name,
            job.spec.priority_class_name,
        )
        per_job = self._templates.get(job.key)
        if per_job is None:
            per_job = self._templates[job.key] = {}
        cached = per_job.get(task.name)
        if cached is not None and cached[0] == sig:
            return cached[1], cached[2]
        pod = self._validated_pod(job, task, 0)
        names = [pod_name(job, task, i) for i in range(task.replicas)]
        per_job[task.name] = (sig, pod, names)
        self._name_sets.setdefault(job.key, {})[task.name] = frozenset(names)
        return pod, names

    def _new_pod(self, job: Job, task: TaskSpec, index: int, template: tuple[Pod, list[str]] | None = None) -> Pod:
        """Pod ``index`` of ``task``: a copy of the task's template, not validated again field by field.

        ``template``: what :meth:`_template` returned for the task, if the caller has it already.
        """
        base, names = template if template is not None else self._template(job, task)
        bm = base.metadata
        labels = dict(bm.labels)
        annotations = dict(bm.annotations)
        labels[TASK_INDEX_KEY] = annotations[TASK_INDEX_KEY] = str(index)
        meta = clone(
            bm,
            {
                "name": names[index] if index < len(names) else pod_name(job, task, index),
                "labels": labels,
                "annotations": annotations,
                # a new list of the template's references: nothing changes a reference in place
                "owner_references": list(bm.owner_references),
            },
        )
        # Shallow copy of the template's spec: plugins replace (never mutate) what they change.
        pod = clone(
            base, {"metadata": meta, "spec": clone(base.spec, {}), "status": clone(_BLANK_STATUS, {"conditions": []})}
        )
        if job.spec.plugins:
            for plugin in plugins_for(job):
                plugin.on_pod_create(job, task, index, pod)
        return pod

    def _validated_pod(self, job: Job, task: TaskSpec, index: int) -> Pod:
        tmpl = task.template
        labels = dict(tmpl.metadata.labels)
        labels.update(
            {
                TASK_INDEX_KEY: str(index),
                JOB_NAME_KEY: job.name,
                TASK_SPEC_KEY: task.name,
                JOB_NAMESPACE_KEY: job.namespace,
                QUEUE_NAME_KEY: job.spec.queue or "default",
            }
        )
        annotations = dict(tmpl.metadata.annotations)
        annotations.update(
            {
                TASK_INDEX_KEY: str(index),
                TASK_SPEC_KEY: task.name,
                GROUP_NAME_ANNOTATION: podgroup_name(job),
                JOB_NAME_KEY: job.name,
                QUEUE_NAME_KEY: job.spec.queue or "default",
                JOB_VERSION_KEY: str(job.status.version),
                TEMPLATE_UID_KEY: f"{job.name}-{task.name}",
                JOB_RETRY_COUNT_KEY: str(job.status.retry_count),
            }
        )
        if task.topology_policy:
            annotations[NUMA_POLICY_KEY] = task.topology_policy
        pod = Pod.model_validate(
            {
                "metadata": {
                    "name": pod_name(job, task, index),
                    "namespace": job.namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [_owner_ref(job)],
                }
            }
        )
        # Shallow copy of the template's spec: plugins replace (never mutate) what they change.
        pod.spec = tmpl.spec.model_copy()
        if not pod.spec.scheduler_name:
            pod.spec.scheduler_name = job.spec.scheduler_name
        if not pod.spec.priority_class_name and job.spec.priority_class_name:
            pod.spec.priority_class_name = job.spec.priority_class_name
        return pod

    def _kill(
        self, job: Job, pods: dict[str, Pod], keep_finished: bool, only: Callable[[Pod], bool] | None = None
    ) -> int:
        """Delete pods (all, or those ``only`` accepts); finished pods are kept when asked."""
        if keep_finished and only is None and pods is self.pods_by_job.get(job.key):
            tally = self.tallies[job.key]
            if len(pods) == tally.phase(*FINISHED):
                return 0
        n = 0
        for name in sorted(pods):
            p = pods[name]
            if only is not None and not only(p):
                continue
            if keep_finished and p.status.phase in FINISHED:
                continue
            self.killing.add(p.metadata.uid)
            self.store.delete("Pod", p.key)
            n += 1
        return n

    def _last_retry(self, job: Job) -> bool:
        return job.status.retry_count >= job.spec.max_retry - 1

    # ------------------------------------------------------------------ reconcile
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
            self.tallies[key] = _Tally()
        before = _snapshot(job.status)
        transitions = self._transitions
        if not job.status.state.phase:
            self._initiate(job)
        reqs = self.requests.pop(key, [])
        reqs.append(Request(JobEvent.OUT_OF_SYNC))
        last = len(reqs) - 1
        plain = [self._plain_sync(job, r) for r in reqs]
        for i, req in enumerate(reqs):
            if i < last and plain[i] and plain[i + 1]:
                # A pod created or started, followed by another plain sync: SyncJob converges in
                # one pass, so only the last of a run of them is executed.
                if req.event == JobEvent.POD_RUNNING:
                    self._cancel(job.key, f"pod/{req.pod}")
                continue
            self._handle(job, pods, req)
        if job.spec.plugins:
            pods_changed(job, pods, self.store)
        if _snapshot(job.status) != before:
            if self._transitions == transitions:
                self._own_writes.add(key)
            try:
                if self.store.update_later(job) is not None:  # applied at once: its event is past
                    self._own_writes.discard(key)
            except BaseException:
                self._own_writes.discard(key)
                raise

    def _cleanup(self, key: str, pods: dict[str, Pod]) -> None:
        for p in list(pods.values()):
            self.killing.add(p.metadata.uid)
            self.store.delete("Pod", p.key)
        for pg_key in list(self.podgroups_of.get(key, ())):
            self.store.delete("PodGroup", pg_key)
        ns, _, name = key.partition("/")
        for kind, suffix in (("Service", ""), ("ConfigMap", "-svc"), ("Secret", "-ssh")):
            self.store.delete(kind, f"{ns}/{name}{suffix}")
        job_gone(self.store, ns, name)
        self._cancel(key)
        self.requests.pop(key, None)
        # Forget the job: nothing kept per job outlives it.
        if not self.pods_by_job.get(key):
            self.pods_by_job.pop(key, None)
            self.tallies.pop(key, None)
        self.task_restarts.pop(key, None)
        self._templates.pop(key, None)
        self._name_sets.pop(key, None)
        self._elastic_seen.pop(key, None)

    def _initiate(self, job: Job) -> None:
        self._set_phase(job, JobPhase.PENDING)
        job.status.min_available = job.spec.min_available
        for plugin in plugins_for(job):
            plugin.on_job_add(job, self.store)
        self._ensure_podgroup(job)

    def _resolve(self, job: Job, req: Request) -> tuple[str, float | None]:
        """The action for a request (task policies first) and its delay, if any."""
        if req.action is not None:
            return req.action, None
        if req.event in (JobEvent.OUT_OF_SYNC, JobEvent.POD_RUNNING, JobEvent.POD_SUCCEEDED):
            return SYNC, None
        if req.version is not None and req.version != job.status.version:
            return SYNC, None  # an event of an older incarnation
        task = next((t for t in job.spec.tasks if t.name == req.task), None)
        levels = ([task.policies] if task is not None else []) + [job.spec.policies]
        for policies in levels:
            for pol in policies:
                events = _events(pol)
                if pol.exit_code is not None:
                    if req.event == JobEvent.POD_FAILED and req.exit_code == pol.exit_code:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event == JobEvent.POD_PENDING:
                    if JobEvent.POD_PENDING in events and pol.timeout:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event in events or (JobEvent.ANY in events and req.event != JobEvent.POD_PENDING):
                    return pol.action or SYNC, _timeout(pol)
        return SYNC, None

    def _plain_sync(self, job: Job, req: Request) -> bool:
        """A request whose whole effect is SyncJob, at once (no policy, no delay)."""
        return (
            req.event in (JobEvent.POD_PENDING, JobEvent.POD_RUNNING, JobEvent.OUT_OF_SYNC)
            and req.action is None
            and self._resolve(job, req) == (SYNC, None)
        )

    def _handle(self, job: Job, pods: dict[str, Pod], req: Request) -> None:
        # Derived events: a task completed, or a task failed beyond its retries.
        if req.event == JobEvent.POD_SUCCEEDED and self._task_completed(job, req.task, pods):
            req = Request(JobEvent.TASK_COMPLETED, req.task, req.pod, version=req.version)
        if req.event == JobEvent.POD_FAILED:
            task = next((t for t in job.spec.tasks if t.name == req.task), None)
            if (
                task is not None
                and task.max_retry != -1
                and self.task_restarts.get(job.key, {}).get(task.name, 0) >= task.max_retry
            ):
                action, delay = self._resolve(
                    job, Request(JobEvent.TASK_FAILED, req.task, req.pod, version=req.version)
                )
                if action != SYNC:
                    req = Request(JobEvent.TASK_FAILED, req.task, req.pod, version=req.version)
        if req.event in (JobEvent.POD_RUNNING,) or (req.event == JobEvent.POD_SUCCEEDED):
            self._cancel(job.key, f"pod/{req.pod}")
        if (
            req.event == JobEvent.POD_PENDING
            and req.pod
            and req.pod in pods
            and str(pods[req.pod].status.phase) != PodPhase.PENDING
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
        self._execute(job, pods, action, req)

    def _task_completed(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None or task.replicas == 0:
            return False
        tally = self.tallies[job.key]
        mine = tally.task_pods(task_name)
        return mine >= task.replicas and tally.task_phase(task_name, PodPhase.SUCCEEDED) == mine

    def _execute(self, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
        phase = job.status.state.phase
        if phase in JOB_FINAL_PHASES and not (phase == JobPhase.ABORTED and action == JobAction.RESUME_JOB):
            # Aborted is final for reporting, but a ResumeJob still restarts it (Volcano's aborted state).
            self._kill(job, pods, keep_finished=True)
            self._counts(job, pods)
            return
        if action in RESTARTS:
            if phase in (JobPhase.PENDING, JobPhase.RUNNING, JobPhase.RESTARTING):
                self._restart(job, pods, action, req, bump=phase != JobPhase.RESTARTING)
            else:
                self._kill(job, pods, keep_finished=True)
        elif action in KILL_TO:
            if phase in (JobPhase.PENDING, JobPhase.RUNNING, JobPhase.RESTARTING):
                self._kill(job, pods, keep_finished=True)
                self._set_phase(job, KILL_TO[action], action)
            else:
                self._kill(job, pods, keep_finished=True)
        elif action == JobAction.RESUME_JOB:
            if phase in (JobPhase.ABORTING, JobPhase.ABORTED):
                job.status.retry_count += 1
                self._set_phase(job, JobPhase.RESTARTING, JobAction.RESUME_JOB)
        elif action == JobAction.ENQUEUE_JOB or action == SYNC:
            pass
        self._sync(job, pods)

    def _restart(self, job: Job, pods: dict[str, Pod], action: str, req: Request, bump: bool) -> None:
        keep = self._last_retry(job)
        if action == JobAction.RESTART_JOB:
            self._kill(job, pods, keep_finished=keep)
            job.status.version += 1
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
        elif action in (JobAction.RESTART_TASK, JobAction.RESTART_PARTITION):
            self._kill(job, pods, keep_finished=keep, only=lambda p: p.metadata.labels.get(TASK_SPEC_KEY) == req.task)
            restarts = self.task_restarts.setdefault(job.key, {})
            restarts[req.task] = restarts.get(req.task, 0) + 1
        else:  # RestartPod
            self._kill(job, pods, keep_finished=False, only=lambda p: p.name == req.pod)
            restarts = self.task_restarts.setdefault(job.key, {})
            restarts[req.task] = restarts.get(req.task, 0) + 1
        if bump:
            job.status.retry_count += 1
        self._set_phase(job, JobPhase.RESTARTING, action)

    def _sync(self, job: Job, pods: dict[str, Pod]) -> None:
        """Volcano's SyncJob for the job's current phase."""
        phase = job.status.state.phase
        counts = self._counts(job, pods)
        if phase in SETTLE_TO:
            if self.tallies[job.key].phase(*ALIVE):
                alive = {n: p for n, p in pods.items() if p.status.phase in ALIVE}
                self._kill(job, alive, keep_finished=True)
            else:
                self._set_phase(job, SETTLE_TO[phase])
            return
        if phase == JobPhase.ABORTED or phase in JOB_FINAL_PHASES:
            return
        if phase == JobPhase.RESTARTING:
            if job.status.retry_count >= job.spec.max_retry:
                self._kill(job, pods, keep_finished=True)
                self._set_phase(
                    job,
                    JobPhase.FAILED,
                    "MaxRetryExceeded",
                    f"job restarted {job.status.retry_count} times (maxRetry {job.spec.max_retry})",
                )
                return
            total = sum(t.replicas for t in job.spec.tasks)
            if total - counts[TERMINATING] >= job.spec.min_available:
                self._set_phase(job, JobPhase.PENDING)
                phase = JobPhase.PENDING
            else:
                return
        pg = self._ensure_podgroup(job)
        self._sync_elastic_annotations(job, pg)
        if pg.status.phase not in ("", PodGroupPhase.PENDING):
            self._create_pods(job, pods)
            counts = self._counts(job, pods)
        if phase == JobPhase.PENDING:
            started = counts[PodPhase.RUNNING] + counts[PodPhase.SUCCEEDED] + counts[PodPhase.FAILED]
            total = sum(t.replicas for t in job.spec.tasks)
            if (total == 0) or (started >= job.spec.min_available and started > 0):
                self._set_phase(job, JobPhase.RUNNING)
                phase = JobPhase.RUNNING
        if phase == JobPhase.RUNNING:
            self._running(job, pods, counts)

    def _running(self, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> None:
        total = sum(t.replicas for t in job.spec.tasks)
        if total == 0:
            return
        if job.spec.min_success is not None and counts[PodPhase.SUCCEEDED] >= job.spec.min_success:
            self._kill(job, pods, keep_finished=True)
            self._set_phase(
                job,
                JobPhase.COMPLETING,
                "MinSuccess",
                f"{counts['Succeeded']} pods succeeded (minSuccess {job.spec.min_success})",
            )
            if not self.tallies[job.key].phase(*ALIVE):
                self._set_phase(job, JobPhase.COMPLETED)
            return
        if (
            counts[PodPhase.RUNNING] == 0
            and counts[PodPhase.SUCCEEDED] > 0
            and counts[PodPhase.FAILED] == 0
            and elastic_spec.has_speed_model(job.metadata.annotations)
            and elastic_spec.job_shape(job) is not None
        ):
            # An elastic training job is done when its running workers finished their work:
            # workers it never needed (still pending) go.
            self._kill(job, pods, keep_finished=True)
            self._set_phase(job, JobPhase.COMPLETED)
            return
        created = (
            counts[PodPhase.PENDING] + counts[PodPhase.RUNNING] + counts[PodPhase.SUCCEEDED] + counts[PodPhase.FAILED]
        )
        if created >= total and counts[PodPhase.PENDING] == 0 and counts[PodPhase.RUNNING] == 0:
            job_min = job.spec.min_available
            if job_min >= sum(task_min(t) for t in job.spec.tasks):
                for task in job.spec.tasks:
                    ok = self.tallies[job.key].task_phase(task.name, PodPhase.SUCCEEDED)
                    if ok < task_min(task):
                        self._set_phase(
                            job,
                            JobPhase.FAILED,
                            "TaskFailed",
                            f"task {task.name}: {ok} pods succeeded, {task_min(task)} required",
                        )
                        return
            if job.spec.min_success is not None:
                self._set_phase(
                    job,
                    JobPhase.FAILED,
                    "MinSuccessNotReached",
                    f"{counts['Succeeded']} pods succeeded (minSuccess {job.spec.min_success})",
                )
            elif counts[PodPhase.SUCCEEDED] >= job_min:
                self._set_phase(job, JobPhase.COMPLETED)
            else:
                self._set_phase(
                    job,
                    JobPhase.FAILED,
                    "NotEnoughSucceeded",
                    f"{counts['Succeeded']} pods succeeded, minAvailable {job_min}",
                )
            return
        if (
            counts[PodPhase.PENDING] > total - job.spec.min_available
            and counts[PodPhase.RUNNING] + counts[PodPhase.SUCCEEDED] < job.spec.min_available
        ):
            self._set_phase(job, JobPhase.PENDING)

    def _create_pods(self, job: Job, pods: dict[str, Pod]) -> None:
        tally = self.tallies[job.key]
        for task in job.spec.tasks:
            if task.depends_on and task.depends_on.name:
                deps = [self._task_ready(job, d, pods) for d in task.depends_on.name]
                if not (any(deps) if task.depends_on.iteration == "any" else all(deps)):
                    continue
            template = self._template(job, task)
            names = template[1]
            if not pods.keys() >= self._name_sets[job.key][task.name]:  # (usually all are there)
                missing = [
                    self._new_pod(job, task, i, template)
                    for i, name in enumerate(names)
                    if name not in pods and not self._taken(job, name)
                ]
                try:
                    self.store.create_many(missing)
                except Forbidden as exc:
                    # Refused by the API server's admission (a ResourceQuota): tried again when
                    # usage in the namespace goes down (retry_forbidden).
                    self.forbidden.setdefault(job.namespace, {})[job.key] = str(exc)
                else:
                    if missing and job.namespace in self.forbidden:
                        self.forbidden[job.namespace].pop(job.key, None)
            # Scale down: pods beyond replicas go.
            indices = tally.indices.get(task.name)
            if not indices or max(indices) < task.replicas:
                continue
            extra = [
                p
                for p in pods.values()
                if p.metadata.labels.get(TASK_SPEC_KEY) == task.name
                and (pod_index := _int(p.metadata.labels.get(TASK_INDEX_KEY))) is not None
                and pod_index >= task.replicas
            ]
            for p in extra:
                self.killing.add(p.metadata.uid)
                self.store.delete("Pod", p.key)

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

    def _taken(self, job: Job, name: str) -> bool:
        """Whether another object's pod already has this name (Volcano's names, <job>-<task>-<index>,
        can meet: Jobs a-b / task c and a / task b-c). Volcano ignores the API server's
        AlreadyExists and the pod stays missing; so here, said once instead of crashing."""
        if self.store.get("Pod", f"{job.namespace}/{name}") is None:
            return False
        if (job.key, name) not in self.name_conflicts:
            self.name_conflicts.add((job.key, name))
            log.warning("job %s: pod name %s is taken by another object; the pod is not created", job.key, name)
        return True

    def _pg_annotations(self, job: Job) -> dict[str, str]:
        out = {k: v for k, v in job.metadata.annotations.items() if not k.startswith("sim.")}
        if elastic_spec.has_speed_model(out):
            shape = elastic_spec.job_shape(job)
            if shape is not None:
                out[elastic_spec.WORKERS] = f"{shape[0]}-{shape[1]}"
        return out

    def _sync_elastic_annotations(self, job: Job, pg: PodGroup) -> None:
        """A running training job may update its speed / progress annotations (lavaflow.io/*) on
        the Job; the scheduler reads them from the PodGroup."""
        ann = job.metadata.annotations
        if not elastic_spec.has_speed_model(ann) and elastic_spec.PROGRESS not in ann:
            return
        version = job.metadata.resource_version
        seen = self._elastic_seen.get(job.key)
        accepted = self.specs.get(job.key)  # the spec as _on_job last accepted it (a new entry per change)
        if seen is not None and (
            (version and seen[0] == version) or (accepted is not None and seen[2] is accepted and seen[3] == ann)
        ):
            # The Job has not changed since its annotations were last copied, or only its status
            # did (the spec _on_job accepted then, and annotations equal to those copied from).
            return
        mine = {k: v for k, v in ann.items() if k.startswith(elastic_spec.PREFIX)}
        shape = elastic_spec.job_shape(job)
        if shape is not None:
            mine[elastic_spec.WORKERS] = f"{shape[0]}-{shape[1]}"
        # Only what changed on the Job since it was last copied (the PodGroup may hold newer
        # progress reports of its own, e.g. from the simulator).
        last = seen[1] if seen is not None else None
        self._elastic_seen[job.key] = (version or "", mine, accepted, dict(ann))
        changed = {k: v for k, v in mine.items() if last is None or last.get(k) != v}
        theirs = pg.metadata.annotations
        if not changed or all(theirs.get(k) == v for k, v in changed.items()):
            return
        pg.metadata.annotations = {**theirs, **changed}
        self.store.update(pg)

    def _task_ready(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        """dependsOn: a dependee counts once minAvailable of its pods run (or succeeded)."""
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None:
            return True
        return self.tallies[job.key].task_phase(task_name, PodPhase.RUNNING, PodPhase.SUCCEEDED) >= task_min(task)

    def _counts(self, job: Job, pods: dict[str, Pod]) -> dict[str, int]:
        """The job's pod counts (kept from pod events) written into its status where they differ."""
        tally = self.tallies[job.key]
        counts = tally.counts
        st = job.status
        if tally.written is st and not tally.dirty and st.task_status_count is tally.task_status:
            return counts
        for field, phase in _COUNT_FIELDS:
            if getattr(st, field) != counts[phase]:
                setattr(st, field, counts[phase])
        tsc = tally.status()
        if st.task_status_count is not tsc and st.task_status_count != tsc:
            st.task_status_count = tsc
        tally.written = st
        return counts

    # ------------------------------------------------------------------ updates
    def apply_update(self, new: Job) -> list[admission.Problem]:
        """A user's change to a job: only replicas, minAvailable and priorityClassName may change."""
        old = self.store.get("Job", new.key)
        if old is None:
            return [admission.Problem("metadata.name", f"job {new.key} does not exist")]
        problems = admission.validate_job_update(old, new)
        if problems:
            return problems
        old.spec = new.spec
        if old.spec.min_available != old.status.min_available:
            old.status.min_available = old.spec.min_available
        pg = self.store.get("PodGroup", f"{old.namespace}/{podgroup_name(old)}")
        if pg is not None:
            spec = self._pg_spec(old)
            pg.spec.min_member = spec["minMember"]
            pg.spec.min_task_member = spec["minTaskMember"]
            pg.spec.priority_class_name = spec["priorityClassName"]
            pg.spec.min_resources = PodGroup.model_validate(
                {"spec": {"minResources": spec["minResources"]}}
            ).spec.min_resources
            self.store.update(pg)
        for plugin in plugins_for(old):
            plugin.on_job_update(old, self.store)
        self.store.update(old)
        return []


def _resized_out(pod: Pod) -> bool:
    return pod.status.reason == elastic_spec.RESIZE_REASON or elastic_spec.RESIZED_OUT in pod.metadata.annotations


_BLANK_STATUS = PodStatus()
_COUNT_FIELDS = (
    ("pending", PodPhase.PENDING),
    ("running", PodPhase.RUNNING),
    ("succeeded", PodPhase.SUCCEEDED),
    ("failed", PodPhase.FAILED),
    ("unknown", PodPhase.UNKNOWN),
    ("terminating", TERMINATING),
)


def _status_layout() -> tuple[Callable[[dict[str, Any]], Any], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """JobStatus's fields by what their values are (judged from a blank status): scalars (one
    itemgetter), models, dicts and lists."""
    kinds: dict[str, list[str]] = {"scalar": [], "model": [], "dict": [], "list": []}
    for name, v in JobStatus().__dict__.items():
        t = type(v)
        kind = "dict" if t is dict else "list" if t is list else "model" if hasattr(t, "model_fields") else "scalar"
        kinds[kind].append(name)
    scalars = kinds["scalar"]
    return itemgetter(*scalars, scalars[0]), tuple(kinds["model"]), tuple(kinds["dict"]), tuple(kinds["list"])


_STATUS_SCALARS, _STATUS_MODELS, _STATUS_DICTS, _STATUS_LISTS = _status_layout()


def _snapshot(status: JobStatus) -> tuple[Any, ...]:
    """A job status's values, cheap to compare (containers copied one level, models by their fields)."""
    fields = status.__dict__
    return (
        _STATUS_SCALARS(fields),
        *[tuple(fields[n].__dict__.values()) for n in _STATUS_MODELS],
        *[dict(fields[n]) for n in _STATUS_DICTS],
        *[list(fields[n]) for n in _STATUS_LISTS],
    )


def generated_objects(job: Job) -> dict[str, list[str]]:
    """The objects the job's plugins create beside its pods (names, by kind), for reports."""
    plugins = job.spec.plugins
    return {
        "services": [job.name] if "svc" in plugins else [],
        "configMaps": ([f"{job.name}-svc"] if "svc" in plugins else []) + discovery_config_maps(job),
        "secrets": [f"{job.name}-ssh"] if "ssh" in plugins else [],
    }


def _is_vcjob(ref: OwnerReference) -> bool:
    return ref.kind == "Job" and ref.api_version.startswith("batch.volcano.sh")


def _owner_ref(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": job.api_version,
        "kind": "Job",
        "name": job.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _timeout(pol: LifecyclePolicy) -> float | None:
    if not pol.timeout:
        return None
    try:
        return admission.parse_duration(pol.timeout)
    except ValueError:
        return None
