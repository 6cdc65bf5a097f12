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

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..api import admission
from ..api.core import Pod
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
    PodGroup,
    TaskSpec,
)
from .base import Controller
from .job_plugins import plugins_for

ALIVE = ("Pending", "Running")
FINISHED = ("Succeeded", "Failed")
SYNC = "SyncJob"
JOB_ACTIONS = ("RestartJob", "AbortJob", "TerminateJob", "CompleteJob", "ResumeJob")
RESTARTS = ("RestartJob", "RestartTask", "RestartPod", "RestartPartition")
KILL_TO = {"AbortJob": "Aborting", "TerminateJob": "Terminating", "CompleteJob": "Completing"}
SETTLE_TO = {"Aborting": "Aborted", "Terminating": "Terminated", "Completing": "Completed"}


@dataclass
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


def _events(policy) -> set[str]:
    return set(policy.events) | ({policy.event} if policy.event else set())


class JobController(Controller):
    def __init__(self, store, clock, priority_of=None) -> None:
        super().__init__(store, clock)
        self.priority_of = priority_of or (lambda name: 0)
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.pods_by_job: dict[str, dict[str, Pod]] = {}
        self.requests: dict[str, list[Request]] = {}
        self.pod_phase: dict[str, str] = {}  # pod uid -> last phase seen
        self.killing: set[str] = set()  # uids of pods this controller deleted
        self.task_restarts: dict[tuple[str, str], int] = {}
        self.generated: dict[str, dict[str, list[str]]] = {}
        self.pg_phase: dict[str, str] = {}
        self.specs: dict[str, dict] = {}  # last accepted spec per job (to tell updates from status writes)
        self._timer_tokens: dict[int, tuple[str, str]] = {}  # live delayed actions: token -> (job, scope)
        self._next_token = 0
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", self._on_pg)
        store.watch("Command", self._on_command)

    # ------------------------------------------------------------------ events
    def _request(self, key: str, req: Request) -> None:
        self.requests.setdefault(key, []).append(req)
        self.mark(key)

    def _on_job(self, event: str, job: Job, old) -> None:
        if event == "DELETED":
            self.mark(job.key)
            return
        spec = job.spec.model_dump()
        prev = self.specs.get(job.key)
        self.specs[job.key] = spec
        if prev is not None and prev != spec:
            self._request(job.key, Request("JobUpdated"))
        else:
            self.mark(job.key)

    def _job_key_of(self, obj) -> str | None:
        name = obj.metadata.labels.get(JOB_NAME_KEY) or obj.metadata.annotations.get(JOB_NAME_KEY)
        if name is None:
            for ref in obj.metadata.owner_references:
                if _is_vcjob(ref):
                    name = ref.name
        return f"{obj.namespace}/{name}" if name else None

    def _on_pod(self, event: str, pod: Pod, old) -> None:
        key = self._job_key_of(pod)
        if key is None:
            return
        pods = self.pods_by_job.setdefault(key, {})
        uid = pod.metadata.uid
        task = pod.metadata.labels.get(TASK_SPEC_KEY, "")
        version = _int(pod.metadata.annotations.get(JOB_VERSION_KEY))
        if event == "DELETED":
            if pods.get(pod.name) is pod:
                del pods[pod.name]
            before = self.pod_phase.pop(uid, None)
            if uid in self.killing:
                self.killing.discard(uid)
                self.mark(key)
            elif before in ALIVE:
                self._request(key, Request("PodEvicted", task, pod.name, version=version))
            else:
                self.mark(key)
            return
        pods[pod.name] = pod
        before = self.pod_phase.get(uid)
        now = pod.status.phase
        self.pod_phase[uid] = now
        if before == now:
            self.mark(key)
            return
        if event == "ADDED" or now == "Pending":
            self._request(key, Request("PodPending", task, pod.name, version=version))
        elif now == "Running":
            self._request(key, Request("PodRunning", task, pod.name, version=version))
        elif now == "Failed":
            self._request(key, Request("PodFailed", task, pod.name, pod.status.exit_code, version=version))
        elif now == "Succeeded":
            self._request(key, Request("PodSucceeded", task, pod.name, version=version))
        else:
            self.mark(key)

    def _on_pg(self, event: str, pg: PodGroup, old) -> None:
        for ref in pg.metadata.owner_references:
            if _is_vcjob(ref):
                key = f"{pg.namespace}/{ref.name}"
                before = self.pg_phase.get(pg.key)
                phase = "" if event == "DELETED" else pg.status.phase
                self.pg_phase[pg.key] = phase
                if phase == "Unknown" and before != "Unknown":
                    self._request(key, Request("Unknown"))
                else:
                    self.mark(key)

    def _on_command(self, event: str, cmd, old) -> None:
        if event == "DELETED":
            return
        target = cmd.target if isinstance(cmd.target, dict) else {}
        if target.get("kind") != "Job":
            return
        self.store.delete("Command", cmd.key)  # consumed at most once
        key = f"{cmd.namespace}/{target.get('name')}"
        if self.store.get("Job", key) is not None:
            self._request(key, Request("CommandIssued", action=cmd.action))

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
        now = self.clock()
        job.status.state.phase = phase
        job.status.state.reason = reason or None
        job.status.state.message = message or None
        job.status.state.last_transition_time = now
        self.history.setdefault(job.key, []).append({"phase": phase, "time": now})
        if phase in JOB_FINAL_PHASES:
            # A finished job releases its PodGroup, so its admission reserves nothing any more.
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
            self._cancel(job.key)

    def _min_resources(self, job: Job) -> dict[str, str]:
        """Requests of the first minAvailable pods, tasks by priority (Volcano's calcPGMinResources)."""
        tasks = sorted(
            job.spec.tasks,
            key=lambda t: -self.priority_of(t.template.spec.priority_class_name or job.spec.priority_class_name),
        )
        remaining = job.spec.min_available
        total: dict[str, Decimal] = {}
        for t in tasks:
            if remaining <= 0:
                break
            n = min(t.replicas, remaining)
            remaining -= n
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
        pg = self.store.get("PodGroup", key)
        if pg is not None:
            return pg
        pg = PodGroup.model_validate(
            {
                "metadata": {
                    "name": podgroup_name(job),
                    "namespace": job.namespace,
                    "labels": dict(job.metadata.labels),
                    "annotations": {k: v for k, v in job.metadata.annotations.items() if not k.startswith("sim.")},
                    "ownerReferences": [_owner_ref(job)],
                },
                "spec": self._pg_spec(job),
            }
        )
        return self.store.create(pg)

    def _new_pod(self, job: Job, task: TaskSpec, index: int) -> Pod:
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
        for plugin in plugins_for(job):
            plugin.on_pod_create(job, task, index, pod)
        return pod

    def _kill(self, job: Job, pods: dict[str, Pod], keep_finished: bool, only=None) -> int:
        """Delete pods (all, or those ``only`` accepts); finished pods are kept when asked."""
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
        job: Job | None = self.store.get("Job", key)
        pods = self.pods_by_job.setdefault(key, {})
        if job is None:
            self._cleanup(key, pods)
            return
        before = job.status.model_dump()
        if not job.status.state.phase:
            self._initiate(job)
        for req in self.requests.pop(key, []):
            self._handle(job, pods, req)
        self._handle(job, pods, Request("OutOfSync"))
        if job.status.model_dump() != before:
            self.store.update(job)

    def _cleanup(self, key: str, pods: dict[str, Pod]) -> None:
        for p in list(pods.values()):
            self.killing.add(p.metadata.uid)
            self.store.delete("Pod", p.key)
        for pg in self.store.list("PodGroup"):
            if any(_is_vcjob(r) and f"{pg.namespace}/{r.name}" == key for r in pg.metadata.owner_references):
                self.store.delete("PodGroup", pg.key)
        ns, _, name = key.partition("/")
        for kind, suffix in (("Service", ""), ("ConfigMap", "-svc"), ("Secret", "-ssh")):
            self.store.delete(kind, f"{ns}/{name}{suffix}")
        self._cancel(key)
        self.requests.pop(key, None)

    def _initiate(self, job: Job) -> None:
        self._set_phase(job, "Pending")
        job.status.min_available = job.spec.min_available
        for plugin in plugins_for(job):
            plugin.on_job_add(job, self.store)
        self.generated[job.key] = {
            "services": [job.name] if "svc" in job.spec.plugins else [],
            "configMaps": [f"{job.name}-svc"] if "svc" in job.spec.plugins else [],
            "secrets": [f"{job.name}-ssh"] if "ssh" in job.spec.plugins else [],
        }
        self._ensure_podgroup(job)

    def _resolve(self, job: Job, req: Request) -> tuple[str, float | None]:
        """The action for a request (task policies first) and its delay, if any."""
        if req.action is not None:
            return req.action, None
        if req.event in ("OutOfSync", "PodRunning", "PodSucceeded"):
            return SYNC, None
        if req.version is not None and req.version != job.status.version:
            return SYNC, None  # an event of an older incarnation
        task = next((t for t in job.spec.tasks if t.name == req.task), None)
        levels = ([task.policies] if task is not None else []) + [job.spec.policies]
        for policies in levels:
            for pol in policies:
                events = _events(pol)
                if pol.exit_code is not None:
                    if req.event == "PodFailed" and req.exit_code == pol.exit_code:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event == "PodPending":
                    if "PodPending" in events and pol.timeout:
                        return pol.action or SYNC, _timeout(pol)
                    continue
                if req.event in events or ("*" in events and req.event != "PodPending"):
                    return pol.action or SYNC, _timeout(pol)
        return SYNC, None

    def _handle(self, job: Job, pods: dict[str, Pod], req: Request) -> None:
        # Derived events: a task completed, or a task failed beyond its retries.
        if req.event == "PodSucceeded" and self._task_completed(job, req.task, pods):
            req = Request("TaskCompleted", req.task, req.pod, version=req.version)
        if req.event == "PodFailed":
            task = next((t for t in job.spec.tasks if t.name == req.task), None)
            if task is not None and task.max_retry != -1 and self.task_restarts.get((job.key, task.name), 0) >= task.max_retry:
                action, delay = self._resolve(job, Request("TaskFailed", req.task, req.pod, version=req.version))
                if action != SYNC:
                    req = Request("TaskFailed", req.task, req.pod, version=req.version)
        if req.event in ("PodRunning",) or (req.event == "PodSucceeded"):
            self._cancel(job.key, f"pod/{req.pod}")
        if req.event == "PodPending" and req.pod and req.pod in pods and pods[req.pod].status.phase != "Pending":
            return
        action, delay = self._resolve(job, req)
        if delay:
            self._delay(job.key, Request(req.event, req.task, req.pod, req.exit_code, action, req.version), delay, f"pod/{req.pod}" if req.pod else "job")
            return
        if action != SYNC:
            self._cancel(job.key)
        self._execute(job, pods, action, req)

    def _task_completed(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None or task.replicas == 0:
            return False
        mine = [p for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task_name]
        return len(mine) >= task.replicas and all(p.status.phase == "Succeeded" for p in mine)

    def _execute(self, job: Job, pods: dict[str, Pod], action: str, req: Request) -> None:
        phase = job.status.state.phase
        if phase in JOB_FINAL_PHASES and not (phase == "Aborted" and action == "ResumeJob"):
            # Aborted is final for reporting, but a ResumeJob still restarts it (Volcano's aborted state).
            self._kill(job, pods, keep_finished=True)
            self._counts(job, pods)
            return
        if action in RESTARTS:
            if phase in ("Pending", "Running", "Restarting"):
                self._restart(job, pods, action, req, bump=phase != "Restarting")
            else:
                self._kill(job, pods, keep_finished=True)
        elif action in KILL_TO:
            if phase in ("Pending", "Running", "Restarting"):
                self._kill(job, pods, keep_finished=True)
                self._set_phase(job, KILL_TO[action], action)
            else:
                self._kill(job, pods, keep_finished=True)
        elif action == "ResumeJob":
            if phase in ("Aborting", "Aborted"):
                job.status.retry_count += 1
                self._set_phase(job, "Restarting", "ResumeJob")
        elif action == "EnqueueJob" or action == SYNC:
            pass
        self._sync(job, pods)

    def _restart(self, job: Job, pods: dict[str, Pod], action: str, req: Request, bump: bool) -> None:
        keep = self._last_retry(job)
        if action == "RestartJob":
            self._kill(job, pods, keep_finished=keep)
            job.status.version += 1
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
        elif action in ("RestartTask", "RestartPartition"):
            self._kill(job, pods, keep_finished=keep, only=lambda p: p.metadata.labels.get(TASK_SPEC_KEY) == req.task)
            self.task_restarts[(job.key, req.task)] = self.task_restarts.get((job.key, req.task), 0) + 1
        else:  # RestartPod
            self._kill(job, pods, keep_finished=False, only=lambda p: p.name == req.pod)
            self.task_restarts[(job.key, req.task)] = self.task_restarts.get((job.key, req.task), 0) + 1
        if bump:
            job.status.retry_count += 1
        self._set_phase(job, "Restarting", action)

    def _sync(self, job: Job, pods: dict[str, Pod]) -> None:
        """Volcano's SyncJob for the job's current phase."""
        phase = job.status.state.phase
        counts = self._counts(job, pods)
        if phase in SETTLE_TO:
            alive = {n: p for n, p in pods.items() if p.status.phase in ALIVE}
            if alive:
                self._kill(job, alive, keep_finished=True)
            elif not any(p.status.phase in ALIVE for p in pods.values()):
                self._set_phase(job, SETTLE_TO[phase])
            return
        if phase == "Aborted" or phase in JOB_FINAL_PHASES:
            return
        if phase == "Restarting":
            if job.status.retry_count >= job.spec.max_retry:
                self._kill(job, pods, keep_finished=True)
                self._set_phase(job, "Failed", "MaxRetryExceeded", f"job restarted {job.status.retry_count} times (maxRetry {job.spec.max_retry})")
                return
            total = sum(t.replicas for t in job.spec.tasks)
            if total - counts["Terminating"] >= job.spec.min_available:
                self._set_phase(job, "Pending")
                phase = "Pending"
            else:
                return
        pg = self._ensure_podgroup(job)
        if pg.status.phase not in ("", "Pending"):
            self._create_pods(job, pods)
            counts = self._counts(job, pods)
        if phase == "Pending":
            started = counts["Running"] + counts["Succeeded"] + counts["Failed"]
            total = sum(t.replicas for t in job.spec.tasks)
            if (total == 0) or (started >= job.spec.min_available and started > 0):
                self._set_phase(job, "Running")
                phase = "Running"
        if phase == "Running":
            self._running(job, pods, counts)

    def _running(self, job: Job, pods: dict[str, Pod], counts: dict[str, int]) -> None:
        total = sum(t.replicas for t in job.spec.tasks)
        if total == 0:
            return
        if job.spec.min_success is not None and counts["Succeeded"] >= job.spec.min_success:
            self._kill(job, pods, keep_finished=True)
            self._set_phase(job, "Completing", "MinSuccess", f"{counts['Succeeded']} pods succeeded (minSuccess {job.spec.min_success})")
            if not any(p.status.phase in ALIVE for p in pods.values()):
                self._set_phase(job, "Completed")
            return
        created = counts["Pending"] + counts["Running"] + counts["Succeeded"] + counts["Failed"]
        if created >= total and counts["Pending"] == 0 and counts["Running"] == 0:
            job_min = job.spec.min_available
            if job_min >= sum(task_min(t) for t in job.spec.tasks):
                for task in job.spec.tasks:
                    ok = sum(1 for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task.name and p.status.phase == "Succeeded")
                    if ok < task_min(task):
                        self._set_phase(job, "Failed", "TaskFailed", f"task {task.name}: {ok} pods succeeded, {task_min(task)} required")
                        return
            if job.spec.min_success is not None:
                self._set_phase(job, "Failed", "MinSuccessNotReached", f"{counts['Succeeded']} pods succeeded (minSuccess {job.spec.min_success})")
            elif counts["Succeeded"] >= job_min:
                self._set_phase(job, "Completed")
            else:
                self._set_phase(job, "Failed", "NotEnoughSucceeded", f"{counts['Succeeded']} pods succeeded, minAvailable {job_min}")
            return
        if counts["Pending"] > total - job.spec.min_available and counts["Running"] + counts["Succeeded"] < job.spec.min_available:
            self._set_phase(job, "Pending")

    def _create_pods(self, job: Job, pods: dict[str, Pod]) -> None:
        for task in job.spec.tasks:
            if task.depends_on and task.depends_on.name:
                deps = [self._task_ready(job, d, pods) for d in task.depends_on.name]
                if not (any(deps) if task.depends_on.iteration == "any" else all(deps)):
                    continue
            for i in range(task.replicas):
                name = pod_name(job, task, i)
                if name not in pods:
                    self.store.create(self._new_pod(job, task, i))
            # Scale down: pods beyond replicas go.
            extra = [p for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task.name and _int(p.metadata.labels.get(TASK_INDEX_KEY)) is not None and _int(p.metadata.labels.get(TASK_INDEX_KEY)) >= task.replicas]
            for p in extra:
                self.killing.add(p.metadata.uid)
                self.store.delete("Pod", p.key)

    def _task_ready(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        """dependsOn: a dependee counts once minAvailable of its pods run (or succeeded)."""
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None:
            return True
        ok = sum(1 for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task_name and p.status.phase in ("Running", "Succeeded"))
        return ok >= task_min(task)

    def _counts(self, job: Job, pods: dict[str, Pod]) -> dict[str, int]:
        counts = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Unknown": 0, "Terminating": 0}
        per_task: dict[str, dict[str, int]] = {}
        for p in pods.values():
            phase = "Terminating" if p.metadata.deletion_timestamp is not None else p.status.phase
            counts[phase] = counts.get(phase, 0) + 1
            t = p.metadata.labels.get(TASK_SPEC_KEY, "")
            per_task.setdefault(t, {})
            per_task[t][phase] = per_task[t].get(phase, 0) + 1
        st = job.status
        st.pending, st.running, st.succeeded = counts["Pending"], counts["Running"], counts["Succeeded"]
        st.failed, st.unknown, st.terminating = counts["Failed"], counts["Unknown"], counts["Terminating"]
        st.task_status_count = {t: {"phase": c} for t, c in sorted(per_task.items())}
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
            pg.spec.min_resources = PodGroup.model_validate({"spec": {"minResources": spec["minResources"]}}).spec.min_resources
            self.store.update(pg)
        for plugin in plugins_for(old):
            plugin.on_job_update(old, self.store)
        self.store.update(old)
        return []


def _is_vcjob(ref) -> bool:
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


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _timeout(pol) -> float | None:
    if not pol.timeout:
        return None
    try:
        return admission.parse_duration(pol.timeout)
    except ValueError:
        return None
