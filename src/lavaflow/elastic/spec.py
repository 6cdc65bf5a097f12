"""What makes a Volcano Job an elastic training job, read from its annotations and tasks.

One reader for every place that needs it: the scheduler's ``elastic`` plugin (on the PodGroup,
which carries the Job's annotations), the job controller (a resize is not a failure), the
simulator's training progress model, admission and the ``train`` CLI.  Pure: no I/O, no clock.

A Job is elastic when some task's pods request GPUs (the *workers*) and ``minAvailable`` is below
the number of pods, so it may run on ``minAvailable - (non-GPU pods)`` up to all its GPU pods.

Speed model and amount of work, from annotations (one of):

* ``lavaflow.io/application`` (a Pollux application) + ``lavaflow.io/batch-size``: the measured
  model; work is the application's full training unless ``lavaflow.io/epochs`` (a fraction of
  the application's epochs) or ``lavaflow.io/work`` (optimiser steps) says otherwise;
* ``lavaflow.io/gavel-model`` (a Gavel model configuration) + ``lavaflow.io/work`` (steps);
* ``lavaflow.io/speedup`` (``"1:1,2:1.8,4:3.1"``, measured speed-up per worker count) +
  ``lavaflow.io/epoch-time`` (one epoch on one worker) + ``lavaflow.io/epochs``.

A running job may update ``lavaflow.io/speedup`` (its measured throughput, as Voda's metrics
collector does) and report ``lavaflow.io/progress`` (fraction of its work done) with
``lavaflow.io/progress-time`` (when it was measured) and ``lavaflow.io/gpu-seconds`` (attained
service until then).  Other knobs: ``lavaflow.io/requested-workers`` (what a rigid policy gives,
Voda's NUM_PROC; default: all GPU pods), ``lavaflow.io/job-priority`` (Voda's JOB_PRIORITY, 0 =
highest), ``lavaflow.io/adaptive-batch: "true"`` (the policy may co-adapt the batch size).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from ..api.volcano import Job
    from .speed import PolluxJobSpeed

PREFIX = "lavaflow.io/"
APPLICATION = PREFIX + "application"
BATCH_SIZE = PREFIX + "batch-size"
EPOCHS = PREFIX + "epochs"
WORK = PREFIX + "work"
GAVEL_MODEL = PREFIX + "gavel-model"
SPEEDUP = PREFIX + "speedup"
EPOCH_TIME = PREFIX + "epoch-time"
REQUESTED = PREFIX + "requested-workers"
JOB_PRIORITY = PREFIX + "job-priority"
ADAPTIVE = PREFIX + "adaptive-batch"
MAX_BATCH = PREFIX + "max-batch-size"
# "sia": the application's step times are Sia's, measured per GPU type (lavaflow.elastic.sia; the
# artifact's location in $LAVAFLOW_SIA_ARTIFACT). Absent: Pollux's (T4) tables.
SPEED_TABLES = PREFIX + "speed-tables"
# Jobs that train the same model (same code and model, any size): they share what they measure
# (lavaflow.elastic.learned.ProfileBook).
PROFILE_GROUP = PREFIX + "profile-group"
PROGRESS = PREFIX + "progress"
PROGRESS_TIME = PREFIX + "progress-time"
GPU_SECONDS = PREFIX + "gpu-seconds"
# Set on a worker pod the scheduler removes to shrink its job (the job controller recreates it
# as a pending pod instead of treating the removal as a failure).
RESIZED_OUT = PREFIX + "resized-out"
# "min-max" GPU workers, written on the PodGroup by the job controller (the scheduler sees the
# PodGroup and the pods, not the Job's replicas).
WORKERS = PREFIX + "elastic-workers"
RESIZE_REASON = "ElasticResize"
# Set by the pytorch job plugin on the pod whose torchrun hosts the job's rendezvous store (c10d,
# ``is_host``). When that pod goes, every other worker's torchrun fails (its store is gone), so
# the elastic action never removes it alone: moving it restarts the whole group.
RENDEZVOUS_HOST = PREFIX + "rendezvous-host"

SPEED_KEYS = (
    APPLICATION,
    BATCH_SIZE,
    EPOCHS,
    WORK,
    GAVEL_MODEL,
    SPEEDUP,
    EPOCH_TIME,
    ADAPTIVE,
    MAX_BATCH,
    SPEED_TABLES,
)
STATIC_KEYS = SPEED_KEYS + (REQUESTED, JOB_PRIORITY, PROFILE_GROUP)
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_TYPE_LABELS = ("lavaflow.io/accelerator", "vodascheduler/accelerator")


class SpecError(ValueError):
    """A malformed elastic annotation: ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class SpeedSpec:
    """The speed model and total work of one job (shared between identical jobs)."""

    speed: Any  # has .rate(placement shape, gpu_type) -> work units / s
    work: float
    application: str
    batch_size: int | None


def parse_duration(text: str) -> float:
    """A duration in an annotation (``90s``, ``5m``, ``1h30m``, bare seconds): finite and ≥ 0."""
    from ..api.admission import parse_duration as go_duration

    value = go_duration(text.strip())
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: it must be a finite number of seconds ≥ 0")
    return value


def has_speed_model(annotations: Mapping[str, str]) -> bool:
    return APPLICATION in annotations or GAVEL_MODEL in annotations or SPEEDUP in annotations


@overload
def _num(field: str, raw: Any, kind: type[int], minimum: float | None = None, strict_min: bool = False) -> int: ...
@overload
def _num(
    field: str, raw: Any, kind: type[float] = float, minimum: float | None = None, strict_min: bool = False
) -> float: ...
def _num(
    field: str, raw: Any, kind: type[float] | type[int] = float, minimum: float | None = None, strict_min: bool = False
) -> float:
    try:
        v = kind(str(raw).strip())
    except (TypeError, ValueError):
        raise SpecError(field, f"expected a{'n integer' if kind is int else ' number'}, got {raw!r}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise SpecError(field, f"must be finite, got {raw!r}")
    if minimum is not None and (v <= minimum if strict_min else v < minimum):
        raise SpecError(field, f"must be {'>' if strict_min else '>='} {minimum:g}, got {raw!r}")
    return v


def parse_speedup(raw: str) -> dict[int, float]:
    pts: dict[int, float] = {}
    for part in str(raw).split(","):
        if not part.strip():
            continue
        try:
            k, v = part.split(":")
            n, s = int(k), float(v)
        except ValueError:
            raise SpecError(SPEEDUP, f"expected 'workers:speedup,...', got {part.strip()!r}") from None
        if n < 1 or not (s > 0 and math.isfinite(s)):
            raise SpecError(SPEEDUP, f"worker counts must be >= 1 and speed-ups > 0, got {part.strip()!r}")
        pts[n] = s
    if not pts:
        raise SpecError(SPEEDUP, "no measurement")
    return pts


@lru_cache(maxsize=4096)
def _speed_spec(items: tuple[tuple[str, str], ...], sia_root: str | None = None) -> SpeedSpec:
    ann = dict(items)
    from .speed import POLLUX_APPS, PolluxJobSpeed, pollux_app

    raw_adaptive = str(ann.get(ADAPTIVE, "false")).strip().lower()
    if raw_adaptive not in ("true", "false"):
        raise SpecError(ADAPTIVE, f'expected "true" or "false", got {ann.get(ADAPTIVE)!r}')
    adaptive = raw_adaptive == "true"
    if APPLICATION in ann:
        app = str(ann[APPLICATION]).strip()
        tables = str(ann.get(SPEED_TABLES, "pollux")).strip().lower()
        if tables not in ("pollux", "sia"):
            raise SpecError(SPEED_TABLES, f'expected "pollux" or "sia", got {ann.get(SPEED_TABLES)!r}')
        if tables == "sia":
            return _sia_speed_spec(ann, app, adaptive, sia_root)
        if app not in POLLUX_APPS:
            raise SpecError(APPLICATION, f"unknown application {app!r} (known: {', '.join(POLLUX_APPS)})")

        def pollux(bsz: int, kwargs: dict[str, Any]) -> Any:
            try:
                return PolluxJobSpeed(app, bsz, **kwargs)
            except TypeError:
                raise SpecError(ADAPTIVE, "batch-size co-adaptation is not available in this build") from None

        return _application_spec(ann, app, pollux_app(app), adaptive, pollux)
    if GAVEL_MODEL in ann:
        from .speed import GavelJobSpeed, gavel_table

        model_name = str(ann[GAVEL_MODEL]).strip()
        if model_name not in gavel_table().table.get("v100", {}):
            raise SpecError(GAVEL_MODEL, f"unknown Gavel model {model_name!r}")
        if WORK not in ann:
            raise SpecError(WORK, f"required with {GAVEL_MODEL} (steps of training)")
        return SpeedSpec(
            GavelJobSpeed(model_name), float(_num(WORK, ann[WORK], float, 0, strict_min=True)), model_name, None
        )
    if SPEEDUP in ann:
        from .fit import MeasurementError, fit_speed

        pts = parse_speedup(ann[SPEEDUP])
        if EPOCH_TIME not in ann:
            raise SpecError(EPOCH_TIME, f"required with {SPEEDUP} (seconds per epoch on one worker)")
        try:
            epoch_time = parse_duration(str(ann[EPOCH_TIME]))
        except ValueError as exc:
            raise SpecError(EPOCH_TIME, str(exc)) from None
        if epoch_time <= 0:
            raise SpecError(EPOCH_TIME, "must be > 0")
        if EPOCHS not in ann:
            raise SpecError(EPOCHS, f"required with {SPEEDUP} (number of epochs)")
        epochs = _num(EPOCHS, ann[EPOCHS], float, 0, strict_min=True)
        base = pts.get(1) or 1.0
        scale = 1.0 / epoch_time / base
        try:
            speed = fit_speed({k: v * scale for k, v in pts.items()})
        except MeasurementError as exc:
            raise SpecError(SPEEDUP, str(exc)) from None
        return SpeedSpec(speed, float(epochs), "custom", None)
    raise SpecError(
        "metadata.annotations",
        f"no speed model: set {APPLICATION} (+ {BATCH_SIZE}), {GAVEL_MODEL} + {WORK}, or {SPEEDUP} + {EPOCH_TIME} + {EPOCHS}",
    )


def _sia_speed_spec(ann: dict[str, str], app: str, adaptive: bool, root: str | None) -> SpeedSpec:
    """A job run by Sia's tables of its application (the artifact at ``root``)."""
    from .sia import ENV_VAR, REFERENCE_SUFFIX, SIA_APPS, SiaArtifactError, SiaJobSpeed, sia_app

    if app not in SIA_APPS:
        raise SpecError(APPLICATION, f"unknown application {app!r} (Sia's: {', '.join(SIA_APPS)})")
    if root is None:
        raise SpecError(SPEED_TABLES, f"Sia's tables are not shipped with lavaflow: set {ENV_VAR} to Sia's artifact")
    try:
        model = sia_app(root, app, REFERENCE_SUFFIX)
    except SiaArtifactError as exc:
        raise SpecError(SPEED_TABLES, str(exc)) from None
    return _application_spec(ann, app, model, adaptive, lambda bsz, kw: SiaJobSpeed(app, bsz, root=root, **kw))


def _application_spec(
    ann: dict[str, str], app: str, model: Any, adaptive: bool, build: Callable[[int, dict[str, Any]], PolluxJobSpeed]
) -> SpeedSpec:
    """The speed and work of a job of a measured application (``model``: its measurements;
    ``build(batch size, options)``: its speed)."""
    bsz = _num(BATCH_SIZE, ann.get(BATCH_SIZE, model.init_batch_size), int, 1)
    if bsz < model.min_local_bsz:
        raise SpecError(BATCH_SIZE, f"{bsz} is below {app}'s smallest per-GPU batch {model.min_local_bsz}")
    kwargs: dict[str, Any] = {}
    if adaptive:
        kwargs["adaptive"] = True
        if MAX_BATCH in ann:
            kwargs["max_batch_size"] = _num(MAX_BATCH, ann[MAX_BATCH], int, 1)
    speed = build(bsz, kwargs)
    total = speed.total_work()
    if WORK in ann:
        work = _num(WORK, ann[WORK], float, 0, strict_min=True)
    elif EPOCHS in ann:
        work = total * _num(EPOCHS, ann[EPOCHS], float, 0, strict_min=True) / model.max_epochs
    else:
        work = total
    return SpeedSpec(speed, float(work), app, bsz)


def speed_spec(annotations: Mapping[str, str]) -> SpeedSpec:
    """The job's speed model and work (raises SpecError)."""
    items = tuple(sorted((k, str(v)) for k, v in annotations.items() if k in SPEED_KEYS))
    if SPEED_TABLES in annotations:
        from .sia import configured_root

        return _speed_spec(items, configured_root())
    return _speed_spec(items)


@dataclass(frozen=True)
class Knobs:
    requested: int | None
    priority: int


def knobs(annotations: Mapping[str, str]) -> Knobs:
    req = annotations.get(REQUESTED)
    pr = annotations.get(JOB_PRIORITY)
    return Knobs(
        _num(REQUESTED, req, int, 1) if req is not None else None,
        _num(JOB_PRIORITY, pr, int, 0) if pr is not None else 0,
    )


@dataclass(frozen=True)
class Progress:
    fraction: float  # of the work, done at ``time``
    time: float | None
    gpu_seconds: float


def progress(annotations: Mapping[str, str], parse_time: Callable[[str], float] | None = None) -> Progress | None:
    """The last progress report, or None.  ``parse_time`` turns lavaflow.io/progress-time into
    seconds on the scheduler's clock (the simulator writes seconds; a cluster RFC 3339)."""
    raw = annotations.get(PROGRESS)
    if raw is None:
        return None
    frac = min(max(_num(PROGRESS, raw, float, 0), 0.0), 1.0)
    t_raw = annotations.get(PROGRESS_TIME)
    t = None
    if t_raw is not None:
        t = parse_time(t_raw) if parse_time is not None else _num(PROGRESS_TIME, t_raw, float)
    gs = annotations.get(GPU_SECONDS)
    return Progress(frac, t, _num(GPU_SECONDS, gs, float, 0) if gs is not None else 0.0)


def job_shape(job: Job) -> tuple[int, int, list[str], str | None] | None:
    """(min workers, max workers, worker task names, pinned GPU-type value from the workers'
    nodeSelector) of a Volcano Job, or None when it is not elastic (no GPU pods, or
    minAvailable covers every pod)."""
    from ..api.selectors import pod_requests

    gpu_pods = other = 0
    workers: list[str] = []
    gtype = None
    for task in job.spec.tasks:
        req = pod_requests(task.template.spec)
        if any(is_gpu(k) and v > 0 for k, v in req.items()):
            gpu_pods += task.replicas
            workers.append(task.name)
            sel = task.template.spec.node_selector or {}
            for lbl in DEFAULT_GPU_TYPE_LABELS:
                if sel.get(lbl):
                    gtype = gtype or str(sel[lbl]).lower()
        else:
            other += task.replicas
    min_avail = job.spec.min_available
    if gpu_pods == 0 or min_avail is None or min_avail >= gpu_pods + other:
        return None
    lo = max(1, min_avail - other)
    return lo, gpu_pods, workers, gtype


def workers_range(annotations: Mapping[str, str]) -> tuple[int, int] | None:
    raw = annotations.get(WORKERS)
    if not raw:
        return None
    try:
        lo, hi = (int(x) for x in str(raw).split("-", 1))
    except ValueError:
        return None
    return (lo, hi) if 1 <= lo <= hi else None


def is_gpu(resource: str) -> bool:
    return resource == DEFAULT_GPU_RESOURCE or resource.endswith("/gpu")


def is_training_job(job: Job) -> bool:
    """An elastic Volcano Job with a speed model: scheduled by the elastic policy, and in the
    simulator run by the training progress model."""
    return has_speed_model(job.metadata.annotations) and job_shape(job) is not None


def validate(job: Job) -> list[tuple[str, str]]:
    """(field, message) problems of a Job's elastic annotations (empty when fine or not elastic)."""
    ann = job.metadata.annotations
    if not has_speed_model(ann) and not any(k in ann for k in (PROGRESS, REQUESTED, JOB_PRIORITY)):
        return []
    out: list[tuple[str, str]] = []
    try:
        if has_speed_model(ann):
            speed_spec(ann)
        knobs(ann)
        progress(ann, parse_time=lambda s: 0.0)
    except SpecError as exc:
        out.append(
            (f"metadata.annotations[{exc.field}]" if not exc.field.startswith("metadata") else exc.field, exc.message)
        )
    return out
