"""``forecast``: when each pending job starts and each job ends, from a snapshot of a cluster.

Pure: no I/O and no clock of its own (the time of the snapshot is an argument). The snapshot is
simulated forward with the same scheduling core, controllers and configuration the cluster runs
(:mod:`.forward`), once with every uncertain run time at its median (the point forecast) and
``samples`` more times with run times drawn from what is known and learned speeds scaled by a
drawn factor (seeded): the range is the 10th to 90th percentile of those runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.core import PodPhase
from ..api.volcano import JOB_FINAL_PHASES, PodGroupPhase
from ..scheduler.framework.conf import SchedulerConfiguration, load_scheduler_conf
from .forward import ForwardRun
from .runtimes import Plan, RunTimeHistory, RuntimeSource, gpu_type_of, group_of, plan_job

DEFAULT_SAMPLES = 8
DEFAULT_HORIZON = 30 * 86400.0  # a forward run stops here at the latest (simulated seconds)
LOW, HIGH = 0.1, 0.9
# How far a learned speed model may be off (log-normal sigma): docs/elastic.md measures a fit on a
# job's own placements within ~20 %, and extrapolations beyond them optimistic.
PROGRESS_SIGMA = 0.2


@dataclass(frozen=True)
class JobForecast:
    """One job's forecast: times on the snapshot's clock, None where it does not happen within
    the forecast (``reason`` says why)."""

    start: float | None
    start_low: float | None
    start_high: float | None
    finish: float | None
    finish_low: float | None
    finish_high: float | None
    source: str  # annotation | progress | history | unknown
    running: bool
    reason: str | None = None


@dataclass
class Forecast:
    now: float
    jobs: dict[str, JobForecast] = field(default_factory=dict)  # "namespace/name"
    details: dict[str, str] = field(default_factory=dict)  # what each job's source said
    queues: dict[str, str] = field(default_factory=dict)  # each job's queue
    runs: int = 0  # forward runs made (the point run and the samples)
    seed: int = 0


def objects_by_kind(objects: Any) -> dict[str, list[Any]]:
    """A snapshot as lists of objects by store kind, from a mapping of kind to objects, the
    simulator's MemoryStore, the Kubernetes backend's informer store (the kinds it informs), or an
    iterable of objects."""
    if isinstance(objects, Mapping):
        return {k: list(v) for k, v in objects.items()}
    inner = getattr(objects, "_objects", None)
    if isinstance(inner, dict):  # a MemoryStore
        return {k: list(v.values()) for k, v in inner.items() if v}
    informed = getattr(objects, "informers", None)
    if isinstance(informed, Mapping) and hasattr(objects, "list"):  # a KubeStore
        return {k: list(objects.list(k)) for k in informed}
    out: dict[str, list[Any]] = {}
    for obj in objects:
        out.setdefault(type(obj).__name__, []).append(obj)
    return out


def _owned_by_volcano_job(pg: Any) -> bool:
    return any(r.kind == "Job" and "volcano" in r.api_version for r in pg.metadata.owner_references)


def plan_jobs(objs: Mapping[str, list[Any]], history: RuntimeSource, now: float) -> tuple[dict[str, Plan], set[str]]:
    """(the plan of every unfinished job by PodGroup key, the PodGroup keys of finished jobs)."""
    pods_of: dict[str, list[Any]] = {}
    for pod in objs.get("Pod", ()):
        g = group_of(pod)
        if g is not None:
            pods_of.setdefault(g, []).append(pod)
    pgs = {pg.key: pg for pg in objs.get("PodGroup", ())}
    types = {n.name: gpu_type_of(n) for n in objs.get("Node", ())}
    plans: dict[str, Plan] = {}
    finished: set[str] = set()
    for job in sorted(objs.get("Job", ()), key=lambda j: j.key):
        group = f"{job.namespace}/{job.name}-{job.metadata.uid}"
        if job.status.state.phase in JOB_FINAL_PHASES:
            finished.add(group)
            continue
        pg = pgs.get(group)
        annotations = {**job.metadata.annotations, **(pg.metadata.annotations if pg is not None else {})}
        templates = [t.template.metadata.annotations for t in job.spec.tasks]
        if pods_of.get(group):  # its pods are made from those templates: they speak for them
            templates = []
        plans[group] = plan_job(
            job.key,
            group,
            job.spec.queue or "default",
            pods_of.get(group, []),
            templates,
            annotations,
            history,
            now,
            types,
        )
    for pg in sorted(pgs.values(), key=lambda p: p.key):
        if pg.key in plans or pg.key in finished or _owned_by_volcano_job(pg):
            continue
        pods = pods_of.get(pg.key, [])
        if pg.status.phase == PodGroupPhase.COMPLETED or (
            pods and all(p.status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) for p in pods)
        ):
            finished.add(pg.key)
            continue
        plans[pg.key] = plan_job(
            pg.key, pg.key, pg.spec.queue or "default", pods, [], pg.metadata.annotations, history, now, types
        )
    return plans, finished


def _without_finished(objs: Mapping[str, list[Any]], finished: set[str]) -> dict[str, list[Any]]:
    """The snapshot less finished Volcano Jobs and gangs: nothing the forward run needs."""
    out = dict(objs)
    out["Job"] = [j for j in objs.get("Job", ()) if f"{j.namespace}/{j.name}-{j.metadata.uid}" not in finished]
    out["PodGroup"] = [pg for pg in objs.get("PodGroup", ()) if pg.key not in finished]
    out["Pod"] = [p for p in objs.get("Pod", ()) if group_of(p) not in finished]
    return {k: v for k, v in out.items() if v}


def _draws(plans: Mapping[str, Plan], rng: np.random.Generator | None) -> dict[str, float]:
    """For one forward run, each job's run time (history) or the factor its learned speed is
    taken at (progress): medians (factor 1) without a generator, drawn with one — a run time
    from the known ones, a speed factor log-normal of sigma PROGRESS_SIGMA."""
    out: dict[str, float] = {}
    for group, plan in plans.items():
        if plan.source == "progress" and plan.end is not None:
            out[group] = 1.0 if rng is None else float(np.exp(PROGRESS_SIGMA * rng.standard_normal()))
        elif plan.source == "history" and plan.candidates:
            if rng is None:
                point = plan.point()
                if point is not None:
                    out[group] = point
            else:
                out[group] = float(plan.candidates[int(rng.integers(len(plan.candidates)))])
    return out


def _quantile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (``inf`` stands for "did not happen")."""
    s = sorted(values)
    return s[max(math.ceil(q * len(s)) - 1, 0)]


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _range(point: float | None, sampled: list[float | None]) -> tuple[float | None, float | None]:
    if not sampled:
        return point, point
    vals = [math.inf if v is None else v for v in sampled]
    lo, hi = _quantile(vals, LOW), _quantile(vals, HIGH)
    p = math.inf if point is None else point
    return _finite(min(lo, p)), _finite(max(hi, p))


def _why_not(plan: Plan, plans: Mapping[str, Plan], run: ForwardRun, started: bool) -> str:
    if started:
        if plan.source == "unknown":
            return f"no end known: {plan.detail}"
        return "does not end within the forecast"
    blockers = sorted(p.key for p in plans.values() if p.source == "unknown" and p.running and p is not plan)
    pg = run.store.get("PodGroup", plan.group)
    cond = next(
        (
            c.message
            for c in (pg.status.conditions if pg is not None else [])
            if c.type == "Unschedulable" and c.message
        ),
        None,
    )
    if blockers:
        shown = ", ".join(blockers[:3]) + (f" and {len(blockers) - 3} more" if len(blockers) > 3 else "")
        return f"waits behind jobs of unknown run time ({shown})" + (f": {cond}" if cond else "")
    return cond or "does not start within the forecast"


def forecast(
    objects: Any,
    conf: SchedulerConfiguration | None,
    now: float,
    *,
    runtime_source: RuntimeSource | None = None,
    seed: int = 0,
    samples: int = DEFAULT_SAMPLES,
    horizon: float = DEFAULT_HORIZON,
) -> Forecast:
    """Forecast every unfinished job of a snapshot taken at ``now``.

    ``objects``: what the cluster's store holds (a Store, or objects by kind); ``conf``: the
    scheduler configuration the cluster runs (None: Volcano's default); ``runtime_source``:
    finished jobs' run times by queue (default: the Volcano Jobs of the snapshot that completed).
    """
    conf = conf if conf is not None else load_scheduler_conf()
    objs = objects_by_kind(objects)
    history = runtime_source if runtime_source is not None else RunTimeHistory.from_objects(objs)
    plans, finished = plan_jobs(objs, history, now)
    result = Forecast(now=now, seed=seed)
    if not plans:
        return result
    live = _without_finished(objs, finished)

    def run(draws: dict[str, float]) -> tuple[ForwardRun, dict[str, tuple[float | None, float | None]]]:
        sim = ForwardRun(live, conf, now, plans, draws, horizon, seed=seed)
        sim.run()
        return sim, sim.outcome(plans)

    point_sim, point = run(_draws(plans, None))
    sampled: list[dict[str, tuple[float | None, float | None]]] = []
    if samples > 0 and any(p.uncertain for p in plans.values()):
        rng = np.random.default_rng(seed)
        sampled = [run(_draws(plans, rng))[1] for _ in range(samples)]
    result.runs = 1 + len(sampled)
    for group, plan in sorted(plans.items(), key=lambda kv: kv[1].key):
        start, finish = point[group]
        s_lo, s_hi = _range(start, [o[group][0] for o in sampled])
        f_lo, f_hi = _range(finish, [o[group][1] for o in sampled])
        if plan.running:
            s_lo = s_hi = start
        reason = None
        if start is None or finish is None:
            reason = _why_not(plan, plans, point_sim, start is not None)
        result.jobs[plan.key] = JobForecast(start, s_lo, s_hi, finish, f_lo, f_hi, plan.source, plan.running, reason)
        result.details[plan.key] = plan.detail
        result.queues[plan.key] = plan.queue
    return result


def pending(fc: Forecast) -> Iterable[tuple[str, JobForecast]]:
    return ((k, j) for k, j in fc.jobs.items() if not j.running)
