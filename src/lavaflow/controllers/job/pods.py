"""The job's pods: one validated pod per task as a template (made again when the task, the
job's version or retry count change), each pod copied from it with the job plugins' changes,
the missing pods created (after the tasks they depend on; again when a quota refused them;
never over a name another object holds) and pods beyond a task's replicas removed."""

from __future__ import annotations

import logging

from ...api.core import Pod, PodStatus
from ...api.meta import clone
from ...api.volcano import (
    GROUP_NAME_ANNOTATION,
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
    TaskSpec,
)
from ...store.base import Forbidden
from .plugins import plugins_for
from .status import StatusMixin
from .util import POD_RUNNING, POD_SUCCEEDED, owner_ref, pod_name, podgroup_name, task_min, to_int

log = logging.getLogger("lavaflow.controllers")

_BLANK_STATUS = PodStatus()


class PodsMixin(StatusMixin):
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
                and (pod_index := to_int(p.metadata.labels.get(TASK_INDEX_KEY))) is not None
                and pod_index >= task.replicas
            ]
            for p in extra:
                self.killing.add(p.metadata.uid)
                self.store.delete("Pod", p.key)

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

    def _task_ready(self, job: Job, task_name: str, pods: dict[str, Pod]) -> bool:
        """dependsOn: a dependee counts once minAvailable of its pods run (or succeeded)."""
        task = next((t for t in job.spec.tasks if t.name == task_name), None)
        if task is None:
            return True
        return self.tallies[job.key].task_phase(task_name, POD_RUNNING, POD_SUCCEEDED) >= task_min(task)

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
                    "ownerReferences": [owner_ref(job)],
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
