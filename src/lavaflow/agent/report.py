"""What the agent measures and the report it writes, in the scheduler's format.

The report is the annotation ``lavaflow.io/metrics`` (one JSON object; the scheduler parses it
with ``lavaflow.elastic.learned.parse_report``) beside the progress annotations
``lavaflow.io/progress``, ``lavaflow.io/progress-time`` and ``lavaflow.io/gpu-seconds``
(``lavaflow.elastic.spec.progress``).  Field by field:

* ``profile``: ``[gpuType, nodes, replicas, localBsz, accumSteps, stepTime, syncTime]`` rows,
  the mean seconds per optimiser step (and the part of it spent synchronising gradients) on
  each configuration the job ran, for jobs whose speed model is Pollux's (an application and a
  batch size, adaptive batches): their work is counted in optimiser steps;
* ``rates``: ``[gpuType, nodes, replicas, rate]`` rows, work units per second on each
  configuration, for jobs that declare a measured speed-up table (work in epochs) or a number of
  steps;
* ``batchSize``, ``initBatchSize``, ``maxBatchSize``, ``localBszBounds``, ``gradSqr``,
  ``gradVar`` where known.

Nothing here depends on lavaflow's scheduler (the agent runs in training images): the names are
repeated, and a test checks them against the scheduler's.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "lavaflow.io/"
METRICS = PREFIX + "metrics"
PROGRESS = PREFIX + "progress"
PROGRESS_TIME = PREFIX + "progress-time"
GPU_SECONDS = PREFIX + "gpu-seconds"
MAX_ROWS = 256  # rows a report may carry (the scheduler keeps no more)

PROFILE = "profile"
RATES = "rates"
SPEED_FORMATS = (PROFILE, RATES)


@dataclass
class _Acc:
    """Sums over the measured steps of one configuration; ``seen`` orders rows by last use."""

    count: int = 0
    time: float = 0.0
    sync: float = 0.0
    work: float = 0.0
    seen: int = 0

    def to_list(self) -> list[float]:
        return [self.count, self.time, self.sync, self.work, self.seen]

    @classmethod
    def from_list(cls, v: Iterable[Any]) -> _Acc:
        count, time, sync, work, seen = v
        return cls(int(count), float(time), float(sync), float(work), int(seen))


ProfileKey = tuple[str, int, int, int, int]  # gpuType, nodes, replicas, localBsz, accumSteps
RateKey = tuple[str, int, int]  # gpuType, nodes, replicas


@dataclass
class Measurements:
    """Step times per configuration, kept across restarts (they go into the checkpoint) so that a
    job's report after a resize still carries what it measured at its earlier sizes."""

    profile: dict[ProfileKey, _Acc] = field(default_factory=dict)
    rates: dict[RateKey, _Acc] = field(default_factory=dict)
    _clock: int = 0

    def add(self, key: ProfileKey, step_time: float, sync_time: float, work: float) -> None:
        """One measured optimiser step: ``work`` units done in ``step_time`` seconds."""
        if not (step_time > 0 and math.isfinite(step_time)):
            return
        self._clock += 1
        sync = min(max(sync_time, 0.0), step_time) if math.isfinite(sync_time) else 0.0
        for acc in (self.profile.setdefault(key, _Acc()), self.rates.setdefault(key[:3], _Acc())):
            acc.count += 1
            acc.time += step_time
            acc.sync += sync
            acc.work += work
            acc.seen = self._clock

    def count(self, key: ProfileKey) -> int:
        acc = self.profile.get(key)
        return acc.count if acc is not None else 0

    def profile_rows(self) -> list[list[Any]]:
        rows = sorted(self.profile.items(), key=lambda kv: kv[1].seen)[-MAX_ROWS:]
        return [[*k, _round(a.time / a.count), _round(a.sync / a.count)] for k, a in rows if a.count]

    def rate_rows(self) -> list[list[Any]]:
        rows = sorted(self.rates.items(), key=lambda kv: kv[1].seen)[-MAX_ROWS:]
        return [[*k, _round(a.work / a.time)] for k, a in rows if a.count and a.time > 0 and a.work > 0]

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": [[*k, *a.to_list()] for k, a in self.profile.items()],
            "rates": [[*k, *a.to_list()] for k, a in self.rates.items()],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Measurements:
        out = cls()
        for row in d.get("profile") or ():
            out.profile[(str(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]))] = _Acc.from_list(row[5:])
        for row in d.get("rates") or ():
            out.rates[(str(row[0]), int(row[1]), int(row[2]))] = _Acc.from_list(row[3:])
        out._clock = max([a.seen for a in (*out.profile.values(), *out.rates.values())], default=0)
        return out


def _round(x: float) -> float:
    """Six significant digits: a report is read by people too, and need not be longer."""
    return float(f"{x:.6g}")


@dataclass
class BatchInfo:
    """The batch as the report states it (``None``: not stated)."""

    batch_size: int | None = None
    init_batch_size: int | None = None
    max_batch_size: int | None = None
    local_bsz_bounds: tuple[int, int] | None = None


def metrics_json(
    measurements: Measurements,
    speed_format: str,
    batch: BatchInfo,
    grad: tuple[float, float] | None = None,
) -> str:
    """The ``lavaflow.io/metrics`` value."""
    if speed_format not in SPEED_FORMATS:
        raise ValueError(f"speed format {speed_format!r}: expected one of {', '.join(SPEED_FORMATS)}")
    out: dict[str, Any] = {}
    rows = measurements.profile_rows() if speed_format == PROFILE else measurements.rate_rows()
    if rows:
        out[speed_format] = rows
    for key, v in (
        ("batchSize", batch.batch_size),
        ("initBatchSize", batch.init_batch_size),
        ("maxBatchSize", batch.max_batch_size),
    ):
        if v is not None and v > 0:
            out[key] = int(v)
    if batch.local_bsz_bounds is not None:
        out["localBszBounds"] = [int(batch.local_bsz_bounds[0]), int(batch.local_bsz_bounds[1])]
    if grad is not None and all(math.isfinite(g) for g in grad):
        out["gradSqr"] = _round(max(grad[0], 0.0))
        out["gradVar"] = _round(max(grad[1], 0.0))
    return json.dumps(out, separators=(",", ":"))


def rfc3339(t: float) -> str:
    """``t`` (seconds since the epoch) as RFC 3339 in UTC, as Kubernetes writes times."""
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def report_annotations(metrics: str, progress: float | None, at: float, gpu_seconds: float) -> dict[str, str]:
    """The annotations of one report: the metrics, and the progress where the total is known."""
    out = {METRICS: metrics}
    if progress is not None:
        out[PROGRESS] = f"{min(max(progress, 0.0), 1.0):.6f}"
        out[PROGRESS_TIME] = rfc3339(at)
        out[GPU_SECONDS] = f"{max(gpu_seconds, 0.0):.1f}"
    return out
