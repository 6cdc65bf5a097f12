"""Volcano Job controller.

Job -> PodGroup (created at once) -> pods ``<job>-<task>-<index>`` created only
once the PodGroup has left Pending (admission), respecting task ``dependsOn``;
job phases follow Volcano's state machine and lifecycle policies
(event/exitCode -> action, task-level before job-level).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..api.core import EnvVar, Pod
from ..api.selectors import pod_requests
from ..api.volcano import (
    GROUP_NAME_ANNOTATION,
    JOB_FINAL_PHASES,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_RETRY_COUNT_KEY,
    JOB_VERSION_KEY,
    QUEUE_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_KEY,
    Job,
    PodGroup,
    TaskSpec,
)
from .base import Controller

ALIVE = ("Pending", "Running")


def pod_name(job: Job, task: TaskSpec, index: int) -> str:
    return f"{job.name}-{task.name}-{index}"


def podgroup_name(job: Job) -> str:
    return f"{job.name}-{job.metadata.uid}"


class JobController(Controller):
    def __init__(self, store, clock, priority_of=None) -> None:
        super().__init__(store, clock)
        self.priority_of = priority_of or (lambda name: 0)
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.pods_by_job: dict[str, dict[str, Pod]] = {}
        self.pg_by_job: dict[str, str] = {}
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod)
        store.watch("PodGroup", self._on_pg)

    # ------------------------------------------------------------------ events
    def _on_job(self, event: str, job: Job, old) -> None:
        self.mark(job.key)

    def _job_key_of(self, obj) -> str | None:
        name = obj.metadata.labels.get(JOB_NAME_KEY) or obj.metadata.annotations.get(JOB_NAME_KEY)
        if name is None:
            for ref in obj.metadata.owner_references:
                if ref.kind == "Job" and ref.api_version.startswith("batch.volcano.sh"):
                    name = ref.name
        return f"{obj.namespace}/{name}" if name else None

    def _on_pod(self, event: str, pod: Pod, old) -> None:
        key = self._job_key_of(pod)
        if key is None:
            return
        pods = self.pods_by_job.setdefault(key, {})
        if event == "DELETED":
            pods.pop(pod.name, None)
        else:
            pods[pod.name] = pod
        self.mark(key)

    def _on_pg(self, event: str, pg: PodGroup, old) -> None:
        for ref in pg.metadata.owner_references:
            if ref.kind == "Job":
                self.mark(f"{pg.namespace}/{ref.name}")

    # ------------------------------------------------------------------ helpers
    def _set_phase(self, job: Job, phase: str, reason: str = "", message: str = "") -> None:
        if job.status.state.phase == phase:
            return
        if phase in JOB_FINAL_PHASES:
            # A finished job releases its PodGroup, so its admission no longer reserves room.
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
        now = self.clock()
        job.status.state.phase = phase
        job.status.state.reason = reason or None
        job.status.state.message = message or None
        job.status.state.last_transition_time = now
        self.history.setdefault(job.key, []).append({"phase": phase, "time": now})

    def _min_resources(self, job: Job) -> dict[str, str]:
        """Requests of the first minAvailable pods, tasks ordered by priority (Volcano's calcPGMinResources)."""
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
                    "ownerReferences": [
                        {
                            "apiVersion": job.api_version,
                            "kind": "Job",
                            "name": job.name,
                            "uid": job.metadata.uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "minMember": job.spec.min_available,
                    "minTaskMember": {t.name: (t.min_available if t.min_available is not None else t.replicas) for t in job.spec.tasks},
                    "queue": job.spec.queue or "default",
                    "priorityClassName": job.spec.priority_class_name,
                    "minResources": self._min_resources(job),
                },
            }
        )
        self.pg_by_job[job.key] = key
        return self.store.create(pg)

    def _new_pod(self, job: Job, task: TaskSpec, index: int) -> Pod:
        tmpl = task.template
        name = pod_name(job, task, index)
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
        spec = tmpl.spec.model_copy()  # shallow: containers below are the only per-pod change
        env = self._plugin_env(job, task, index)
        if env:
            spec.containers = [c.model_copy(update={"env": list(c.env) + env}) for c in spec.containers]
            spec.init_containers = [c.model_copy(update={"env": list(c.env) + env}) for c in spec.init_containers]
        if not spec.scheduler_name:
            spec.scheduler_name = job.spec.scheduler_name
        if not spec.priority_class_name and job.spec.priority_class_name:
            spec.priority_class_name = job.spec.priority_class_name
        return Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": job.namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [
                        {
                            "apiVersion": job.api_version,
                            "kind": "Job",
                            "name": job.name,
                            "uid": job.metadata.uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
            }
        ).model_copy(update={"spec": spec})

    def _plugin_env(self, job: Job, task: TaskSpec, index: int) -> list[EnvVar]:
        env: list[EnvVar] = []
        if "env" in job.spec.plugins:
            env.append(EnvVar(name="VK_TASK_INDEX", value=str(index)))
            env.append(EnvVar(name="VC_TASK_INDEX", value=str(index)))
        return env

    def _task_ready(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        """dependsOn: a dependee task counts once minAvailable of its pods run (or succeeded)."""
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None:
            return True
        need = task.min_available if task.min_available is not None else task.replicas
        ok = sum(
            1
            for p in pods.values()
            if p.metadata.labels.get(TASK_SPEC_KEY) == task_name and p.status.phase in ("Running", "Succeeded")
        )
        return ok >= need

    def _delete_pods(self, job: Job, pods: dict[str, Pod], keep_finished: bool) -> int:
        n = 0
        for name in sorted(pods):
            p = pods[name]
            if keep_finished and p.status.phase in ("Succeeded", "Failed"):
                continue
            self.store.delete("Pod", p.key)
            n += 1
        return n

    # ------------------------------------------------------------------ reconcile
    def sync(self, key: str) -> None:
        job: Job | None = self.store.get("Job", key)
        pods = self.pods_by_job.setdefault(key, {})
        if job is None:
            # Deleted: remove its pods and PodGroup.
            for p in list(pods.values()):
                self.store.delete("Pod", p.key)
            pg_key = self.pg_by_job.pop(key, None)
            if pg_key is not None:
                self.store.delete("PodGroup", pg_key)
            return
        if not job.status.state.phase:
            self._set_phase(job, "Pending")
            job.status.min_available = job.spec.min_available
            self._ensure_podgroup(job)
            self.store.update(job)
            return
        before = job.status.model_dump()
        self._reconcile(job, pods)
        if job.status.model_dump() != before:
            self.store.update(job)

    def _reconcile(self, job: Job, pods: dict[str, Pod]) -> None:
        phase = job.status.state.phase
        pg = self.store.get("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
        if phase in ("Completing", "Terminating", "Aborting"):
            alive = [p for p in pods.values() if p.status.phase in ALIVE]
            if alive:
                self._delete_pods(job, {p.name: p for p in alive}, keep_finished=True)
            else:
                self._set_phase(job, {"Completing": "Completed", "Terminating": "Terminated", "Aborting": "Aborted"}[phase])
            self._update_counts(job, pods)
            return
        if phase in JOB_FINAL_PHASES:
            self._update_counts(job, pods)
            return
        # Create pods once the PodGroup has been admitted.
        if pg is not None and pg.status.phase not in ("", "Pending"):
            for task in job.spec.tasks:
                if task.depends_on and task.depends_on.name:
                    deps = [self._task_ready(job, d, pods) for d in task.depends_on.name]
                    if not (any(deps) if task.depends_on.iteration == "any" else all(deps)):
                        continue
                for i in range(task.replicas):
                    name = pod_name(job, task, i)
                    if name not in pods:
                        self.store.create(self._new_pod(job, task, i))
        counts = self._update_counts(job, pods)
        action = self._policy_action(job, pods)
        if action is not None:
            self._apply_action(job, pods, action)
        else:
            self._advance(job, counts)

    def _update_counts(self, job: Job, pods: dict[str, Pod]) -> dict[str, int]:
        counts = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Unknown": 0}
        per_task: dict[str, dict[str, int]] = {}
        for p in pods.values():
            counts[p.status.phase] = counts.get(p.status.phase, 0) + 1
            t = p.metadata.labels.get(TASK_SPEC_KEY, "")
            per_task.setdefault(t, {})
            per_task[t][p.status.phase] = per_task[t].get(p.status.phase, 0) + 1
        st = job.status
        st.pending, st.running, st.succeeded = counts["Pending"], counts["Running"], counts["Succeeded"]
        st.failed, st.unknown = counts["Failed"], counts["Unknown"]
        st.task_status_count = {t: {"phase": c} for t, c in per_task.items()}
        return counts

    def _task_done(self, job: Job, task: TaskSpec, pods: dict[str, Pod]) -> bool:
        mine = [p for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task.name]
        return task.replicas > 0 and len(mine) == task.replicas and all(p.status.phase == "Succeeded" for p in mine)

    def _policy_action(self, job: Job, pods: dict[str, Pod]) -> str | None:
        """Task-level policies before job-level: the first one whose event has happened."""
        for task in job.spec.tasks:
            for pol in task.policies:
                if self._event_happened(job, task, pol, pods):
                    return pol.action
        for pol in job.spec.policies:
            for task in job.spec.tasks:
                if self._event_happened(job, task, pol, pods):
                    return pol.action
        return None

    def _event_happened(self, job: Job, task: TaskSpec, pol, pods: dict[str, Pod]) -> bool:
        events = set(pol.events) | ({pol.event} if pol.event else set())
        mine = [p for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task.name]
        if "TaskCompleted" in events and self._task_done(job, task, pods):
            return True
        failed = [p for p in mine if p.status.phase == "Failed"]
        if failed and ("PodFailed" in events or "*" in events):
            return True
        if pol.exit_code is not None and any(p.status.exit_code == pol.exit_code for p in failed):
            return True
        return False

    def _apply_action(self, job: Job, pods: dict[str, Pod], action: str | None) -> None:
        if action == "CompleteJob":
            self._set_phase(job, "Completing", "CompleteJob")
            self._delete_pods(job, pods, keep_finished=True)
        elif action == "TerminateJob":
            self._set_phase(job, "Terminating", "TerminateJob")
            self._delete_pods(job, pods, keep_finished=True)
        elif action == "AbortJob":
            self._set_phase(job, "Aborting", "AbortJob")
            self._delete_pods(job, pods, keep_finished=True)
        else:
            self._advance(job, self._update_counts(job, pods))
        if not any(p.status.phase in ALIVE for p in pods.values()):
            final = {"Completing": "Completed", "Terminating": "Terminated", "Aborting": "Aborted"}
            if job.status.state.phase in final:
                self._set_phase(job, final[job.status.state.phase])

    def _advance(self, job: Job, counts: dict[str, int]) -> None:
        """Volcano's default (SyncJob) transitions for Pending and Running jobs."""
        phase = job.status.state.phase
        total = sum(t.replicas for t in job.spec.tasks)
        started = counts["Running"] + counts["Succeeded"] + counts["Failed"]
        if phase == "Pending":
            if total == 0 or started >= job.spec.min_available and started > 0:
                self._set_phase(job, "Running")
                phase = "Running"
        if phase != "Running":
            return
        if job.spec.min_success is not None and counts["Succeeded"] >= job.spec.min_success:
            self._set_phase(job, "Completing", "minSuccess reached")
            pods = self.pods_by_job.get(job.key, {})
            self._delete_pods(job, pods, keep_finished=True)
            if not any(p.status.phase in ALIVE for p in pods.values()):
                self._set_phase(job, "Completed")
            return
        created = sum(counts.values())
        if total and created >= total and counts["Pending"] == 0 and counts["Running"] == 0:
            pods = self.pods_by_job.get(job.key, {})
            for task in job.spec.tasks:
                tmin = task.min_available if task.min_available is not None else task.replicas
                ok = sum(
                    1 for p in pods.values() if p.metadata.labels.get(TASK_SPEC_KEY) == task.name and p.status.phase == "Succeeded"
                )
                if ok < tmin and job.spec.min_available >= sum(
                    (t.min_available if t.min_available is not None else t.replicas) for t in job.spec.tasks
                ):
                    self._set_phase(job, "Failed", "TaskFailed", f"task {task.name}: {ok} succeeded, {tmin} required")
                    return
            if job.spec.min_success is not None:
                self._set_phase(job, "Failed", "minSuccess not reached")
            elif counts["Succeeded"] >= job.spec.min_available:
                self._set_phase(job, "Completed")
            else:
                self._set_phase(job, "Failed")
