"""The speed of a job of one of the Pollux applications, from the Pollux traces.

The traces (``pollux/traces/<app>/``, measured on T4 GPUs) give the step time of six applications
for each *placement* (per-node replica counts, e.g. ``(1, 1, 2, 2)``) and local batch size, plus a
coarser table for large clusters (``scalability.csv``) and per-epoch gradient statistics at several
global batch sizes (``validation-<bsz>.csv``); :class:`PolluxApp` holds one application's.

A job trains at a fixed global batch size ``B``.  With ``r`` replicas each replica processes
``ceil(B / r)`` samples per step, split into gradient-accumulation micro-steps when that exceeds
the application's largest local batch.  The step time for the placement comes from the table
(interpolated linearly over local batch size), or, for placements not measured, from a linear
interpolation over (#nodes, #replicas, local batch) of all measurements (:mod:`.interpolation`).

The *work* of a job is the number of optimiser steps it needs at batch size ``B``: the
validation files give, per epoch, the progress (in samples scaled to the smallest batch size)
and the gradient noise statistics; at batch ``B`` one step yields a statistical gain of
``(var + sqr) / (var / s + sqr)`` progress units with ``s = B / B_min``.  Summing
``Δprogress / gain`` over the application's epochs gives the steps the job must run.  Progress per
second is then ``1 / step_time``.

:class:`PolluxJobSpeed` is one job's speed: at a fixed batch, or choosing its batch per placement
and training phase (Pollux's co-adaptation); on other GPU types than the T4 its rate is scaled by
:func:`type_factor`, from the Gavel throughputs (:mod:`.gavel`).
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..data_paths import pollux_trace_dir
from .common import canonical_placement
from .gavel import gavel_table
from .interpolation import _barycentric_transforms, _delaunay, _LinearND

POLLUX_APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
# The Pollux artifact limits yolov3's per-replica batch to 8 (GPU memory); others use the
# largest measured local batch.
_MAX_LOCAL_BSZ_OVERRIDE = {"yolov3": 8}

# Gavel model closest to each Pollux application, used only for GPU-type speed *ratios*.
POLLUX_TO_GAVEL = {
    "cifar10": "ResNet-18 (batch size 128)",
    "imagenet": "ResNet-50 (batch size 64)",
    "bert": "Transformer (batch size 64)",
    "ncf": "Recommendation (batch size 2048)",
    "deepspeech2": "LM (batch size 20)",
    "yolov3": "ResNet-50 (batch size 32)",
}
# Pollux measured on T4s; we treat a T4 as the reference (factor 1) and, lacking a T4 column in
# Gavel, equate it with a P100 (similar FP32 throughput).  Documented in docs/elastic.md.
REFERENCE_TYPE = "p100"
REFERENCE_ALIASES = {"t4", "p100", "default", ""}


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


@dataclass
class _Validation:
    batch_size: int
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


class PolluxApp:
    """Measured step times and statistical efficiency of one Pollux application."""

    def __init__(
        self,
        name: str,
        trace_dir: Path | None = None,
        suffix: str = "",
        max_local_bsz: dict[str, int] | None = None,
    ) -> None:
        """``suffix``: read ``placements-<suffix>.csv`` and ``scalability-<suffix>.csv`` (one GPU
        type's measurements, as Sia's artifact has them) instead of ``placements.csv`` and
        ``scalability.csv``; ``max_local_bsz``: per application, a per-replica batch limit below
        the largest measured one (default: the Pollux artifact's)."""
        self.name = name
        d = Path(trace_dir) if trace_dir is not None else pollux_trace_dir(name)
        tail = f"-{suffix}" if suffix else ""
        grouped: dict[tuple[int, ...], dict[int, list[tuple[float, float]]]] = {}
        for row in _read_csv(d / f"placements{tail}.csv"):
            pl = canonical_placement(int(c) for c in row["placement"].strip())
            grouped.setdefault(pl, {}).setdefault(int(row["local_bsz"]), []).append(
                (float(row["step_time"]), float(row["sync_time"]))
            )
        self.placements: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        pts: list[tuple[float, float, float, float, float]] = []
        for pl, by_bsz in grouped.items():
            bs = np.array(sorted(by_bsz), dtype=float)
            st = np.array([np.mean([v[0] for v in by_bsz[int(b)]]) for b in bs])
            sy = np.array([np.mean([v[1] for v in by_bsz[int(b)]]) for b in bs])
            self.placements[pl] = (bs, st, sy)
            for b, s, y in zip(bs, st, sy):
                pts.append((len(pl), sum(pl), b, s, y))
        for row in _read_csv(d / f"scalability{tail}.csv"):
            pts.append(
                (
                    float(row["num_nodes"]),
                    float(row["num_replicas"]),
                    float(row["local_bsz"]),
                    float(row["step_time"]),
                    float(row["sync_time"]),
                )
            )
        self._points = np.array(pts, dtype=float)
        self._interp: _LinearND | None = None
        vals: list[_Validation] = []
        for p in sorted(d.glob("validation-*.csv")):
            bsz = int(p.stem.split("-")[-1])
            rows = _read_csv(p)
            vals.append(
                _Validation(
                    bsz,
                    np.array([float(r["progress"]) for r in rows]),
                    np.array([float(r["grad_sqr"]) for r in rows]),
                    np.array([float(r["grad_var"]) for r in rows]),
                )
            )
        if not vals:
            raise ValueError(f"{d}: no validation-*.csv files")
        vals.sort(key=lambda v: v.batch_size)
        self.validation = vals
        self.max_epochs = min(len(v.progress) for v in vals)
        # progress at the end of each epoch (the slowest-progressing run, as Pollux does)
        self.epoch_progress = np.min(np.stack([v.progress[: self.max_epochs] for v in vals]), axis=0)
        self.init_batch_size = vals[0].batch_size
        self.max_batch_size = vals[-1].batch_size
        all_bsz = np.concatenate([v[0] for v in self.placements.values()])
        self.min_local_bsz = int(all_bsz.min())
        limits = _MAX_LOCAL_BSZ_OVERRIDE if max_local_bsz is None else max_local_bsz
        self.max_local_bsz = int(limits.get(name, all_bsz.max()))
        self._step_cache: dict[tuple[tuple[int, ...], int], tuple[float, float]] = {}
        self._work_cache: dict[int, float] = {}
        self._steps_cache: dict[int, np.ndarray] = {}
        self._rate_cache: dict[tuple[tuple[int, ...], int], float] = {}
        self._grad_cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    # -- step time -----------------------------------------------------------------------------
    def _interpolate(self, nodes: float, replicas: float, bsz: float) -> tuple[float, float]:
        self._build_interpolators()
        assert self._interp is not None
        q = np.array([[nodes, replicas, bsz]]) / self._scale
        out = self._interp(q.tolist())[0]
        if not all(math.isfinite(v) for v in out):
            out = self._interp.nearest(q.tolist()[0])
        return float(out[0]), float(out[1])

    def _build_interpolators(self) -> None:
        if self._interp is None:
            # merge duplicate (nodes, replicas, bsz) points by mean
            keys: dict[tuple[float, float, float], list[tuple[float, float]]] = {}
            for n, r, b, s, y in self._points:
                keys.setdefault((n, r, b), []).append((s, y))
            xs = np.array(list(keys), dtype=float)
            ys = np.array([np.mean(v, axis=0) for v in keys.values()])
            scale = xs.max(axis=0)
            self._scale = scale
            tri = _delaunay(xs / scale)
            # scipy computes the barycentric transforms lazily, simplex by simplex, on the first
            # query: seconds per application on these nearly flat point sets.  The same transforms,
            # vectorised (equal NaN pattern for degenerate simplices, equal values to rounding):
            self._interp = _LinearND(tri, _barycentric_transforms(tri.points, tri.simplices), ys)

    def prefill_step_times(self, placement: Iterable[int], local_bszs: Iterable[int]) -> None:
        """Interpolate the step times of several local batches on an unmeasured placement in one
        call (the adaptive-batch search asks for ~50 at a time); same values as :meth:`step_time`."""
        pl = canonical_placement(placement)
        if not pl or pl in self.placements:
            return
        todo = sorted({int(b) for b in local_bszs if (pl, int(b)) not in self._step_cache})
        if not todo:
            return
        self._build_interpolators()
        assert self._interp is not None
        nodes = min(len(pl), 16)
        q = (np.array([[nodes, sum(pl), float(b)] for b in todo]) / self._scale).tolist()
        out = self._interp(q)
        for b, x, (st, sy) in zip(todo, q, out):
            if not (math.isfinite(st) and math.isfinite(sy)):
                st, sy = self._interp.nearest(x)
            self._step_cache[(pl, b)] = (max(st, 1e-6), max(min(sy, st), 0.0))

    def step_time(self, placement: Iterable[int], local_bsz: int) -> tuple[float, float]:
        """(step_time, sync_time) in seconds for one step of ``local_bsz`` samples per replica."""
        pl = canonical_placement(placement)
        key = (pl, int(local_bsz))
        hit = self._step_cache.get(key)
        if hit is not None:
            return hit
        if pl in self.placements:
            bs, st, sy = self.placements[pl]
            b = float(local_bsz)
            if b > bs[-1] and len(bs) >= 2:
                # beyond the largest measured batch: extend the last segment linearly
                slope_s = (st[-1] - st[-2]) / (bs[-1] - bs[-2])
                res = (float(st[-1] + slope_s * (b - bs[-1])), float(sy[-1]))
            else:
                res = (float(np.interp(b, bs, st)), float(np.interp(b, bs, sy)))
        else:
            nodes = min(len(pl), 16)
            res = self._interpolate(nodes, sum(pl), float(local_bsz))
        res = (max(res[0], 1e-6), max(min(res[1], res[0]), 0.0))
        self._step_cache[key] = res
        return res

    def batch_config(self, replicas: int, batch_size: int) -> tuple[int, int]:
        """(micro-batch per replica, accumulation steps) for a global batch on ``replicas``."""
        local = math.ceil(batch_size / replicas - 1e-9)
        accum = max(math.ceil(local / self.max_local_bsz - 1e-9) - 1, 0)
        atomic = math.ceil(local / (accum + 1) - 1e-9)
        return max(atomic, 1), accum

    def max_replicas(self, batch_size: int) -> int:
        """Largest replica count whose per-replica batch is still at least the smallest measured."""
        return max(1, batch_size // self.min_local_bsz)

    def rate(self, placement: Iterable[int], batch_size: int) -> float:
        """Optimiser steps per second at global batch ``batch_size`` on ``placement``."""
        pl = canonical_placement(placement)
        if not pl:
            return 0.0
        key = (pl, int(batch_size))
        hit = self._rate_cache.get(key)
        if hit is not None:
            return hit
        r = sum(pl)
        atomic, accum = self.batch_config(r, batch_size)
        step, sync = self.step_time(pl, atomic)
        total = step + accum * (step - sync)
        # rounding may make the real batch a little larger than B: count that as extra progress
        real_batch = r * atomic * (accum + 1)
        res = (real_batch / batch_size) / total if total > 0 else 0.0
        self._rate_cache[key] = res
        return res

    # -- work ----------------------------------------------------------------------------------
    def epoch_steps(self, batch_size: int) -> np.ndarray:
        """Optimiser steps each epoch takes at batch ``batch_size`` (they sum to :meth:`work`)."""
        hit = self._steps_cache.get(int(batch_size))
        if hit is not None:
            return hit
        scale = batch_size / self.init_batch_size
        sqr, var = self._grad_stats(batch_size)
        den = var / scale + sqr
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(den > 0, (var + sqr) / den, 1.0)
        made = np.diff(self.epoch_progress, prepend=0.0)  # progress made in each epoch
        out: np.ndarray = made / gain
        self._steps_cache[int(batch_size)] = out
        return out

    def _grad_stats(self, batch_size: float) -> tuple[np.ndarray, np.ndarray]:
        """Gradient square and variance at ``batch_size`` in every epoch, interpolated linearly between
        the measured batches (clamped to them); kept per batch (a job's agent reads them at every
        measurement): the arrays are only read."""
        hit = self._grad_cache.get(batch_size)
        if hit is None:
            hit = self._grad_cache[batch_size] = self._grad_stats_at(batch_size)
        return hit

    def _grad_stats_at(self, batch_size: float) -> tuple[np.ndarray, np.ndarray]:
        vals = self.validation
        n = self.max_epochs
        bs = [v.batch_size for v in vals]
        b = min(max(float(batch_size), bs[0]), bs[-1])
        hi = int(np.searchsorted(bs, b))
        lo = hi if bs[hi] == b else hi - 1
        if lo == hi:
            return vals[lo].grad_sqr[:n], vals[lo].grad_var[:n]
        w = (b - bs[lo]) / (bs[hi] - bs[lo])
        sqr = (1 - w) * vals[lo].grad_sqr[:n] + w * vals[hi].grad_sqr[:n]
        var = (1 - w) * vals[lo].grad_var[:n] + w * vals[hi].grad_var[:n]
        return sqr, var

    def phase_ends(self, phases: int) -> tuple[int, ...]:
        """Last epoch of each of ``phases`` training phases of about equal progress (fewer when
        epochs are fewer): the boundaries at which an adaptive job re-chooses its batch."""
        total = float(self.epoch_progress[-1])
        ends: list[int] = []
        for k in range(1, max(int(phases), 1)):
            e = int(np.searchsorted(self.epoch_progress, total * k / phases - 1e-9 * total))
            e = min(e, self.max_epochs - 1)
            if (not ends or e > ends[-1]) and e < self.max_epochs - 1:
                ends.append(e)
        ends.append(self.max_epochs - 1)
        return tuple(ends)

    def work(self, batch_size: int) -> float:
        """Optimiser steps needed to train for the application's epochs at batch ``batch_size``."""
        hit = self._work_cache.get(int(batch_size))
        if hit is not None:
            return hit
        total = 0.0
        for steps in self.epoch_steps(batch_size).tolist():  # summed in epoch order
            total += steps
        self._work_cache[int(batch_size)] = total
        return total


@cache
def pollux_app(name: str) -> PolluxApp:
    if name not in POLLUX_APPS:
        raise KeyError(name)
    return PolluxApp(name)


def type_factor(app: str, gpu_type: str | None) -> float:
    """Speed of a Pollux application on ``gpu_type`` relative to the T4 measurements."""
    if gpu_type is None or gpu_type.lower() in REFERENCE_ALIASES:
        return 1.0
    t = gpu_type.lower()
    try:
        table = gavel_table()
    except FileNotFoundError:
        return 1.0
    model = POLLUX_TO_GAVEL.get(app)
    if model is None or t not in table.table or model not in table.table[t]:
        return 1.0
    return table.isolated(model, t) / table.isolated(model, REFERENCE_TYPE)


# ---------------------------------------------------------------------------------------------
# One job's speed (fixed or adaptive batch)
# ---------------------------------------------------------------------------------------------


# (model, batch, limit, placement, phases) -> best (goodput, batch) per phase, then for the whole run
_BEST_BATCH: dict[tuple[Any, int, int, tuple[int, ...], int], tuple[tuple[float, int], ...]] = {}
_GAINS: dict[tuple[str, int, int], np.ndarray] = {}  # (app, phases, batch) -> gain per phase, whole run
_PHASE_EPOCHS: dict[tuple[str, int], tuple[tuple[int, int], ...]] = {}  # first and last epoch per phase
_PHASE_BOUNDS: dict[tuple[str, int], tuple[float, ...]] = {}  # (app, phases) -> bounds
# Training phases of about equal statistical progress in which an adaptive job re-chooses its
# batch (Pollux's agent re-tunes it every epoch; 20 phases come within ~2 % of per-epoch re-tuning
# in run time for the Pollux applications, with 5x fewer rate changes to simulate).
DEFAULT_PHASES = 20


def _first_better(values: np.ndarray) -> int:
    """Index of the value a scan keeps when a later value must beat the kept one by > 1e-15."""
    best, at = -1.0, 0
    for i, v in enumerate(values.tolist()):
        if v > best + 1e-15:
            best, at = v, i
    return at


@cache
def _batch_grid(lo: int, hi: int, points: int = 50) -> tuple[int, ...]:
    return tuple(sorted({int(round(b)) for b in np.geomspace(lo, hi, points)}))


@dataclass
class PolluxJobSpeed:
    """A job of a Pollux application.

    Fixed batch (``adaptive=False``, default): the job trains at global batch ``batch_size``; its
    work and rate are in optimiser steps at that batch.

    Adaptive batch (``adaptive=True``, Pollux's co-adaptation): for every placement the job trains
    at the batch size that maximises *goodput* = throughput × statistical efficiency, chosen among
    ``batch_size``, max(the application's smallest measured batch, replicas × smallest per-GPU
    batch) and the sizes of a 50-point geometric grid from the smallest measured batch to
    ``max_batch_size`` (default: the application's largest measured batch) that lie in between, with gradient accumulation above the largest per-GPU batch.  Work and
    rate are then in batch-agnostic *statistical progress* units (the traces' progress, in samples
    at the smallest batch): total work is the application's progress at the end of training and a
    batch ``B`` makes ``G(B) = progress / work(B)`` progress per optimiser step — the statistical gain
    ``(var + sqr) / (var / s + sqr)`` averaged over training the way a fixed-batch run experiences
    it, so a job kept at ``batch_size`` finishes at exactly the same time in both units.  The batch
    is chosen per placement, not re-chosen per epoch as Pollux's agent does (a stateless rate; this
    slightly under-estimates what adaptation gains).  All parameters are plain values (annotations:
    ``lavaflow.io/application``, ``lavaflow.io/batch-size``, ``lavaflow.io/adaptive-batch``,
    ``lavaflow.io/max-batch-size``).
    """

    app: str
    batch_size: int
    adaptive: bool = False
    max_batch_size: int | None = None
    phases: int = -1  # -1: DEFAULT_PHASES
    _factors: dict[str, float] = field(default_factory=dict, repr=False)
    # (placement as given, GPU type) -> rate in each training phase, then for the whole run
    _rates: dict[tuple[tuple[int, ...], str | None], tuple[float, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _bounds_memo: tuple[int, tuple[float, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )  # (phases, _bounds())
    # fixed batch: rate per (placement as given, GPU type), the value rate() computes
    _fixed: dict[tuple[tuple[int, ...], str | None], float] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.phases is None or self.phases < 0:
            self.phases = DEFAULT_PHASES

    @property
    def model(self) -> PolluxApp:
        return pollux_app(self.app)

    def model_for(self, gpu_type: str | None) -> PolluxApp:
        """The measurements the job runs by on ``gpu_type``: the T4 tables on every type (the
        type's speed is a factor, :meth:`_factor`); per type for a speed measured per type."""
        return self.model

    def _model_key(self, gpu_type: str | None = None) -> Any:
        """What identifies :meth:`model_for`'s measurements in the shared caches."""
        return self.app

    @property
    def batch_limit(self) -> int:
        """Largest batch an adaptive job may use (never below its own batch size)."""
        hi = self.max_batch_size if self.max_batch_size is not None else self.model.max_batch_size
        return max(int(hi), int(self.batch_size))

    def total_work(self) -> float:
        if self.adaptive:
            return float(self.model.epoch_progress[-1])
        return self.model.work(self.batch_size)

    def max_useful_workers(self) -> int:
        if self.adaptive:
            return max(self.model.max_replicas(self.batch_limit), self.model.max_replicas(self.batch_size))
        return self.model.max_replicas(self.batch_size)

    def gain(self, batch_size: int, phase: int | None = None) -> float:
        """Statistical progress per optimiser step at ``batch_size``: averaged over training
        (``phase`` None), or over one training phase (see :attr:`phase_bounds`)."""
        m = self.model
        if phase is None:
            return float(m.epoch_progress[-1]) / m.work(batch_size)
        lo, hi = self._phase_epochs[phase]
        steps = float(m.epoch_steps(batch_size)[lo : hi + 1].sum())
        start = float(m.epoch_progress[lo - 1]) if lo > 0 else 0.0
        return (float(m.epoch_progress[hi]) - start) / steps if steps > 0 else 0.0

    @property
    def _phase_epochs(self) -> tuple[tuple[int, int], ...]:
        key = (self._model_key(), self.phases)
        hit = _PHASE_EPOCHS.get(key)
        if hit is None:
            ends = self.model.phase_ends(self.phases)
            hit = _PHASE_EPOCHS[key] = tuple((ends[i - 1] + 1 if i else 0, e) for i, e in enumerate(ends))
        return hit

    @property
    def phase_bounds(self) -> tuple[float, ...]:
        """Progress (work units) at which an adaptive job enters its next training phase; empty for
        a fixed-batch job (its rate does not depend on progress)."""
        if not self.adaptive or self.phases <= 1:
            return ()
        return self._bounds()

    def _bounds(self) -> tuple[float, ...]:
        """The phase bounds, worked out once per application."""
        hit = self._bounds_memo
        if hit is not None and hit[0] == self.phases:
            return hit[1]
        key = (self._model_key(), self.phases)
        found = _PHASE_BOUNDS.get(key)
        if found is None:
            found = _PHASE_BOUNDS[key] = tuple(
                float(self.model.epoch_progress[hi]) for _, hi in self._phase_epochs[:-1]
            )
        self._bounds_memo = (self.phases, found)
        return found

    def phase_of(self, done: float) -> int:
        """The training phase a job is in after ``done`` work units."""
        if not self.adaptive or self.phases <= 1:
            return 0
        b = self._bounds()
        if not b:
            return 0
        return bisect.bisect_right(b, done + 1e-9 * max(b[-1], 1.0))  # = searchsorted(side="right")

    def efficiency(self, batch_size: int) -> float:
        """Statistical efficiency: progress per sample relative to the smallest measured batch (<= 1)."""
        return self.gain(batch_size) * self.model.init_batch_size / batch_size

    def candidate_batches(self, replicas: int, gpu_type: str | None = None) -> list[int]:
        m = self.model_for(gpu_type)
        lo = max(m.init_batch_size, m.min_local_bsz * replicas)
        hi = self.batch_limit
        cands = {int(self.batch_size)}
        if hi >= lo:
            # one fixed geometric grid per application and limit (so work(B) is computed ~50 times,
            # not 50 times per replica count), plus the smallest batch allowed on these replicas
            cands.add(int(lo))
            cands.update(b for b in _batch_grid(m.init_batch_size, hi) if lo <= b <= hi)
        return sorted(b for b in cands if b >= 1)

    def best_batch(
        self, placement: Iterable[int], phase: int | None = None, gpu_type: str | None = None
    ) -> tuple[float, int]:
        """(goodput on the reference GPU type's measurements, batch size) for an adaptive job on
        ``placement`` (of ``gpu_type`` for a speed measured per type): for the whole run (``phase``
        None) or in one training phase."""
        pl = canonical_placement(placement)
        if not pl:
            return (0.0, int(self.batch_size))
        if phase is not None and not self.phase_bounds:
            phase = None
        return self._best_batches(pl, gpu_type)[-1 if phase is None else phase]

    def _best_batches(self, pl: tuple[int, ...], gpu_type: str | None = None) -> tuple[tuple[float, int], ...]:
        """The best (goodput, batch) on canonical placement ``pl`` in every training phase, then
        for the whole run (last), worked out together: the candidates' throughputs are the same in
        every phase, only the statistical gains differ. Shared by every job of the same
        application and limits."""
        key = (
            self._model_key(gpu_type),
            int(self.batch_size),
            self.batch_limit,
            pl,
            self.phases if self.phase_bounds else 0,
        )
        hit = _BEST_BATCH.get(key)
        if hit is not None:
            return hit
        m = self.model_for(gpu_type)
        cands = self.candidate_batches(sum(pl), gpu_type)
        m.prefill_step_times(pl, [m.batch_config(sum(pl), b)[0] for b in cands])
        rates = np.array([m.rate(pl, b) for b in cands])
        gains = np.array([self._gains(b) for b in cands])  # (candidates, phases + 1)
        goodput = rates[:, None] * gains  # (candidates, phases + 1)
        # The first candidate that beats every earlier one by more than 1e-15 wins; in a column
        # that is the argmax unless another candidate comes within 1e-15 of it.
        best = goodput.argmax(axis=0)
        top = goodput[best, np.arange(goodput.shape[1])]
        near = np.count_nonzero(goodput >= top - 1e-15, axis=0)
        out = []
        for col, (i, n) in enumerate(zip(best.tolist(), near.tolist())):
            if n > 1:
                i = _first_better(goodput[:, col])
            out.append((float(goodput[i, col]), int(cands[i])))
        hit = _BEST_BATCH[key] = tuple(out)
        return hit

    def _gains(self, batch_size: int) -> np.ndarray:
        """:meth:`gain` of ``batch_size`` in each training phase, then over the whole run."""
        key = (self._model_key(), self.phases if self.phase_bounds else 0, int(batch_size))
        hit = _GAINS.get(key)
        if hit is None:
            phases = range(len(self.phase_bounds) + 1) if self.phase_bounds else ()
            hit = _GAINS[key] = np.array([*(self.gain(batch_size, p) for p in phases), self.gain(batch_size)])
        return hit

    def rate(self, placement: Iterable[int], gpu_type: str | None = None, phase: int | None = None) -> float:
        """Work units per second on ``placement``; for an adaptive job in training phase ``phase``
        (None: at the batch that is best for the whole run)."""
        if self.adaptive:
            rates = self.phase_rates(placement, gpu_type)
            return rates[-1 if phase is None or len(rates) == 1 else phase]
        key = (placement if isinstance(placement, tuple) else tuple(placement), gpu_type)
        hit = self._fixed.get(key)
        if hit is None:
            hit = self._fixed[key] = self.model_for(gpu_type).rate(placement, self.batch_size) * self._factor(gpu_type)
        return hit

    def rate_with_batch(
        self, placement: Iterable[int], gpu_type: str | None, phase: int | None, batch_size: int
    ) -> float:
        """Work units per second on ``placement`` of an adaptive job training at ``batch_size``
        (the batch its own agent chose) in training phase ``phase``: the truth, whatever the batch."""
        pl = canonical_placement(placement)
        if not pl:
            return 0.0
        gains = self._gains(int(batch_size))
        g = gains[-1 if phase is None or len(gains) == 1 else min(phase, len(gains) - 2)]
        return self.model_for(gpu_type).rate(pl, int(batch_size)) * float(g) * self._factor(gpu_type)

    def phase_rates(self, placement: Iterable[int], gpu_type: str | None = None) -> tuple[float, ...]:
        """An adaptive job's rate on ``placement`` in each training phase, then for the whole run
        (one value when it has no phases), kept per placement and type."""
        key = (placement if isinstance(placement, tuple) else tuple(placement), gpu_type)
        hit = self._rates.get(key)
        if hit is None:
            pl = canonical_placement(placement)
            f = self._factor(gpu_type)
            if not pl:  # no workers: nothing in any phase
                hit = (0.0,) * (len(self.phase_bounds) + 2 if self.phase_bounds else 1)
            else:
                hit = tuple(g * f for g, _ in self._best_batches(pl, gpu_type))
            self._rates[key] = hit
        return hit

    def _factor(self, gpu_type: str | None) -> float:
        f = self._factors.get(gpu_type or "")
        if f is None:
            f = self._factors[gpu_type or ""] = type_factor(self.app, gpu_type)
        return f
