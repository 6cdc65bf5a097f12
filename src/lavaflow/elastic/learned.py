"""Speed models learned from what a training job reports, as a real scheduler has them.

A scheduler on a cluster does not know how fast a job trains on a placement it has not run on:
it learns it from the job's own measurements.  This module holds

* the **report** a training job (its agent, like AdaptDL's) writes on its PodGroup — the
  annotation ``lavaflow.io/metrics``, JSON (field names as in AdaptDL's scheduling hints)::

      {"profile": [["t4", 1, 4, 64, 0, 0.213, 0.051], ...],   # gpuType, nodes, replicas,
                                                                # localBsz, accumSteps,
                                                                # stepTime s, syncTime s
       "rates": [["v100", 1, 2, 3.2], ...],   # jobs without a batch model: gpuType, nodes,
                                              # replicas, work units per second
       "batchSize": 512, "gradSqr": 0.11, "gradVar": 2.3,     # now (adaptive-batch jobs)
       "initBatchSize": 128, "maxBatchSize": 4096, "localBszBounds": [32, 256]}

  beside the progress report (``lavaflow.io/progress``, ``-time``, ``gpu-seconds``).  Every
  field is optional; a malformed report is ignored (the job is scheduled as if it had reported
  nothing);
* the **throughput model** fitted from the profile, in Pollux's parametric form: compute time
  per micro-step ``Tc = αc + βc·b`` (b: per-replica batch), synchronisation time
  ``Tn = α + β·max(r − 2, 0)`` with one (α, β) pair for jobs spread over nodes and one for jobs
  within a node, and a step time ``(Tc^γ + Tn^γ)^(1/γ)`` (γ ∈ [1, 10]: how far the two overlap);
  gradient accumulation adds ``Tc`` per extra micro-step.  Fitted by least squares with bounds
  (all parameters ≥ 0, relative errors, γ on a grid), one fit per GPU type;
* :class:`LearnedSpeed`, the speed object the policies read instead of the simulator's true
  model: rates per placement from the fit (and, for an adaptive-batch job, at the batch with the
  best goodput under the gradient statistics it reported last), a placeholder before the first
  measurement (linear speed-up), and no more workers than twice the most it has been measured
  on (:attr:`LearnedSpeed.max_allowed`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from . import spec as es

METRICS = es.PREFIX + "metrics"
# One more micro-step on one replica without gradient accumulation: the placeholder rate before a
# job has reported anything (work units per second per worker; only speed-ups matter then).
PLACEHOLDER_RATE = 1.0
_GAMMAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0)
_LO = 1e-8
_MAX_PROFILE = 256  # entries a report may carry (the newest kept by the writer)


@dataclass(frozen=True)
class Measurement:
    """One profiled configuration: seconds per optimiser step and the part of it spent syncing."""

    gpu_type: str
    nodes: int
    replicas: int
    local_bsz: int
    accum_steps: int
    step_time: float
    sync_time: float

    def __hash__(self) -> int:
        # The dataclass's hash (of the fields), kept: a profile of up to 256 measurements is hashed
        # whenever a model is fitted from it (the fits are cached under the profile).
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self._fields())
            object.__setattr__(self, "_hash", h)
        return h

    def _fields(self) -> tuple[str, int, int, int, int, float, float]:
        """The fields in their order (a report's JSON row lists them so)."""
        return (
            self.gpu_type,
            self.nodes,
            self.replicas,
            self.local_bsz,
            self.accum_steps,
            self.step_time,
            self.sync_time,
        )

    def __getstate__(self) -> dict[str, Any]:
        # (str hashes differ per process; the JSON is worked out again where needed)
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_json")}

    def json_row(self) -> str:
        """The measurement as a report's JSON writes it (``Report.to_json``), kept: a job's
        reports repeat its earlier measurements, each written again with every new one."""
        row = self.__dict__.get("_json")
        if row is None:
            row = json.dumps(self._fields(), separators=(",", ":"))  # (a tuple is written as a list)
            object.__setattr__(self, "_json", row)
        return row


@dataclass(frozen=True)
class Report:
    """A training job's report (``lavaflow.io/metrics``), parsed."""

    profile: tuple[Measurement, ...] = ()
    rates: tuple[tuple[str, int, int, float], ...] = ()
    batch_size: int | None = None
    grad_sqr: float | None = None
    grad_var: float | None = None
    init_batch_size: int | None = None
    max_batch_size: int | None = None
    local_bsz_bounds: tuple[int, int] | None = None

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        if self.rates:
            out["rates"] = [list(r) for r in self.rates[-_MAX_PROFILE:]]
        for key, v in (
            ("batchSize", self.batch_size),
            ("gradSqr", self.grad_sqr),
            ("gradVar", self.grad_var),
            ("initBatchSize", self.init_batch_size),
            ("maxBatchSize", self.max_batch_size),
        ):
            if v is not None:
                out[key] = v
        if self.local_bsz_bounds is not None:
            out["localBszBounds"] = list(self.local_bsz_bounds)
        rest = json.dumps(out, separators=(",", ":"))
        if not self.profile:
            return rest
        # The profile first, its rows as json.dumps writes them inside the object (kept per
        # measurement), then the other keys: the same text as one json.dumps of the whole.
        rows = ",".join([m.json_row() for m in self.profile[-_MAX_PROFILE:]])
        return '{"profile":[' + rows + "]" + ("}" if rest == "{}" else "," + rest[1:])


class ReportError(ValueError):
    pass


def _pos_int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise ReportError(f"{what}: expected a non-negative integer, got {v!r}")
    return int(v)


def _pos_float(v: Any, what: str, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (strict and v == 0):
        raise ReportError(f"{what}: expected a {'positive' if strict else 'non-negative'} number, got {v!r}")
    return float(v)


@lru_cache(maxsize=65536)
def _measurement(row: Any) -> Measurement:
    """One profile row (a report repeats its earlier rows: each is checked once)."""
    if not isinstance(row, tuple) or len(row) != 7 or not isinstance(row[0], str):
        raise ReportError(": expected [gpuType, nodes, replicas, localBsz, accumSteps, stepTime, syncTime]")
    nodes, reps = _pos_int(row[1], " nodes"), _pos_int(row[2], " replicas")
    if not 1 <= nodes <= reps:
        raise ReportError(f": needs 1 <= nodes <= replicas, got {nodes} and {reps}")
    step = _pos_float(row[5], " stepTime", strict=True)
    sync = min(_pos_float(row[6], " syncTime"), step)
    return Measurement(
        row[0].lower(), nodes, reps, _pos_int(row[3], " localBsz"), _pos_int(row[4], " accumSteps"), step, sync
    )


@lru_cache(maxsize=8192)
def parse_report(raw: str) -> Report:
    """The report in ``raw`` (raises ReportError naming the part that is wrong)."""
    try:
        d = json.loads(raw)
    except ValueError as exc:
        raise ReportError(f"not JSON: {exc}") from None
    if not isinstance(d, dict):
        raise ReportError("expected a JSON object")
    profile = []
    for i, row in enumerate(d.get("profile") or ()):
        try:
            profile.append(_measurement(tuple(row) if isinstance(row, list) else row))
        except ReportError as exc:
            raise ReportError(f"profile[{i}]{exc}") from None
        except TypeError:  # (an unhashable element: not a measurement)
            raise ReportError(
                f"profile[{i}]: expected [gpuType, nodes, replicas, localBsz, accumSteps, stepTime, syncTime]"
            ) from None
    rates = []
    for i, row in enumerate(d.get("rates") or ()):
        if not isinstance(row, list) or len(row) != 4 or not isinstance(row[0], str):
            raise ReportError(f"rates[{i}]: expected [gpuType, nodes, replicas, rate]")
        nodes, reps = _pos_int(row[1], f"rates[{i}] nodes"), _pos_int(row[2], f"rates[{i}] replicas")
        if not 1 <= nodes <= reps:
            raise ReportError(f"rates[{i}]: needs 1 <= nodes <= replicas, got {nodes} and {reps}")
        rates.append((row[0].lower(), nodes, reps, _pos_float(row[3], f"rates[{i}] rate")))
    opt: dict[str, Any] = {}
    for key, attr, conv in (
        ("batchSize", "batch_size", _pos_int),
        ("gradSqr", "grad_sqr", _pos_float),
        ("gradVar", "grad_var", _pos_float),
        ("initBatchSize", "init_batch_size", _pos_int),
        ("maxBatchSize", "max_batch_size", _pos_int),
    ):
        if d.get(key) is not None:
            opt[attr] = conv(d[key], key)
    bounds = d.get("localBszBounds")
    if bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise ReportError("localBszBounds: expected [min, max]")
        lo, hi = _pos_int(bounds[0], "localBszBounds"), _pos_int(bounds[1], "localBszBounds")
        if not 1 <= lo <= hi:
            raise ReportError(f"localBszBounds: needs 1 <= min <= max, got {bounds}")
        opt["local_bsz_bounds"] = (lo, hi)
    return Report(tuple(profile), tuple(rates), **opt)


def report_of(annotations: Mapping[str, str]) -> Report | None:
    """The job's last report, or None (none written, or malformed: ignored as a bad progress
    report is)."""
    raw = annotations.get(METRICS)
    return own_report(str(raw) if raw is not None else None)


def own_report(raw: str | None) -> Report | None:
    """The report in ``raw`` (the annotation's value), None when absent or malformed."""
    if not raw:
        return None
    try:
        return parse_report(raw)
    except ReportError:
        return None


def throughput_text(raw: str | None, replicas: int, nodes: int) -> str:
    """What the report in ``raw`` says the job does on ``replicas`` workers over ``nodes`` nodes (its
    newest measurement when it has none of that configuration): samples per second from a measured
    step time, or work units per second from a measured rate; "-" without a report."""
    report = own_report(raw)
    if report is None:
        return "-"
    if report.profile:
        now = [m for m in report.profile if m.replicas == replicas and m.nodes == nodes]
        m = (now or report.profile)[-1]
        samples = m.replicas * m.local_bsz * (m.accum_steps + 1) / m.step_time
        return f"{_rate_text(samples)} samples/s"
    if report.rates:
        rates = [r for r in report.rates if r[2] == replicas and r[1] == nodes]
        return f"{_rate_text((rates or list(report.rates))[-1][3])} units/s"
    return "-"


def _rate_text(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


# ---------------------------------------------------------------------------------------------
# The throughput model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerfParams:
    alpha_c: float
    beta_c: float
    alpha_n: float  # across nodes
    beta_n: float
    alpha_r: float  # within one node
    beta_r: float
    gamma: float

    def compute_time(self, local_bsz: np.ndarray | float) -> np.ndarray | float:
        return self.alpha_c + self.beta_c * local_bsz

    def sync_time(self, nodes: np.ndarray, replicas: np.ndarray) -> np.ndarray:
        extra = np.maximum(replicas - 2, 0)
        return np.where(
            nodes > 1,
            self.alpha_n + self.beta_n * extra,
            np.where(replicas > 1, self.alpha_r + self.beta_r * extra, _LO),
        )

    def sync_one(self, nodes: int, replicas: int) -> float:
        extra = max(replicas - 2, 0)
        if nodes > 1:
            return self.alpha_n + self.beta_n * extra
        return self.alpha_r + self.beta_r * extra if replicas > 1 else _LO

    def step_time(self, nodes: ArrayLike, replicas: ArrayLike, local_bsz: ArrayLike, accum: ArrayLike) -> np.ndarray:
        """Seconds per optimiser step (``accum`` extra micro-steps of gradient accumulation)."""
        return self.step_from(local_bsz, accum, self.sync_time(np.asarray(nodes), np.asarray(replicas)))

    def step_from(self, local_bsz: ArrayLike, accum: ArrayLike, sync: np.ndarray | float) -> np.ndarray:
        """:meth:`step_time` from the micro-batch, the extra micro-steps and the sync time."""
        tc = self.compute_time(np.asarray(local_bsz, dtype=float))
        g = self.gamma
        out: np.ndarray = np.asarray(accum) * tc + (tc**g + sync**g) ** (1.0 / g)
        return out


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) ≥ 0 minimising the relative squared error of ``a + b·x`` against ``y``."""
    a, b = _lines(x, y[None, :], False)
    return float(a[0]), float(b[0])


def _lines(x: np.ndarray, ys: np.ndarray, fixed_slope: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``ys`` (the same ``x``), (a, b) ≥ 0 minimising the relative squared error of
    ``a + b·x`` against it (a constant where x does not vary or the slope would be negative):
    arrays of a and b."""
    w = 1.0 / np.maximum(ys, _LO) ** 2
    sw, sy = w.sum(axis=1), (w * ys).sum(axis=1)
    const = np.maximum(sy / sw, _LO)
    lo = np.full(len(ys), _LO)
    if fixed_slope or len(np.unique(x)) < 2:
        return const, lo
    sx, sxx, sxy = w @ x, w @ (x * x), (w * ys) @ x
    det = sw * sxx - sx * sx
    ok = det > 1e-12 * sw * sxx
    d = np.where(ok, det, 1.0)
    a = (sxx * sy - sx * sxy) / d
    b = (sw * sxy - sx * sy) / d
    flat = ~ok | (b < _LO)
    through0 = ~flat & (a < _LO)
    a_out = np.where(flat, const, np.where(through0, _LO, a))
    b_out = np.where(flat, _LO, np.where(through0, np.maximum(sxy / np.where(sxx > 0, sxx, 1.0), _LO), b))
    return a_out, b_out


@lru_cache(maxsize=4096)
def fit_perf(rows: tuple[tuple[int, int, int, float, float], ...]) -> PerfParams:
    """Pollux's throughput model fitted to measurements ``(nodes, replicas, local batch, compute
    time per micro-step, step time)`` (seconds), with Pollux's priors where the measurements say
    nothing: one local batch size observed → the compute time is split half constant, half per
    sample; nothing observed across nodes → syncing across nodes costs at least 1.1 × within one;
    nothing observed on ≥ 2 replicas within a node → that sync is free (optimistic); nothing on
    more than 2 replicas → no growth with the replica count."""
    a = np.array(rows, dtype=float)
    nodes, reps, bsz, comp, step = a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4]
    comp = np.maximum(comp, _LO)
    if len(np.unique(bsz)) == 1:
        ac = float(comp.mean()) / 2
        bc = max(ac / max(float(bsz[0]), 1.0), _LO)
    else:
        ac, bc = _line(bsz, comp)
    tc = ac + bc * bsz
    inter, intra = nodes > 1, (nodes == 1) & (reps > 1)
    grows = bool(np.any(reps > 2))
    # every gamma of the grid at once: one row each
    g = np.array(_GAMMAS)[:, None]
    implied = np.maximum(np.maximum(step, _LO) ** g - tc**g, _LO**g) ** (1.0 / g)
    lo = np.full(len(_GAMMAS), _LO)
    an, bn = _lines(reps[inter] - 2, implied[:, inter], not grows) if inter.any() else (lo, lo)
    ar, br = _lines(reps[intra] - 2, implied[:, intra], not grows) if intra.any() else (lo, lo)
    extra = np.maximum(reps - 2, 0)
    tn = np.where(inter, an[:, None] + bn[:, None] * extra, np.where(intra, ar[:, None] + br[:, None] * extra, _LO))
    pred = (tc**g + tn**g) ** (1.0 / g)
    err = np.sqrt(np.mean((np.log(pred) - np.log(np.maximum(step, _LO))) ** 2, axis=1))
    reg = 1e-3 * (g[:, 0] - 1) ** 2 + 1e-2 * ((bn / an) ** 2 + (br / ar) ** 2)
    i = int(np.argmin(err + reg))
    p = PerfParams(ac, bc, float(an[i]), float(bn[i]), float(ar[i]), float(br[i]), float(_GAMMAS[i]))
    if not inter.any():
        p = PerfParams(
            p.alpha_c,
            p.beta_c,
            max(p.alpha_n, 1.1 * p.alpha_r),
            max(p.beta_n, 1.1 * p.beta_r),
            p.alpha_r,
            p.beta_r,
            p.gamma,
        )
    return p


def _split(batch: np.ndarray | float, replicas: np.ndarray | float, max_local: int) -> tuple[np.ndarray, np.ndarray]:
    """(micro-batch per replica, extra accumulation steps) of global batches on replica counts
    (arrays that broadcast)."""
    local = np.ceil(batch / replicas - 1e-9)
    accum = np.maximum(np.ceil(local / max_local - 1e-9) - 1, 0)
    return np.maximum(np.ceil(local / (accum + 1) - 1e-9), 1), accum


def gain(batch_size: np.ndarray | float, init_batch: int, sqr: float, var: float) -> np.ndarray | float:
    """Statistical progress per optimiser step at ``batch_size`` (Pollux's gradient noise
    scale rule): ``(var + sqr) / (var / s + sqr)`` with ``s = batch / init batch``."""
    s = np.asarray(batch_size, dtype=float) / init_batch
    den = var / s + sqr
    return np.where(den > 0, (var + sqr) / np.where(den > 0, den, 1.0), 1.0)


@lru_cache(maxsize=1024)
def _grid(lo: int, hi: int, points: int = 50) -> tuple[int, ...]:
    return tuple(sorted({int(round(b)) for b in np.geomspace(lo, hi, points)}))


_MISSING = object()


# _fit_for's answers by the profile tuple's identity: a report between two new measurements
# carries the very tuple of the one before (the job's agent keeps it; a report parsed again is
# the one parsed before), which the lru_cache below would hash measurement by measurement.
_FITS_BY_PROFILE: dict[tuple[int, str], tuple[tuple[Measurement, ...], PerfParams]] = {}
_FITS_BY_PROFILE_KEPT = 4096


def _fit_for(profile: tuple[Measurement, ...], gpu_type: str) -> PerfParams:
    """The fit for ``gpu_type`` from ``profile`` (:func:`_fit_of`), kept by the tuple's identity."""
    key = (id(profile), gpu_type)
    hit = _FITS_BY_PROFILE.get(key)
    if hit is not None and hit[0] is profile:  # (the tuple is held here: its id is not reused)
        return hit[1]
    p = _fit_of(profile, gpu_type)
    if len(_FITS_BY_PROFILE) >= _FITS_BY_PROFILE_KEPT:
        _FITS_BY_PROFILE.clear()
    _FITS_BY_PROFILE[key] = (profile, p)
    return p


@lru_cache(maxsize=8192)
def _fit_of(profile: tuple[Measurement, ...], gpu_type: str) -> PerfParams:
    by_type: dict[str, list[Measurement]] = {}
    for m in profile:
        by_type.setdefault(m.gpu_type, []).append(m)
    ms = by_type.get(gpu_type) or by_type[min(by_type, key=lambda k: (-len(by_type[k]), k))]
    rows = tuple(sorted({(m.nodes, m.replicas, m.local_bsz, m.step_time - m.sync_time, m.step_time) for m in ms}))
    return fit_perf(rows)


@lru_cache(maxsize=8192)
def _candidates(
    n: int, own: int, b0: int, limit: int, lo_local: int, hi_local: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(batches, micro-batch per replica, extra accumulation steps, real batch) an adaptive job
    may train at on ``n`` replicas: its own batch, the smallest the replicas allow and a
    geometric grid up to its limit (the same candidates as the simulator's true model)."""
    lo = max(b0, lo_local * n)
    cands = {own}
    if limit >= lo:
        cands.add(lo)
        cands.update(b for b in _grid(b0, limit) if lo <= b <= limit)
    bs = np.array(sorted(cands), dtype=float)
    atomic, accum = _split(bs, n, hi_local)
    return bs, atomic, accum, n * atomic * (accum + 1)


def _packed_counts(max_workers: int, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1..max_workers, nodes each count is packed onto, replicas beyond 2)."""
    ns = np.arange(1, max_workers + 1)
    nodes = -(-ns // max(gpus_per_node, 1))
    return ns, nodes, np.maximum(ns - 2, 0)


# What :meth:`LearnedSpeed.packed_rates` works out from a job's limits alone, not from its fit or
# gradient statistics (they move with every report; the limits do not): kept per set of limits.
# The arrays are only read.
@lru_cache(maxsize=4096)
def _packed_fixed(max_workers: int, gpus_per_node: int, own: int, hi_local: int) -> tuple[np.ndarray, ...]:
    """(counts, nodes, extra replicas, micro-batch, accumulation steps) of a job training at its own
    batch on 1..max_workers packed workers."""
    ns, nodes, extra = _packed_counts(max_workers, gpus_per_node)
    atomic, accum = _split(own, ns, hi_local)
    return ns, nodes, extra, atomic, accum


@lru_cache(maxsize=4096)
def _packed_adaptive(
    max_workers: int, gpus_per_node: int, own: int, b0: int, lo_local: int, hi_local: int, limit: int
) -> tuple[np.ndarray, ...]:
    """(counts, nodes, extra replicas, which candidate batches each count may take, micro-batch,
    accumulation steps, real batch) of an adaptive job on 1..max_workers packed workers (rows)
    and its candidate batches (columns)."""
    ns, nodes, extra = _packed_counts(max_workers, gpus_per_node)
    los = np.maximum(b0, lo_local * ns)
    cands = sorted({own, *(int(x) for x in los if x <= limit), *_grid(b0, limit)})
    bs = np.array(cands, dtype=float)[None, :]
    n2 = ns[:, None].astype(float)
    grid = set(_grid(b0, limit))
    in_grid = np.array([c in grid for c in cands])[None, :]
    lo2 = los[:, None]
    valid = (bs == own) | ((lo2 <= limit) & ((bs == lo2) | (in_grid & (bs >= lo2) & (bs <= limit))))
    atomic, accum = _split(bs, n2, hi_local)
    return ns, nodes, extra, valid, atomic, accum, n2 * atomic * (accum + 1)


@dataclass(eq=False)
class LearnedSpeed:
    """What a scheduler knows of a job's speed: the report's fits (see the module docstring).

    ``batch_size`` is the job's own batch (declared); ``adaptive`` whether it co-adapts it
    (then rates are goodput, in the statistical progress units of its work); ``prior`` an
    optional speed object used as the placeholder before the first measurement (a user's
    speed-up table: a prior, replaced by what the job measures)."""

    report: Report | None
    batch_size: int | None = None
    adaptive: bool = False
    max_batch_size: int | None = None
    prior: Any = None
    _fits: dict[str, PerfParams | None] = field(default_factory=dict, repr=False)
    _rates: dict[tuple[tuple[int, ...], str | None], float] = field(default_factory=dict, repr=False)
    _best: dict[tuple[tuple[int, ...], PerfParams], tuple[float, int]] = field(default_factory=dict, repr=False)
    _most: int = field(default=-1, repr=False)  # max_observed, worked out once (the report is fixed)

    # -- what has been observed ----------------------------------------------------------------
    @property
    def observed(self) -> bool:
        r = self.report
        return r is not None and bool(r.profile or r.rates)

    @property
    def max_observed(self) -> int:
        # Read for every job every session: a walk over up to 2 × 256 entries, done once.
        most = self._most
        if most < 0:
            r = self.report
            most = 0 if r is None else max([m.replicas for m in r.profile] + [x[2] for x in r.rates], default=0)
            self._most = most
        return most

    @property
    def max_allowed(self) -> int:
        """Pollux's bound: no more workers than twice the most the job has been measured on."""
        return max(2 * self.max_observed, 1)

    # -- fits --------------------------------------------------------------------------------
    def fit(self, gpu_type: str | None) -> PerfParams | None:
        """The throughput model for ``gpu_type``: fitted on that type's measurements, else on the
        type measured most (a prior: the same speed), else None."""
        t = (gpu_type or "default").lower()
        hit = self._fits.get(t, _MISSING)
        if hit is _MISSING:
            r = self.report
            hit = self._fits[t] = _fit_for(r.profile, t) if r is not None and r.profile else None
        return hit  # type: ignore[return-value]

    # -- rates ---------------------------------------------------------------------------------
    def rate(self, placement: Iterable[int], gpu_type: str | None = None, phase: int | None = None) -> float:
        if type(placement) is tuple:
            # Most callers pass a placement's shape (sorted, no empty node): as kept below, so it
            # finds its rate without being put in that form again (every job, every session).
            try:
                hit = self._rates.get((placement, gpu_type))
            except TypeError:  # (unhashable counts: the long way)
                hit = None
            if hit is not None:
                return hit
        pl = tuple(sorted((int(v) for v in placement if v), reverse=True))
        if not pl:
            return 0.0
        key = (pl, gpu_type)
        hit = self._rates.get(key)
        if hit is None:
            hit = self._rates[key] = self._rate(pl, gpu_type)
        return hit

    def best_batch(self, placement: Iterable[int], gpu_type: str | None = None) -> tuple[float, int]:
        """(goodput, batch) the job's agent would choose on ``placement`` from this model (for an
        adaptive job; others: their own batch).  Before any measurement: Pollux's starting rule,
        the smallest batch the replicas allow."""
        pl = tuple(sorted((int(v) for v in placement if v), reverse=True))
        r = self.report
        own = int(self.batch_size or 1)
        if not pl or r is None or not self.adaptive:
            return (0.0 if not pl else self.rate(pl, gpu_type)), own
        b0 = r.init_batch_size or own
        lo_local = r.local_bsz_bounds[0] if r.local_bsz_bounds else 1
        p = self.fit(gpu_type)
        if p is None:
            return self.rate(pl, gpu_type), max(b0, lo_local * sum(pl))
        return self._goodput(pl, p, r)

    def _limits(self, r: Report) -> tuple[int, int, int, int]:
        own = int(self.batch_size or r.batch_size or r.init_batch_size or 1)
        b0 = r.init_batch_size or own
        lo_local, hi_local = r.local_bsz_bounds or (1, 1 << 30)
        return own, b0, lo_local, hi_local

    def _goodput(self, pl: tuple[int, ...], p: PerfParams, r: Report) -> tuple[float, int]:
        key = (pl, p)
        hit = self._best.get(key)
        if hit is not None:
            return hit
        own, b0, lo_local, hi_local = self._limits(r)
        limit = max(int(self.max_batch_size or r.max_batch_size or own), own)
        hit = self._best[key] = _best_goodput(pl, p, r.grad_sqr, r.grad_var, own, b0, limit, lo_local, hi_local)
        return hit

    def packed_rates(self, gpu_type: str | None, max_workers: int, gpus_per_node: int) -> tuple[float, ...]:
        """Rates on 0..max_workers workers packed onto ``gpus_per_node``-GPU nodes: the values of
        :meth:`rate` on those placements, worked out for every count at once."""
        r = self.report
        p = self.fit(gpu_type) if r is not None and r.profile else None
        if p is None or r is None or max_workers < 1:
            return tuple(
                0.0 if n == 0 else self.rate(_packed(n, gpus_per_node), gpu_type) for n in range(max_workers + 1)
            )
        own, b0, lo_local, hi_local = self._limits(r)
        if not self.adaptive:
            ns, nodes, extra, atomic, accum = _packed_fixed(max_workers, gpus_per_node, own, hi_local)
            tn = np.where(nodes > 1, p.alpha_n + p.beta_n * extra, np.where(ns > 1, p.alpha_r + p.beta_r * extra, _LO))
            rates = (ns * atomic * (accum + 1) / own) / p.step_from(atomic, accum, tn)
            return (0.0, *rates.tolist())
        limit = max(int(self.max_batch_size or r.max_batch_size or own), own)
        ns, nodes, extra, valid, atomic, accum, real = _packed_adaptive(
            max_workers, gpus_per_node, own, b0, lo_local, hi_local, limit
        )
        tn = np.where(nodes > 1, p.alpha_n + p.beta_n * extra, np.where(ns > 1, p.alpha_r + p.beta_r * extra, _LO))
        good = _goodputs(p, r, b0, atomic, accum, real, tn[:, None])
        good = np.where(valid, good, -np.inf)
        return (0.0, *good.max(axis=1).tolist())

    def _rate(self, pl: tuple[int, ...], gpu_type: str | None) -> float:
        r = self.report
        n = sum(pl)
        if r is not None and r.rates and not r.profile:
            return _tabulated(r.rates, (gpu_type or "default").lower(), n)
        p = self.fit(gpu_type) if r is not None else None
        if p is None:
            if self.prior is not None:
                return float(self.prior.rate(pl, gpu_type))
            return PLACEHOLDER_RATE * n
        assert r is not None
        if self.adaptive:
            return self._goodput(pl, p, r)[0]
        own, _b0, _lo, hi_local = self._limits(r)
        atomic, accum = _split(own, n, hi_local)
        t = float(p.step_from(atomic, accum, p.sync_one(len(pl), n)))
        return float((n * atomic * (accum + 1) / own) / t) if t > 0 else 0.0


def _goodputs(
    p: PerfParams, r: Report, b0: int, atomic: np.ndarray, accum: np.ndarray, real: np.ndarray, sync: np.ndarray
) -> np.ndarray:
    """Goodput (statistical progress per second) of micro-batch configurations: Pollux's gain
    under the job's last gradient statistics (1 without them) over the step time."""
    sqr, var = r.grad_sqr, r.grad_var
    return (gain(real, b0, sqr, var) if sqr is not None and var is not None else 1.0) / p.step_from(atomic, accum, sync)


@lru_cache(maxsize=16384)
def _best_goodput(
    pl: tuple[int, ...],
    p: PerfParams,
    sqr: float | None,
    var: float | None,
    own: int,
    b0: int,
    limit: int,
    lo_local: int,
    hi_local: int,
) -> tuple[float, int]:
    """(goodput, batch) of the best candidate batch on placement ``pl`` under fit ``p`` and the
    gradient statistics ``sqr``, ``var``: a function of these values only, so one job's agent (in
    the simulator) and the scheduler reading the same report share it instead of each learned
    model working it out again."""
    n = sum(pl)
    bs, atomic, accum, real = _candidates(n, own, b0, limit, lo_local, hi_local)
    g = gain(real, b0, sqr, var) if sqr is not None and var is not None else 1.0
    good = g / p.step_from(atomic, accum, p.sync_one(len(pl), n))
    i = int(np.argmax(good))
    return float(good[i]), int(bs[i])


def _packed(n: int, per_node: int) -> tuple[int, ...]:
    per_node = max(per_node, 1)
    return (per_node,) * (n // per_node) + ((n % per_node,) if n % per_node else ())


def _tabulated(rates: tuple[tuple[str, int, int, float], ...], gpu_type: str, n: int) -> float:
    """Rate on ``n`` workers from measured (type, nodes, replicas, rate) points: interpolated
    between measured counts, linear below the smallest and, optimistic as Pollux's placeholder,
    linear beyond the largest (how far is bounded by the 2 × measured rule); a type not measured
    takes the type measured most."""
    by_type: dict[str, dict[int, float]] = {}
    for t, _nodes, reps, rate in rates:
        by_type.setdefault(t, {})[reps] = rate  # the newest measurement of a count
    pts = by_type.get(gpu_type) or by_type[min(by_type, key=lambda k: (-len(by_type[k]), k))]
    xs = sorted(pts)
    ys = np.maximum.accumulate(np.array([pts[x] for x in xs], dtype=float))
    if n <= xs[0]:
        return float(ys[0] * n / xs[0])
    if n >= xs[-1]:
        return float(ys[-1] * n / xs[-1])
    return float(np.interp(n, xs, ys))


# ---------------------------------------------------------------------------------------------
# Profile groups: what jobs training the same model measured, shared
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SharedProfile:
    """What the jobs of one profile group (``lavaflow.io/profile-group``) have measured: every
    configuration's first measurement, and ``start``, the first report with gradient statistics
    (how the group's jobs begin training).  Immutable: the book makes a new one when the group
    measures a configuration it had not (compared by identity, cheap as a cache key)."""

    group: str
    profile: tuple[Measurement, ...] = ()
    rates: tuple[tuple[str, int, int, float], ...] = ()
    start: Report | None = None


class ProfileBook:
    """The profile groups' shared measurements, kept by whoever learns the models (the elastic
    plugin, across sessions).  :meth:`record` takes a job's report; :meth:`snapshot` gives what
    the group knows.  A configuration keeps its first measurement (later ones of the same
    configuration are the measuring job's own and stay in its report), so a group changes only
    when it learns something new.  At most ``limit`` configurations per group."""

    def __init__(self, limit: int = _MAX_PROFILE) -> None:
        self.limit = limit
        self._profile: dict[str, dict[tuple[str, int, int, int, int], Measurement]] = {}
        self._rates: dict[str, dict[tuple[str, int, int], tuple[str, int, int, float]]] = {}
        self._start: dict[str, Report] = {}
        self._snap: dict[str, SharedProfile] = {}

    def record(self, group: str, report: Report | None) -> None:
        if report is None:
            return
        prof = self._profile.setdefault(group, {})
        rates = self._rates.setdefault(group, {})
        new = False
        for m in report.profile:
            k = (m.gpu_type, m.nodes, m.replicas, m.local_bsz, m.accum_steps)
            if k not in prof and len(prof) < self.limit:
                prof[k] = m
                new = True
        for r in report.rates:
            kr = r[:3]
            if kr not in rates and len(rates) < self.limit:
                rates[kr] = r
                new = True
        if group not in self._start and report.grad_sqr is not None and report.grad_var is not None:
            self._start[group] = report
            new = True
        if new:
            self._snap.pop(group, None)

    def snapshot(self, group: str) -> SharedProfile | None:
        if group not in self._profile and group not in self._start:
            return None
        hit = self._snap.get(group)
        if hit is None:
            hit = self._snap[group] = SharedProfile(
                group,
                tuple(self._profile.get(group, {}).values()),
                tuple(self._rates.get(group, {}).values()),
                self._start.get(group),
            )
        return hit

    def __len__(self) -> int:
        return len(set(self._profile) | set(self._start))


def _merged(own: Report | None, shared: SharedProfile, adaptive: bool) -> Report | None:
    """The job's report with its group's measurements of configurations it has not measured
    itself, and, until it reports gradient statistics of its own (an adaptive job), the group's
    first ones: how a job of that model starts."""
    base = own if own is not None else Report()
    mine = {(m.gpu_type, m.nodes, m.replicas, m.local_bsz, m.accum_steps) for m in base.profile}
    profile = tuple(
        m for m in shared.profile if (m.gpu_type, m.nodes, m.replicas, m.local_bsz, m.accum_steps) not in mine
    )
    mine_r = {r[:3] for r in base.rates}
    rates = tuple(r for r in shared.rates if r[:3] not in mine_r)
    changes: dict[str, Any] = {}
    if profile:
        changes["profile"] = profile + base.profile
    if rates:
        changes["rates"] = rates + base.rates
    st = shared.start
    if adaptive and st is not None and (base.grad_sqr is None or base.grad_var is None):
        changes.update(grad_sqr=st.grad_sqr, grad_var=st.grad_var)
        for attr in ("init_batch_size", "max_batch_size", "local_bsz_bounds"):
            if getattr(base, attr) is None and getattr(st, attr) is not None:
                changes[attr] = getattr(st, attr)
    if not changes:
        return own
    return dataclasses.replace(base, **changes)


@lru_cache(maxsize=8192)
def _learned(items: tuple[tuple[str, str], ...], raw: str | None, shared: SharedProfile | None = None) -> es.SpeedSpec:
    ann = dict(items)
    declared = es.speed_spec(ann)
    report = own_report(raw)
    adaptive = str(ann.get(es.ADAPTIVE, "false")).strip().lower() == "true"
    if shared is not None:
        report = _merged(report, shared, adaptive)
    max_batch = ann.get(es.MAX_BATCH)
    prior = declared.speed if es.SPEEDUP in ann else None  # the user's table: a prior, not the truth
    speed = LearnedSpeed(
        report,
        batch_size=declared.batch_size,
        adaptive=adaptive,
        max_batch_size=int(max_batch) if max_batch is not None else None,
        prior=prior,
    )
    return es.SpeedSpec(speed, declared.work, declared.application, declared.batch_size)


def profile_group(annotations: Mapping[str, str]) -> str | None:
    """The job's profile group (``lavaflow.io/profile-group``), None when it declares none."""
    v = annotations.get(es.PROFILE_GROUP)
    g = str(v).strip() if v is not None else ""
    return g or None


def learned_spec(annotations: Mapping[str, str], book: ProfileBook | None = None) -> es.SpeedSpec:
    """The job's speed as a scheduler learns it (raises SpecError as :func:`spec.speed_spec`):
    its declared work and batch, and a :class:`LearnedSpeed` from its last report.  With a
    ``book`` and a profile group, the job's report goes into the book first and its model also
    learns from what the group's other jobs measured."""
    items = tuple(sorted((k, str(v)) for k, v in annotations.items() if k in es.SPEED_KEYS))
    raw = annotations.get(METRICS)
    raw = str(raw) if raw is not None else None
    shared = None
    if book is not None:
        group = profile_group(annotations)
        if group is not None:
            book.record(group, own_report(raw))
            shared = book.snapshot(group)
    return _learned(items, raw, shared)
