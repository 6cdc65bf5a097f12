"""Speed-up models fitted from the throughput a job reports per worker count.

Voda's metrics collector stores, per worker count ``k`` a job has run with, the mean epoch (or
step) time; counts never run keep a linear-speed-up placeholder and nothing is interpolated.  Here a
job's measured points ``{workers: rate}`` (samples/s, steps/s or 1/epoch-time — any unit, as long as
it is one) are turned into a rate for *every* worker count:

* **fit** (≥ 3 distinct worker counts): the step-time model of data-parallel training
  ``T(n) = a + b / n + c · (n − 1)`` (a: serial part, b: parallel compute, c: communication per extra
  worker; all ≥ 0), i.e. ``rate(n) = 1 / T(n)`` up to scale — Amdahl's law plus a linear
  communication overhead — fitted by ``scipy.optimize.curve_fit`` on the step times.  It is kept if
  its relative RMS error over the measured points is at most ``max_rel_error`` (10 %);
* otherwise **interpolation**: piecewise-linear through the measured points (exact there).

Either way, measured worker counts return the measured value (``exact_at_measured``), between them
the model (fit) or the line (interpolation), and outside the measured range the value is bounded:
never more than linear scaling from the nearest measured point (``rate(n) ≤ rate(m) · n / m`` for
``n > m``), never less than zero, and — with ``monotone=True`` (default) — never below the best
measured rate at fewer workers, since a scheduler can always leave extra workers idle.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, overload

import numpy as np


class MeasurementError(ValueError):
    pass


def parse_measurements(obj: object) -> dict[int, float]:
    """Measured points from what a job reports: a mapping ``{workers: rate}`` (keys may be strings,
    as in Voda's Mongo records), a list of ``{"workers": k, "rate"|"samples_per_second"|
    "steps_per_second"|"epoch_time_sec"|"step_time_sec": v}`` rows (several rows per k are
    averaged), a JSON text of either, or ``"1:100,2:180"``."""
    if isinstance(obj, (bytes, str)):
        text = obj.decode() if isinstance(obj, bytes) else obj
        text = text.strip()
        if text.startswith(("{", "[")):
            return parse_measurements(json.loads(text))
        pts: dict[int, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            k, sep, v = part.partition(":")
            if not sep:
                raise MeasurementError(f"expected 'workers:rate', got {part!r}")
            try:
                pts[int(k)] = float(v)
            except ValueError:
                raise MeasurementError(f"expected 'workers:rate', got {part!r}") from None
        return _check(pts)
    if isinstance(obj, Mapping):
        try:
            return _check({int(k): float(v) for k, v in obj.items()})
        except (TypeError, ValueError):
            raise MeasurementError(f"expected {{workers: rate}}, got {obj!r}") from None
    if isinstance(obj, Iterable):
        acc: dict[int, list[float]] = defaultdict(list)
        for row in obj:
            acc[int(row["workers"])].append(_row_rate(row))
        return _check({k: float(np.mean(v)) for k, v in acc.items()})
    raise MeasurementError(f"cannot read measurements from {type(obj).__name__}")


def _row_rate(row: Mapping[str, Any]) -> float:
    for key in ("rate", "samples_per_second", "steps_per_second", "throughput"):
        if row.get(key) not in (None, ""):
            return float(row[key])
    for key in ("epoch_time_sec", "step_time_sec", "step_time"):
        if row.get(key) not in (None, ""):
            t = float(row[key])
            if t <= 0:
                raise MeasurementError(f"{key} must be > 0, got {t}")
            return 1.0 / t
    raise MeasurementError(f"row without a rate or a time: {dict(row)!r}")


def read_voda_metrics_csv(path: Path | str) -> dict[int, float]:
    """Rates (1 / mean epoch time) per worker count from a Voda ``MetricsCSVLogger`` file
    (``/metrics/<job>.csv``: one row per epoch with ``workers`` and ``epoch_time_sec``)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return parse_measurements(list(csv.DictReader(fh)))


def _check(pts: dict[int, float]) -> dict[int, float]:
    if not pts:
        raise MeasurementError("no measurements")
    for k, v in pts.items():
        if k < 1:
            raise MeasurementError(f"worker count must be >= 1, got {k}")
        if not math.isfinite(v) or v <= 0:
            raise MeasurementError(f"rate at {k} workers must be > 0, got {v}")
    return dict(sorted(pts.items()))


@overload
def _step_time(n: float, a: float, b: float, c: float) -> float: ...
@overload
def _step_time(n: np.ndarray, a: float, b: float, c: float) -> np.ndarray: ...
def _step_time(n: float | np.ndarray, a: float, b: float, c: float) -> float | np.ndarray:
    return a + b / n + c * (n - 1)


@dataclass
class FittedSpeed:
    """A job's rate for any worker count, from measured points (see module docstring).

    ``rate(placement, gpu_type)`` follows the simulator's speed-model interface (``placement``: a
    worker count or per-node counts); ``per_type`` scales the rate per GPU type."""

    points: dict[int, float]
    method: str = "interp"  # "fit" or "interp"
    params: tuple[float, float, float] | None = None  # (a, b, c) of the step-time model
    rel_error: float | None = None
    monotone: bool = True
    per_type: dict[str, float] = field(default_factory=dict)

    def model(self, n: float) -> float:
        """Unbounded value of the fit or the interpolation at ``n`` workers."""
        xs = np.array(list(self.points), dtype=float)
        ys = np.array(list(self.points.values()), dtype=float)
        if self.method == "fit" and self.params is not None:
            return 1.0 / _step_time(float(n), *self.params)
        if n <= xs[0]:
            return float(ys[0] * n / xs[0])
        if n >= xs[-1]:
            if len(xs) == 1:
                return float(ys[-1])
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            return float(ys[-1] + max(slope, 0.0) * (n - xs[-1]))
        return float(np.interp(n, xs, ys))

    def at(self, n: int) -> float:
        if n <= 0:
            return 0.0
        if n in self.points:
            r = self.points[n]
        else:
            r = self.model(n)
            below = [k for k in self.points if k < n]
            above = [k for k in self.points if k > n]
            if below:  # at most linear scaling from the nearest measured point below
                m = max(below)
                r = min(r, self.points[m] * n / m)
            if above and not below:  # below the smallest measurement: never above it
                r = min(r, self.points[min(above)])
            r = max(r, 0.0)
        if self.monotone:
            best = max((v for k, v in self.points.items() if k <= n), default=0.0)
            r = max(r, best)
        return float(r)

    def rate(self, placement: int | np.integer[Any] | Iterable[int], gpu_type: str | None = None) -> float:
        n = placement if isinstance(placement, (int, np.integer)) else sum(placement)
        return self.at(int(n)) * self.per_type.get(gpu_type or "", 1.0)

    def curve(self, max_workers: int) -> tuple[float, ...]:
        return tuple(self.at(n) for n in range(max_workers + 1))

    def speedup(self, n: int) -> float:
        base = self.at(1)
        return self.at(n) / base if base > 0 else 0.0

    def max_useful_workers(self) -> int:
        return 1 << 16


def fit_speed(measurements: object, max_rel_error: float = 0.10, monotone: bool = True) -> FittedSpeed:
    """Fit the step-time model to measured ``{workers: rate}`` points (any form
    :func:`parse_measurements` reads); fall back to interpolation with < 3 points or a poor fit."""
    pts = (
        measurements
        if isinstance(measurements, dict) and all(isinstance(k, int) for k in measurements)
        else parse_measurements(measurements)
    )
    pts = _check(dict(pts))
    if len(pts) >= 3:
        from scipy.optimize import curve_fit

        n = np.array(list(pts), dtype=float)
        r = np.array(list(pts.values()), dtype=float)
        t = 1.0 / r
        t1 = float(t[0] * n[0])  # step time on one worker if scaling were linear
        p0 = (0.1 * t1, 0.9 * t1, 0.0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                popt, _ = curve_fit(_step_time, n, t, p0=p0, bounds=(0.0, np.inf), sigma=t, maxfev=20000)
            pred = 1.0 / _step_time(n, *popt)
            err = float(np.sqrt(np.mean(((pred - r) / r) ** 2)))
            if np.all(np.isfinite(popt)) and err <= max_rel_error:
                params = cast("tuple[float, float, float]", tuple(float(x) for x in popt))  # (curve_fit's a, b, c)
                return FittedSpeed(pts, "fit", params, err, monotone)
        except (RuntimeError, ValueError):
            pass
    return FittedSpeed(pts, "interp", None, None, monotone)


__all__ = ["FittedSpeed", "MeasurementError", "fit_speed", "parse_measurements", "read_voda_metrics_csv"]
