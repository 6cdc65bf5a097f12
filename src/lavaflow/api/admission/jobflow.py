"""Volcano's flow.volcano.sh rules: a JobFlow's flows form a DAG; a JobTemplate holds a valid Job spec."""

from __future__ import annotations

from collections.abc import Container, Mapping

from ..validation import Problem
from ..volcano import Job, JobFlow, JobTemplate, Queue
from .job import default_job, validate_job


def validate_jobflow(jf: JobFlow, templates: Container[str] | None = None) -> list[Problem]:
    """Flows must name distinct flows, depend only on flows of the same JobFlow, and form a DAG.

    ``templates`` holds the ``namespace/name`` keys of the JobTemplates known to exist; when
    given, each flow must name one of them (a flow runs the JobTemplate of its name). When None
    (on a cluster, where a template may come later) that check is skipped.
    """
    problems: list[Problem] = []
    names = [f.name for f in jf.spec.flows]
    if not names:
        problems.append(Problem("spec.flows", "a JobFlow needs at least one flow"))
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            problems.append(Problem(f"spec.flows[{i}].name", f"flow {n!r} is listed twice"))
        seen.add(n)
    deps = {f.name: (f.depends_on.targets if f.depends_on else []) for f in jf.spec.flows}
    for i, f in enumerate(jf.spec.flows):
        for t in deps[f.name]:
            if t not in deps:
                problems.append(Problem(f"spec.flows[{i}].dependsOn.targets", f"unknown flow {t!r}"))
    if jf.spec.job_retain_policy not in ("retain", "delete"):
        problems.append(Problem("spec.jobRetainPolicy", f"{jf.spec.job_retain_policy!r} is not retain or delete"))
    # Cycle detection (depth-first, colours).
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> list[str] | None:
        state[n] = 1
        for d in deps.get(n, []):
            if d not in deps:
                continue
            if state.get(d) == 1:
                return path + [n, d]
            if state.get(d, 0) == 0:
                cyc = visit(d, path + [n])
                if cyc:
                    return cyc
        state[n] = 2
        return None

    for n in deps:
        if state.get(n, 0) == 0:
            cyc = visit(n, [])
            if cyc:
                start = cyc.index(cyc[-1])
                problems.append(Problem("spec.flows", "flows are not a DAG: " + " -> ".join(cyc[start:])))
                break
    if templates is not None:
        for fi, flow in enumerate(jf.spec.flows):
            if f"{jf.namespace}/{flow.name}" not in templates:
                problems.append(
                    Problem(
                        f"spec.flows[{fi}].name",
                        f"no JobTemplate {flow.name!r} in namespace {jf.namespace} in the input "
                        "(a flow runs the JobTemplate of its name)",
                    )
                )
    return problems


def template_job(tmpl: JobTemplate) -> Job:
    """The Job a JobTemplate stands for (its spec, under the template's name)."""
    return Job.model_validate(
        {
            "metadata": {"name": tmpl.name, "namespace": tmpl.namespace},
            "spec": tmpl.spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
        }
    )


def validate_jobtemplate(
    tmpl: JobTemplate, queues: Mapping[str, Queue] | None = None, scheduler_name: str = "volcano"
) -> list[Problem]:
    """A JobTemplate's spec must pass the Job rules (defaulted first, as its Jobs will be)."""
    as_job = template_job(tmpl)
    default_job(as_job, scheduler_name)
    return validate_job(as_job, queues)
