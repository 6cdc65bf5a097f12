"""Workload readers: Pollux CSV, Philly CSV, Voda MPIJob YAML, Volcano Jobs with minAvailable < replicas.

Every reader returns :class:`~lavaflow.elastic.job.ElasticJobSpec` objects and raises
:class:`WorkloadError` (file, line, column, message) on bad input.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, overload

from .job import ElasticJobSpec, default_elastic_range
from .speed import POLLUX_APPS, PolluxApp, PolluxJobSpeed, pollux_app


@dataclass
class WorkloadError(ValueError):
    path: str
    line: int | None
    column: str | None
    message: str

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
        if self.column:
            where += f": column {self.column!r}"
        return f"{where}: {self.message}"


POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")


@overload
def _num(path: str, line: int, col: str, raw: str, kind: type[int], minimum: float | None = None) -> int: ...
@overload
def _num(
    path: str, line: int, col: str, raw: str, kind: type[float] = float, minimum: float | None = None
) -> float: ...
def _num(
    path: str, line: int, col: str, raw: str, kind: type[float] | type[int] = float, minimum: float | None = None
) -> float:
    try:
        v = kind(raw.strip())
    except (ValueError, AttributeError):
        raise WorkloadError(
            path, line, col, f"expected {'an integer' if kind is int else 'a number'}, got {raw!r}"
        ) from None
    if isinstance(v, float) and not math.isfinite(v):
        raise WorkloadError(path, line, col, f"expected a finite number, got {raw!r}")
    if minimum is not None and v < minimum:
        raise WorkloadError(path, line, col, f"must be >= {minimum:g}, got {raw.strip()}")
    return v


def detect_format(path: Path) -> str:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        header = next(csv.reader(fh), [])
    cols = {c.strip() for c in header}
    if set(POLLUX_COLUMNS[:3]) <= cols:
        return "pollux"
    if set(PHILLY_COLUMNS) <= cols:
        return "philly"
    if {"name", "time", "model", "duration"} <= cols:
        return "gavel"
    raise WorkloadError(
        str(path),
        1,
        None,
        "unknown CSV header: expected Pollux (name,time,application,num_replicas,batch_size), "
        "Philly (timestamp,duration,num_gpus,...) or Gavel (name,time,model,num_replicas,duration) columns",
    )


def workload_format(path: Path | str) -> str:
    """The trace format of ``path`` (pollux, sia, philly or gavel); WorkloadError when it is none.

    A Sia workload has Pollux's columns: a file in a ``sia-simulator`` directory (as the artifact
    ships them), or any such file when ``--sia-artifact`` was given, is one (``sia``: its jobs run
    by Sia's tables per GPU type), refused when the artifact's location is not known."""
    p = Path(path)
    if not p.exists():
        raise WorkloadError(str(p), None, None, "file not found")
    if p.suffix.lower() in (".yaml", ".yml"):
        raise WorkloadError(
            str(p), None, None, "YAML (Volcano Jobs, Voda MPIJobs) is read by lavaflow simulate itself, not as a trace"
        )
    fmt = detect_format(p)
    if fmt != "pollux":
        return fmt
    from . import sia

    if not sia.is_sia_trace(p):
        return fmt
    root = sia.configured_root()
    if root is None:
        raise WorkloadError(
            str(p),
            None,
            None,
            "a Sia workload: its jobs run by Sia's measured tables per GPU type "
            "(sia-simulator/traces/<application>/placements-<type>.csv and scalability-<type>.csv), "
            f"which lavaflow does not ship: {sia._HOW}",
        )
    try:
        sia.tables_dir(root)
    except sia.SiaArtifactError as exc:
        raise WorkloadError(str(p), None, None, f"a Sia workload: {exc}") from None
    return "sia"


def read_workload(path: Path | str, max_gpus: int | None = None, **kw: Any) -> list[ElasticJobSpec]:
    p = Path(path)
    fmt = workload_format(p)
    if fmt in ("pollux", "sia"):
        return read_pollux_csv(p, max_gpus=max_gpus, adaptive=kw.get("adaptive", False), sia=fmt == "sia")
    if fmt == "gavel":
        return read_gavel_csv(p, max_gpus=max_gpus)
    kw.pop("adaptive", None)
    return read_philly_csv(p, max_gpus=max_gpus, **kw)


def csv_rows(
    lines: Iterable[str], path: str, columns: tuple[str, ...], header: list[str] | None = None
) -> tuple[list[str], csv.DictReader[str]]:
    """``(header, reader)``: a ``csv.DictReader`` over ``lines`` whose field names are the header's,
    stripped; WorkloadError when one of ``columns`` is missing. With ``header`` (read earlier) the
    lines hold rows only."""
    reader = csv.DictReader(lines, fieldnames=header)
    if header is None:
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in columns if c not in header]
        if missing:
            raise WorkloadError(path, 1, missing[0], f"missing column(s): {', '.join(missing)}")
        reader.fieldnames = header
    return header, reader


def _pollux_job(
    path: str,
    line: int,
    name: str,
    t: float,
    app: str,
    replicas: int,
    batch: int,
    max_gpus: int | None,
    min_w: int | None = None,
    max_w: int | None = None,
    gpu_type: str | None = None,
    priority: int = 0,
    adaptive: bool = False,
    max_batch: int | None = None,
    sia_root: str | None = None,
) -> ElasticJobSpec:
    if sia_root is not None:
        from .sia import SiaJobSpeed

        speed: PolluxJobSpeed = SiaJobSpeed(app, batch, adaptive=adaptive, max_batch_size=max_batch, root=sia_root)
    else:
        speed = PolluxJobSpeed(app, batch, adaptive=adaptive, max_batch_size=max_batch)
    useful = speed.max_useful_workers()
    if adaptive:
        # as in Pollux's evaluation: any size from one GPU up to what the largest batch allows
        lo, hi = 1, max(min(useful, max_gpus or useful), 1)
    else:
        lo, hi = default_elastic_range(replicas, useful, max_gpus)
    if min_w is not None:
        lo = min_w
    if max_w is not None:
        hi = max_w
    if hi < lo:
        raise WorkloadError(path, line, "max_replicas", f"maximum {hi} below minimum {lo}")
    return ElasticJobSpec(
        name=name,
        submit_time=t,
        speed=speed,
        work=speed.total_work(),
        requested=replicas,
        min_workers=lo,
        max_workers=hi,
        priority=priority,
        gpu_type=gpu_type,
        application=app,
        batch_size=batch,
        source=f"{path}:{line}",
    )


def read_pollux_csv(
    path: Path | str, max_gpus: int | None = None, adaptive: bool = False, sia: bool = False
) -> list[ElasticJobSpec]:
    """``name,time,application,num_replicas,batch_size`` (time in seconds).

    Optional extra columns: ``min_replicas``, ``max_replicas``, ``gpu_type``, ``priority``,
    ``adaptive_batch`` (true/false: the job lets the scheduler choose its batch size, Pollux's
    co-adaptation; default: the ``adaptive`` argument) and ``max_batch_size`` (limit of an adaptive
    job's batch; default the application's largest measured batch).  An adaptive job's elastic
    range is Pollux's: 1 GPU up to what its largest batch allows (at least the smallest per-GPU
    batch on each), bounded by the cluster.
    Without them an elastic range is derived from ``num_replicas`` as in Voda's examples
    (min = ceil(NP/2), max = 2·NP, bounded by the batch size and the cluster).
    ``sia``: a Sia workload (the same columns), its jobs run by the tables of the Sia artifact
    given in ``$LAVAFLOW_SIA_ARTIFACT``."""
    p = str(path)
    jobs: list[ElasticJobSpec] = []
    seen: set[str] = set()
    with open(path, newline="", encoding="utf-8-sig") as fh:
        header, reader = csv_rows(fh, p, POLLUX_COLUMNS)
        for row in reader:
            job = (sia_row if sia else pollux_row)(p, reader.line_num, row, header, max_gpus, adaptive, seen)
            if job is not None:
                jobs.append(job)
    return jobs


def pollux_row(
    p: str,
    line: int,
    row: dict[str, Any],
    header: list[str],
    max_gpus: int | None = None,
    adaptive: bool = False,
    seen: set[str] | None = None,
    sia_root: str | None = None,
) -> ElasticJobSpec | None:
    """The job of one row of a Pollux CSV (None for a blank row); ``seen``: the names of the rows
    before it, to refuse a repeated one (None: not checked); ``sia_root``: a Sia workload's row,
    its job run by the tables of the artifact there."""
    if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
        return None  # a blank row
    if None in row or any(row.get(c) is None for c in POLLUX_COLUMNS):
        raise WorkloadError(p, line, None, f"expected {len(header)} fields")
    name = row["name"].strip()
    if not name:
        raise WorkloadError(p, line, "name", "empty job name")
    if seen is not None:
        if name in seen:
            raise WorkloadError(p, line, "name", f"duplicate job name {name!r}")
        seen.add(name)
    t = _num(p, line, "time", row["time"], float, 0)
    app = row["application"].strip()
    known = POLLUX_APPS
    if sia_root is not None:
        from .sia import SIA_APPS as known
    if app not in known:
        raise WorkloadError(p, line, "application", f"unknown application {app!r} (known: {', '.join(known)})")
    reps = _num(p, line, "num_replicas", row["num_replicas"], int, 1)
    bsz = _num(p, line, "batch_size", row["batch_size"], int, 1)
    model = pollux_app(app) if sia_root is None else _sia_model(p, line, sia_root, app)
    if bsz < model.min_local_bsz:
        raise WorkloadError(
            p, line, "batch_size", f"{bsz} is below {app}'s smallest per-GPU batch {model.min_local_bsz}"
        )
    opt: dict[str, Any] = {}
    for col, key in (("min_replicas", "min_w"), ("max_replicas", "max_w"), ("priority", "priority")):
        raw = (row.get(col) or "").strip()
        if raw:
            opt[key] = _num(p, line, col, raw, int, 0 if col == "priority" else 1)
    gt = (row.get("gpu_type") or "").strip() or None
    raw = (row.get("adaptive_batch") or "").strip().lower()
    if raw in ("true", "yes", "1"):
        opt["adaptive"] = True
    elif raw in ("false", "no", "0"):
        opt["adaptive"] = False
    elif raw:
        raise WorkloadError(p, line, "adaptive_batch", f"expected true or false, got {raw!r}")
    else:
        opt["adaptive"] = adaptive
    raw = (row.get("max_batch_size") or "").strip()
    if raw:
        opt["max_batch"] = _num(p, line, "max_batch_size", raw, int, 1)
        if opt["max_batch"] < bsz:
            raise WorkloadError(p, line, "max_batch_size", f"{opt['max_batch']} is below the job's batch size {bsz}")
    if max_gpus is not None and reps > max_gpus:
        reps = max_gpus
    return _pollux_job(p, line, name, t, app, reps, bsz, max_gpus, gpu_type=gt, sia_root=sia_root, **opt)


def _sia_model(p: str, line: int, root: str, app: str) -> PolluxApp:
    """The reference GPU type's model of a Sia workload's application; WorkloadError naming the
    row and the missing table when the artifact lacks it."""
    from .sia import REFERENCE_SUFFIX, SiaArtifactError, sia_app

    try:
        return sia_app(root, app, REFERENCE_SUFFIX)
    except SiaArtifactError as exc:
        raise WorkloadError(p, line, "application", str(exc)) from None


def sia_row(
    p: str,
    line: int,
    row: dict[str, Any],
    header: list[str],
    max_gpus: int | None = None,
    adaptive: bool = False,
    seen: set[str] | None = None,
) -> ElasticJobSpec | None:
    """The job of one row of a Sia workload (Pollux's columns; the arguments of
    :func:`pollux_row`), run by the tables of the artifact in ``$LAVAFLOW_SIA_ARTIFACT``."""
    from .sia import ENV_VAR, configured_root

    root = configured_root()
    if root is None:
        raise WorkloadError(p, line, None, f"a Sia workload needs Sia's artifact: set {ENV_VAR}")
    return pollux_row(p, line, row, header, max_gpus, adaptive, seen, sia_root=root)


# Pollux's workload generator bins Philly jobs by GPU time into applications; we do the same to
# give each Philly job a measured speed curve.  Bins (GPU-hours): <1, <10, <100, >=100.
PHILLY_BINS = ((1.0, "cifar10"), (10.0, "deepspeech2"), (100.0, "yolov3"), (math.inf, "imagenet"))


def _philly_app(gpu_hours: float) -> str:
    for bound, app in PHILLY_BINS:
        if gpu_hours < bound:
            return app
    return "imagenet"


def read_philly_csv(
    path: Path | str,
    max_gpus: int | None = None,
    start: str | None = None,
    hours: float = 8.0,
    limit: int | None = 160,
    seed: int = 0,
) -> list[ElasticJobSpec]:
    """``timestamp,duration,num_gpus[,gpu_time,cluster]`` (Pollux's philly.csv).

    Jobs submitted within ``hours`` after ``start`` (default: the median submission time, so the
    window lies in the busy part of the trace) are replayed; if more than ``limit`` (default 160,
    the size of Pollux's workloads) fall in the window, a seeded uniform sample of ``limit`` is kept.
    Each job is given the measured speed curve of a Pollux application chosen by its GPU time and
    the work that takes ``duration`` seconds on ``num_gpus`` consolidated GPUs."""
    p = str(path)
    rows: list[tuple[datetime, float, int, int]] = []
    with open(path, newline="", encoding="utf-8-sig") as fh:
        _, reader = csv_rows(fh, p, PHILLY_COLUMNS)
        for row in reader:
            line = reader.line_num
            raw = (row.get("timestamp") or "").strip()
            try:
                ts = datetime.fromisoformat(raw)
            except ValueError:
                raise WorkloadError(p, line, "timestamp", f"expected 'YYYY-MM-DD hh:mm:ss', got {raw!r}") from None
            dur = _num(p, line, "duration", row.get("duration") or "", float, 0)
            gpus = _num(p, line, "num_gpus", row.get("num_gpus") or "", int, 1)
            rows.append((ts, dur, gpus, line))
    if not rows:
        return []
    rows.sort(key=lambda r: (r[0], r[3]))
    t0 = datetime.fromisoformat(start) if start else rows[len(rows) // 2][0]
    window = [r for r in rows if 0 <= (r[0] - t0).total_seconds() < hours * 3600 and r[1] > 0]
    if limit is not None and len(window) > limit:
        import random

        keep = sorted(random.Random(seed).sample(range(len(window)), limit))
        window = [window[i] for i in keep]
    jobs: list[ElasticJobSpec] = []
    for ts, dur, gpus, line in window:
        off = (ts - t0).total_seconds()
        if max_gpus is not None:
            gpus = min(gpus, max_gpus)
        app = _philly_app(dur * gpus / 3600)
        model = pollux_app(app)
        # smallest measured batch size that lets every requested GPU get a minimal local batch
        bsz = next(
            (v.batch_size for v in model.validation if v.batch_size >= gpus * model.min_local_bsz), model.max_batch_size
        )
        gpus = min(gpus, model.max_replicas(bsz))
        speed = PolluxJobSpeed(app, bsz)
        from .speed import consolidated_placement

        gpn = 4
        work = dur * speed.rate(consolidated_placement(gpus, gpn))
        lo, hi = default_elastic_range(gpus, model.max_replicas(bsz), max_gpus)
        jobs.append(
            ElasticJobSpec(
                name=f"philly-{line}",
                submit_time=off,
                speed=speed,
                work=work,
                requested=gpus,
                min_workers=lo,
                max_workers=hi,
                application=app,
                batch_size=bsz,
                source=f"{p}:{line}",
            )
        )
    return jobs


def parse_gpu_types(spec: str) -> dict[str, int]:
    """``k80:4,p100:4,v100:4`` -> nodes per GPU type."""
    out: dict[str, int] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" not in part:
            raise ValueError(f"{part!r}: expected TYPE:NODES")
        t, n = part.split(":", 1)
        try:
            k = int(n)
        except ValueError:
            raise ValueError(f"{part!r}: node count must be an integer") from None
        if k < 0 or not t.strip():
            raise ValueError(f"{part!r}: expected TYPE:NODES with NODES >= 0")
        out[t.strip().lower()] = k
    if not out:
        raise ValueError("no GPU types given")
    return out


def jobs_summary(jobs: Iterable[ElasticJobSpec]) -> dict[str, int]:
    out: dict[str, int] = {}
    for j in jobs:
        out[j.application] = out.get(j.application, 0) + 1
    return out


# ---------------------------------------------------------------------------------------------
# Gavel-built workloads (heterogeneous GPU types)
# ---------------------------------------------------------------------------------------------

GAVEL_COLUMNS = ("name", "time", "model", "num_replicas", "duration")


def _gavel_job(
    path: str,
    line: int,
    name: str,
    t: float,
    model: str,
    reps: int,
    duration: float,
    max_gpus: int | None,
    gpu_type: str | None = None,
) -> ElasticJobSpec:
    from .speed import GavelJobSpeed, consolidated_placement, gavel_table

    table = gavel_table()
    if model not in table.table.get("v100", {}):
        raise WorkloadError(path, line, "model", f"unknown Gavel model {model!r}")
    speed = GavelJobSpeed(model)
    measured = max(table.table["v100"][model])
    reps = min(reps, measured)
    lo, hi = default_elastic_range(reps, measured, max_gpus)
    work = duration * speed.rate(consolidated_placement(reps, 4), "v100")
    return ElasticJobSpec(
        name=name,
        submit_time=t,
        speed=speed,
        work=work,
        requested=reps,
        min_workers=lo,
        max_workers=hi,
        gpu_type=gpu_type,
        application=model,
        source=f"{path}:{line}",
    )


def read_gavel_csv(path: Path | str, max_gpus: int | None = None) -> list[ElasticJobSpec]:
    """``name,time,model,num_replicas,duration``: a Gavel model configuration (e.g.
    ``ResNet-50 (batch size 64)``), and the job's run time in seconds on ``num_replicas`` V100s."""
    p = str(path)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        header, reader = csv_rows(fh, p, GAVEL_COLUMNS)
        return [gavel_row(p, reader.line_num, row, header, max_gpus) for row in reader]


def gavel_row(p: str, line: int, row: dict[str, Any], header: list[str], max_gpus: int | None = None) -> ElasticJobSpec:
    """The job of one row of a Gavel CSV."""
    if any(row.get(c) is None for c in GAVEL_COLUMNS):
        raise WorkloadError(p, line, None, f"expected {len(header)} fields")
    t = _num(p, line, "time", row["time"], float, 0)
    reps = _num(p, line, "num_replicas", row["num_replicas"], int, 1)
    dur = _num(p, line, "duration", row["duration"], float, 0)
    gt = (row.get("gpu_type") or "").strip() or None
    return _gavel_job(p, line, row["name"].strip(), t, row["model"].strip(), reps, dur, max_gpus, gt)


def gavel_workload(
    jobs: int = 96, hours: float = 8.0, seed: int = 0, min_minutes: float = 10.0, max_minutes: float = 300.0
) -> list[tuple[str, float, str, int, float]]:
    """A synthetic trace in the style of Gavel's simulator: Poisson arrivals over ``hours``, model
    configurations drawn uniformly from Gavel's table, scale factors 1/2/4/8 with Philly-like
    frequencies (70/10/15/5 %, limited to what was measured), and durations log-uniform between
    ``min_minutes`` and ``max_minutes`` on V100s.  Rows: (name, time, model, replicas, duration_s)."""
    import numpy as np

    from .speed import gavel_table

    rng = np.random.default_rng(seed)
    table = gavel_table()
    models = table.models
    times = np.sort(rng.uniform(0, hours * 3600, size=jobs))
    rows: list[tuple[str, float, str, int, float]] = []
    for i, t in enumerate(times):
        model = models[int(rng.integers(len(models)))]
        sf = int(rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05]))
        measured = sorted(table.table["v100"][model])
        sf = max(s for s in measured if s <= sf)
        dur = 60 * 10 ** rng.uniform(math.log10(min_minutes), math.log10(max_minutes))
        rows.append((f"gavel-{i}", float(round(t)), model, sf, float(round(dur))))
    return rows


def write_gavel_csv(rows: Iterable[Sequence[object]], path: Path | str) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(GAVEL_COLUMNS)
        for r in rows:
            w.writerow(r)
