"""Where a job's remaining run time comes from: what a scheduler can read at the time of the
forecast, never what the simulator knows.

* ``annotation`` — every pod of the job (or its task templates) says how long it runs:
  ``lavaflow.io/expected-duration`` (a user's estimate, as a batch system's time limit) or
  ``sim.lavaflow.io/duration`` (what the simulator and the fake kubelet run by). A running pod
  has ``duration − elapsed`` left. Exact when the annotations are.
* ``progress`` — an elastic training job's last progress report (``lavaflow.io/progress``,
  ``-time``, ``gpu-seconds``, docs/elastic.md): the GPU-seconds its remaining fraction needs at the
  rate its learned speed model gives on the workers it runs on now (as the elastic plugin
  extrapolates it; before its first measurement: the GPU-seconds its remaining fraction needs at
  the rate its finished fraction took them).
* ``history`` — the run times of the queue's finished Volcano Jobs: those of the job's profile
  group (``lavaflow.io/profile-group``, the model it trains) when there are at least three, else
  all of them (every queue's when the queue has none); a running job takes one that is longer
  than it has run so far.
* ``unknown`` — none of these: its pods are taken to run until something else ends them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..api import sim_annotations as ann
from ..api.core import PodPhase
from ..api.selectors import pod_requests
from ..api.volcano import GROUP_NAME_ANNOTATION, JOB_NAME_KEY, JobPhase
from ..elastic import spec as es
from ..elastic.learned import learned_spec, profile_group
from ..elastic.speed import advance, next_bound, rate_at
from ..scheduler.cache import timestamp

EXPECTED_DURATION = "lavaflow.io/expected-duration"
SOURCES = ("annotation", "progress", "history", "unknown")


MIN_SIMILAR = 3  # finished jobs of a profile group that make its own history


class RuntimeSource(Protocol):
    """Finished jobs' run times, for the ``history`` source (the dashboard keeps its own, from
    watches, as finished jobs leave the cluster). ``group``: the job's profile group
    (``lavaflow.io/profile-group``), when it declares one — a source may answer with the run times
    of that group's jobs, or ignore it."""

    def run_times(self, queue: str, group: str | None = None) -> Sequence[float]: ...


@dataclass
class RunTimeHistory:
    """Run times (seconds) of finished jobs, by queue and by (queue, profile group)."""

    by_queue: dict[str, list[float]] = field(default_factory=dict)
    by_group: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, queue: str, seconds: float, group: str | None = None) -> None:
        if math.isfinite(seconds) and seconds >= 0:
            self.by_queue.setdefault(queue, []).append(float(seconds))
            if group:
                self.by_group.setdefault((queue, group), []).append(float(seconds))

    def run_times(self, queue: str, group: str | None = None) -> Sequence[float]:
        """The queue's jobs of ``group`` when there are at least MIN_SIMILAR, else all the queue's
        jobs, else every queue's."""
        similar = self.by_group.get((queue, group), []) if group else []
        if len(similar) >= MIN_SIMILAR:
            return similar
        own = self.by_queue.get(queue)
        if own:
            return own
        return [t for q in sorted(self.by_queue) for t in self.by_queue[q]]

    @classmethod
    def from_objects(cls, objects: Mapping[str, list[Any]]) -> RunTimeHistory:
        """The Volcano Jobs of a snapshot that completed: from their first pod's start to the
        time their phase became Completed."""
        starts: dict[str, float] = {}
        for pod in objects.get("Pod", ()):
            name = pod.metadata.labels.get(JOB_NAME_KEY)
            t = pod.status.start_time
            if name and isinstance(t, (int, float)):
                key = f"{pod.namespace}/{name}"
                starts[key] = min(starts.get(key, math.inf), float(t))
        hist = cls()
        for job in sorted(objects.get("Job", ()), key=lambda j: j.key):
            state = job.status.state
            end = state.last_transition_time
            if state.phase == JobPhase.COMPLETED and isinstance(end, (int, float)) and job.key in starts:
                group = profile_group(job.metadata.annotations)
                hist.add(job.spec.queue or "default", float(end) - starts[job.key], group)
        return hist


def pod_duration(pod: Any) -> float | None:
    """The run time a pod's annotations declare (``inf`` allowed), None when they say nothing
    readable."""
    return annotated_duration(pod.metadata.annotations)


def annotated_duration(annotations: Mapping[str, str]) -> float | None:
    for key in (EXPECTED_DURATION, ann.DURATION):
        raw = annotations.get(key)
        if raw is None:
            continue
        try:
            return ann.parse_duration(raw, allow_inf=True)
        except ValueError:
            continue
    return None


def group_of(pod: Any) -> str | None:
    """The PodGroup key a pod belongs to."""
    pg = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
    return f"{pod.namespace}/{pg}" if pg else None


@dataclass
class Plan:
    """What the forecast knows about one job's run time at the time of the forecast."""

    key: str  # namespace/name, as reported
    group: str  # its PodGroup's key
    queue: str
    running: bool
    started: float | None  # when it started (running jobs)
    source: str
    detail: str  # what the source said, for a user
    end: float | None = None  # progress: when it is estimated to end
    candidates: tuple[float, ...] = ()  # history: run times it may take (longer than it has run)
    progressed: Progressed | None = None  # progress: what its last report tells

    @property
    def uncertain(self) -> bool:
        return self.source == "progress" or (self.source == "history" and len(set(self.candidates)) > 1)

    def point(self) -> float | None:
        """The median of the run times it may take (history)."""
        if not self.candidates:
            return None
        c = sorted(self.candidates)
        n = len(c)
        return c[n // 2] if n % 2 else 0.5 * (c[n // 2 - 1] + c[n // 2])


def _time_to_finish(speed: Any, shape: tuple[int, ...], gpu_type: str | None, done: float, work: float) -> float:
    """Seconds ``speed`` needs on ``shape`` from ``done`` work units to ``work``, phase by phase."""
    t = 0.0
    for _ in range(10_000):
        if done >= work:
            return t
        rate = rate_at(speed, shape, gpu_type, done)
        if not rate > 0:
            return math.inf
        step = min(next_bound(speed, done), work)
        if step <= done:  # (at a bound: the next phase)
            step = min(next_bound(speed, done + 1e-9 * max(work, 1.0)), work)
        t += (step - done) / rate
        done = step
    return math.inf


@dataclass
class Progressed:
    """What an elastic job's last progress report tells at the time of the forecast."""

    end: float  # when it ends, on its current placement
    detail: str
    spec: Any = None  # its learned speed model and declared work (None: not measured yet)
    done: float = 0.0  # work done by the time of the forecast (the model's units)
    resume: float = 0.0  # when it trains again (a report written in a restart pause is dated after it)


def progress_end(
    annotations: Mapping[str, str], placement: Mapping[str, int], gpu_type: str | None, now: float
) -> Progressed | None:
    """When an elastic job ends by its last progress report. As the elastic plugin extrapolates
    it: the work left (its declared work less the fraction done) at the rate its learned speed
    model (``lavaflow.io/metrics``) gives on its current placement; a job not measured yet: the
    GPU-seconds its remaining fraction needs at the rate the finished fraction took them, spread
    over its workers. None when nothing tells (no progress yet)."""
    try:
        pr = es.progress(annotations, parse_time=_seconds)
    except (es.SpecError, ValueError):
        return None
    workers = sum(placement.values())
    if pr is None or workers <= 0:
        return None
    frac, at, gpu_s = pr.fraction, pr.time, pr.gpu_seconds
    if not isinstance(at, (int, float)):
        return None
    resume = max(float(at), now)
    if frac >= 1.0:
        return Progressed(resume, "its last report says its work is done", resume=resume)
    try:
        sp = learned_spec(annotations)
    except (es.SpecError, ValueError):
        sp = None
    if sp is not None and getattr(sp.speed, "observed", True) and sp.work > 0:
        shape = tuple(sorted(placement.values(), reverse=True))
        done = frac * sp.work
        if now > at:  # trained since its report, at the rate of its placement
            done = advance(sp.speed, shape, gpu_type, done, now - float(at), sp.work)
        left = _time_to_finish(sp.speed, shape, gpu_type, done, sp.work)
        if math.isfinite(left):
            detail = f"progress {frac:.0%}, its learned speed on {workers} worker(s)"
            return Progressed(resume + left, detail, sp, done, resume)
    if frac <= 0 or gpu_s <= 0:
        return None
    left = (1.0 - frac) / frac * gpu_s / workers
    detail = f"progress {frac:.0%} after {gpu_s:,.0f} GPU-s, {workers} worker(s) now"
    return Progressed(max(float(at) + left, now), detail, resume=resume)


def plan_job(
    key: str,
    group: str,
    queue: str,
    pods: Iterable[Any],
    templates: Iterable[Mapping[str, str]],
    annotations: Mapping[str, str],
    history: RuntimeSource,
    now: float,
    gpu_types: Mapping[str, str | None] | None = None,
) -> Plan:
    """The source of one job's remaining run time (see the module's docstring). ``gpu_types``: the
    GPU type of each node, by name (for a training job's learned speed)."""
    gpu_types = gpu_types or {}
    pods = list(pods)
    running = [
        p
        for p in pods
        if p.status.phase == PodPhase.RUNNING or (p.spec.node_name and p.status.phase == PodPhase.PENDING)
    ]
    starts = [float(p.status.start_time) for p in running if isinstance(p.status.start_time, (int, float))]
    started = min(starts) if starts else (now if running else None)
    alive = [p for p in pods if p.status.phase in (PodPhase.PENDING, PodPhase.RUNNING)]
    plan = Plan(key, group, queue, bool(running), started, "unknown", "")
    if es.PROGRESS in annotations and running:
        placement: dict[str, int] = {}
        for p in running:
            if _gpus(p) > 0 and p.spec.node_name:
                placement[p.spec.node_name] = placement.get(p.spec.node_name, 0) + 1
        got = progress_end(annotations, placement, gpu_types.get(next(iter(placement), ""), None), now)
        if got is not None:
            plan.source, plan.end, plan.detail, plan.progressed = "progress", got.end, got.detail, got
            return plan
    declared = [annotated_duration(p.metadata.annotations) for p in alive] + [annotated_duration(t) for t in templates]
    if declared and all(d is not None for d in declared):
        plan.source, plan.detail = "annotation", "its pods' duration annotations"
        return plan
    elapsed = now - started if started is not None else 0.0
    model_group = profile_group(annotations)
    known = history.run_times(queue, model_group)
    runs = [t for t in known if t > elapsed]
    if runs:
        plan.source, plan.candidates = "history", tuple(runs)
        past = f" longer than its {elapsed:,.0f} s so far" if started is not None else ""
        similar = isinstance(history, RunTimeHistory) and known is history.by_group.get((queue, model_group or ""))
        like = f" of profile group {model_group}" if similar else ""
        plan.detail = f"{len(runs)} finished job(s){like} of queue {queue}{past}"
        return plan
    plan.detail = f"no duration annotation, progress report or finished job of queue {queue}" + (
        f" longer than its {elapsed:,.0f} s so far" if started is not None else ""
    )
    return plan


def _gpus(pod: Any) -> float:
    return sum(v for k, v in pod_requests(pod.spec).items() if es.is_gpu(k))


def gpu_type_of(node: Any) -> str:
    """A node's GPU type as the elastic plugin and the simulator's training model read it."""
    labels = node.metadata.labels
    v = next((labels[k] for k in es.DEFAULT_GPU_TYPE_LABELS if labels.get(k)), None)
    return str(v).lower() if v else "default"


def _seconds(raw: str) -> float:
    """A report's time: seconds (the simulator's clock) or RFC 3339 (a cluster's)."""
    try:
        return float(raw)
    except ValueError:
        return timestamp(raw)
