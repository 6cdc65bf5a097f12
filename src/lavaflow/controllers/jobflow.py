"""JobFlow controller: a DAG of Volcano Jobs instantiated from JobTemplates.

Each flow becomes the Job ``<jobflow>-<flow>`` (the template's spec, with the
flow's patch merged in) once every job it depends on has Completed. The flow is
Succeed when all its jobs completed and Failed as soon as one failed or was
terminated/aborted.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ..api import admission
from ..api.volcano import Flow, Job, JobFlow, JobFlowPhase, JobPhase, JobTemplate
from .base import Controller

if TYPE_CHECKING:  # pragma: no cover
    from ..store.base import Store
    from .base import Clock


FAILED = (JobPhase.FAILED, JobPhase.TERMINATED, JobPhase.ABORTED)
NOT_STARTED = ("", JobPhase.PENDING)  # ("": its Job not created yet)


def merge_patch(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7386)."""
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_patch(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class JobFlowController(Controller):
    def __init__(self, store: Store, clock: Clock) -> None:
        super().__init__(store, clock)
        store.watch("JobFlow", lambda ev, jf, old: self.mark(jf.key) if ev != "DELETED" else self._deleted(jf))
        store.watch("Job", self._on_job)
        # A JobTemplate submitted after its JobFlow lets the waiting flows start.
        store.watch("JobTemplate", self._on_template)
        # JobFlow key -> (when, why) a flow's Job could not be created (reported, never silent).
        self.refused: dict[str, tuple[float, str]] = {}

    def _on_template(self, event: str, tmpl: JobTemplate, old: JobTemplate | None) -> None:
        for jf in self.store.list("JobFlow"):
            if jf.namespace == tmpl.namespace:
                self.mark(jf.key)

    def _on_job(self, event: str, job: Job, old: Job | None) -> None:
        for ref in job.metadata.owner_references:
            if ref.kind == "JobFlow":
                self.mark(f"{job.namespace}/{ref.name}")

    def _deleted(self, jf: JobFlow) -> None:
        if jf.spec.job_retain_policy == "delete":
            for flow in jf.spec.flows:
                self.store.delete("Job", f"{jf.namespace}/{jf.name}-{flow.name}")

    def sync(self, key: str) -> None:
        jf: JobFlow | None = self.store.get("JobFlow", key)
        if jf is None:
            return
        before = jf.status.model_dump()
        phases: dict[str, str] = {}
        for flow in jf.spec.flows:
            job = self.store.get("Job", f"{jf.namespace}/{jf.name}-{flow.name}")
            if job is None:
                deps = flow.depends_on.targets if flow.depends_on else []
                if all(phases.get(d) == JobPhase.COMPLETED or self._phase(jf, d) == JobPhase.COMPLETED for d in deps):
                    job = self._create(jf, flow)
            phases[flow.name] = job.status.state.phase if job is not None else ""
        st = jf.status
        names = {f.name: f"{jf.name}-{f.name}" for f in jf.spec.flows}
        st.pending_jobs = [names[n] for n, p in phases.items() if p in NOT_STARTED]
        st.running_jobs = [
            names[n] for n, p in phases.items() if p not in NOT_STARTED and p != JobPhase.COMPLETED and p not in FAILED
        ]
        st.completed_jobs = [names[n] for n, p in phases.items() if p == JobPhase.COMPLETED]
        st.failed_jobs = [names[n] for n, p in phases.items() if p == JobPhase.FAILED]
        st.terminated_jobs = [names[n] for n, p in phases.items() if p in (JobPhase.TERMINATED, JobPhase.ABORTED)]
        if any(p in FAILED for p in phases.values()):
            st.state.phase = JobFlowPhase.FAILED
        elif phases and all(p == JobPhase.COMPLETED for p in phases.values()):
            st.state.phase = JobFlowPhase.SUCCEED
        elif any(p for p in phases.values()):
            st.state.phase = JobFlowPhase.RUNNING
        else:
            st.state.phase = JobFlowPhase.PENDING
        if st.model_dump() != before:
            self.store.update(jf)

    def _phase(self, jf: JobFlow, flow: str) -> str:
        job = self.store.get("Job", f"{jf.namespace}/{jf.name}-{flow}")
        return job.status.state.phase if job is not None else ""

    def _create(self, jf: JobFlow, flow: Flow) -> Job | None:
        tmpl = self.store.get("JobTemplate", f"{jf.namespace}/{flow.name}")
        if tmpl is None:
            self.refused[jf.key] = (
                self.clock(),
                f"flow {flow.name!r}: no JobTemplate {flow.name!r} in namespace {jf.namespace}",
            )
            return None
        spec = tmpl.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        if flow.patch is not None and flow.patch.spec:
            spec = merge_patch(spec, flow.patch.spec)
        job = Job.model_validate(
            {
                "metadata": {
                    "name": f"{jf.name}-{flow.name}",
                    "namespace": jf.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": jf.api_version,
                            "kind": "JobFlow",
                            "name": jf.name,
                            "uid": jf.metadata.uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": spec,
            }
        )
        admission.default_job(job)
        problems = admission.validate_job(job, {q.name: q for q in self.store.list("Queue")})
        if problems:
            self.refused[jf.key] = (
                self.clock(),
                f"flow {flow.name!r}: Job {job.name} refused: "
                + "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems),
            )
            return None
        self.refused.pop(jf.key, None)
        created: Job = self.store.create(job)
        return created
