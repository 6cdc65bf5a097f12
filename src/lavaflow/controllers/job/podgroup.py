"""The job's PodGroup: made with the job (minMember, each task's minimum, minResources as
Volcano's calcPGMinResources, the queue, the Job's annotations) and changed with it; the
elastic training annotations (lavaflow.io/*) copied from the Job as they change."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ...api.selectors import pod_requests
from ...api.volcano import Job, PodGroup
from ...elastic import spec as elastic_spec
from .pods import PodsMixin
from .util import owner_ref, podgroup_name, task_min


class PodGroupMixin(PodsMixin):
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
            # The template as written: a limit stands for no request here (Volcano sums what the
            # quota evaluator reads from the task's template, which nothing has defaulted)
            for k, v in pod_requests(t.template.spec, defaulted=False).items():
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
                    "ownerReferences": [owner_ref(job)],
                },
                "spec": self._pg_spec(job),
            }
        )
        created: PodGroup = self.store.create_later(pg)  # (on a cluster, sent while the sync goes on)
        return created

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
