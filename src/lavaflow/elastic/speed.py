"""Throughput model for elastic training jobs.

Two sources of measurements:

* **Pollux traces** (``pollux/traces/<app>/``, measured on T4 GPUs): the step time of six
  applications for each *placement* (per-node replica counts, e.g. ``(1, 1, 2, 2)``) and local batch
  size, plus a coarser table for large clusters (``scalability.csv``) and per-epoch gradient
  statistics at several global batch sizes (``validation-<bsz>.csv``).

  A job trains at a fixed global batch size ``B``.  With ``r`` replicas each replica processes
  ``ceil(B / r)`` samples per step, split into gradient-accumulation micro-steps when that exceeds
  the application's largest local batch.  The step time for the placement comes from the table
  (interpolated linearly over local batch size), or, for placements not measured, from a linear
  interpolation over (#nodes, #replicas, local batch) of all measurements.

  The *work* of a job is the number of optimiser steps it needs at batch size ``B``: the
  validation files give, per epoch, the progress (in samples scaled to the smallest batch size)
  and the gradient noise statistics; at batch ``B`` one step yields a statistical gain of
  ``(var + sqr) / (var / s + sqr)`` progress units with ``s = B / B_min``.  Summing
  ``Δprogress / gain`` over the application's epochs gives the steps the job must run.  Progress per
  second is then ``1 / step_time``.

* **Gavel throughputs** (``gavel/``): isolated steps/s of 26 model configurations at scale factors
  1, 2, 4, 8 on K80, P100 and V100 GPUs, consolidated on one node or spread over nodes.  Used for
  GPU-type factors of Pollux applications and for Gavel-built workloads.

All curves are exposed as *rates* (work units per second) so the simulator and the policies need
not know which source a job uses.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .data_paths import gavel_throughputs, pollux_trace_dir
from .scipy_ext import extension

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


_CANONICAL: dict[tuple[int, ...], tuple[int, ...]] = {}


def canonical_placement(placement: Iterable[int]) -> tuple[int, ...]:
    """Drop empty nodes; rotate to the lexicographically smallest rotation (as the traces do).
    Kept per placement (equal placements have equal canonical forms): the speed models ask for
    the same few placements thousands of times."""
    key = placement if type(placement) is tuple else tuple(placement)
    hit = _CANONICAL.get(key)
    if hit is not None:
        return hit
    p = tuple(int(x) for x in key if x)
    out = min(p[i:] + p[:i] for i in range(len(p))) if p else ()
    if len(_CANONICAL) < 65536:
        _CANONICAL[key] = out
    return out


def consolidated_placement(n: int, gpus_per_node: int) -> tuple[int, ...]:
    """``n`` workers packed onto as few nodes of ``gpus_per_node`` GPUs as possible."""
    if n <= 0:
        return ()
    full, rest = divmod(n, gpus_per_node)
    return canonical_placement((gpus_per_node,) * full + ((rest,) if rest else ()))


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


@dataclass
class _Validation:
    batch_size: int
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


def _barycentric_transforms(points: np.ndarray, simplices: np.ndarray) -> np.ndarray:
    """scipy.spatial.Delaunay.transform computed with numpy: per simplex T⁻¹ (rows 0..ndim-1)
    and the last vertex (row ndim), NaN where the simplex is degenerate."""
    ndim = points.shape[1]
    verts = points[simplices]  # (S, ndim + 1, ndim)
    t = np.transpose(verts[:, :ndim, :] - verts[:, ndim:, :], (0, 2, 1))
    out = np.full((len(simplices), ndim + 1, ndim), np.nan)
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(t, 1)
    ok = np.isfinite(cond) & (cond * np.finfo(float).eps <= 1.0)
    out[ok, :ndim, :] = np.linalg.inv(t[ok])
    out[ok, ndim, :] = verts[ok, ndim, :]
    return out


def _delaunay(points: np.ndarray) -> Any:
    """``scipy.spatial.Delaunay(points)``, its extension module loaded on its own (with the LAPACK
    one it needs): importing ``scipy.spatial`` brings ``scipy.linalg``, ``scipy.sparse`` and
    more, ~0.3 s of every replay (:mod:`lavaflow.elastic.scipy_ext`)."""
    qhull = None
    if "scipy.spatial" not in sys.modules and extension("scipy.linalg.cython_lapack") is not None:
        qhull = extension("scipy.spatial._qhull")
    if qhull is None:
        from scipy.spatial import Delaunay

        return Delaunay(points)
    return qhull.Delaunay(points)


_EPS = 100 * sys.float_info.epsilon  # scipy's tolerances for finding a point's simplex
_EPS_BROAD = math.sqrt(sys.float_info.epsilon)


class _LinearND:
    """``scipy.interpolate.LinearNDInterpolator(tri, values)`` and, for points outside the
    triangulation, ``NearestNDInterpolator(tri.points, values)``, without scipy.interpolate
    (whose import brings scipy.optimize, scipy.special and more: ~0.2 s of every replay).

    A call finds each point's simplex as scipy does (``_find_simplex`` of ``scipy.spatial._qhull``:
    a walk on the lifted paraboloid, a directed search, brute force when degenerate simplices are
    in the way; the start carried from one point to the next of a call) and sums the vertices'
    values weighted by the barycentric coordinates; the same double operations in the same order,
    so the same values (``tests/elastic/test_elastic_model.py`` compares them with scipy's on the
    Pollux applications).  ``transform`` is ``tri.transform``."""

    def __init__(self, tri: Any, transform: np.ndarray, values: np.ndarray) -> None:
        nd = int(tri.ndim)
        self.ndim = nd
        self.points = np.asarray(tri.points, dtype=float)
        self.simplices: list[list[int]] = tri.simplices.tolist()
        self.neighbors: list[list[int]] = tri.neighbors.tolist()
        self.equations: list[list[float]] = tri.equations.tolist()
        self.transform: list[list[float]] = transform.reshape(len(transform), -1).tolist()
        self.paraboloid_scale = float(tri.paraboloid_scale)
        self.paraboloid_shift = float(tri.paraboloid_shift)
        self.min_bound: list[float] = tri.min_bound.tolist()
        self.max_bound: list[float] = tri.max_bound.tolist()
        self.values = np.asarray(values, dtype=float)
        self.rows: list[list[float]] = self.values.tolist()
        self._tree: Any = None  # scipy's cKDTree of the points, for ``nearest``

    def __call__(self, xs: list[list[float]]) -> list[list[float]]:
        start = [0]
        nv = self.values.shape[1]
        out = []
        c = [0.0] * (self.ndim + 1)
        for x in xs:
            isimplex = self._find_simplex(c, x, start)
            if isimplex == -1:
                out.append([math.nan] * nv)  # scipy's fill value
                continue
            row = [0.0] * nv
            verts = self.simplices[isimplex]
            for j in range(self.ndim + 1):
                vals = self.rows[verts[j]]
                for k in range(nv):
                    row[k] = row[k] + c[j] * vals[k]
            out.append(row)
        return out

    def nearest(self, x: list[float]) -> list[float]:
        """The value at the data point nearest to ``x``: NearestNDInterpolator's, by scipy's k-d
        tree (which breaks the ties between equally near points its own way), loaded on its own
        the first time a point falls outside the triangulation."""
        if self._tree is None:
            ckdtree = extension("scipy.spatial._ckdtree") if "scipy.spatial" not in sys.modules else None
            if ckdtree is None:
                from scipy.spatial import cKDTree

                self._tree = cKDTree(self.points)
            else:
                self._tree = ckdtree.cKDTree(self.points)
        _, i = self._tree.query(np.asarray([x], dtype=float))
        return self.rows[int(i[0])]

    # -- scipy.spatial._qhull, step for step ------------------------------------------------------
    def _coordinate(self, t: list[float], x: list[float], c: list[float], i: int) -> None:
        nd = self.ndim
        if i == nd:
            v = 1.0
            for j in range(nd):
                v -= c[j]
            c[nd] = v
        else:
            v = 0.0
            for j in range(nd):
                v += t[nd * i + j] * (x[j] - t[nd * nd + j])
            c[i] = v

    def _coordinates(self, t: list[float], x: list[float], c: list[float]) -> None:
        nd = self.ndim
        last = 1.0
        for i in range(nd):
            v = 0.0
            for j in range(nd):
                v += t[nd * i + j] * (x[j] - t[nd * nd + j])
            c[i] = v
            last -= v
        c[nd] = last

    def _inside(self, t: list[float], x: list[float], c: list[float]) -> bool:
        # (scipy stops at the first coordinate out of range: the same answer)
        self._coordinates(t, x, c)
        return all(-_EPS <= v <= 1 + _EPS for v in c)

    def _outside_box(self, x: list[float]) -> bool:
        return any(x[i] < self.min_bound[i] - _EPS or x[i] > self.max_bound[i] + _EPS for i in range(self.ndim))

    def _distplane(self, isimplex: int, z: list[float]) -> float:
        eq = self.equations[isimplex]
        dist = eq[self.ndim + 1]
        for k in range(self.ndim + 1):
            dist += eq[k] * z[k]
        return dist

    def _bruteforce(self, c: list[float], x: list[float]) -> int:
        if self._outside_box(x):
            return -1
        nd = self.ndim
        for isimplex, t in enumerate(self.transform):
            if t[0] == t[0]:
                if self._inside(t, x, c):
                    return isimplex
                continue
            # a degenerate simplex: its neighbours, with more leeway towards it
            for ineighbor in self.neighbors[isimplex]:
                if ineighbor == -1:
                    continue
                tn = self.transform[ineighbor]
                if tn[0] != tn[0]:
                    continue
                self._coordinates(tn, x, c)
                back = self.neighbors[ineighbor]
                inside = True
                for m in range(nd + 1):
                    lo = -_EPS_BROAD if back[m] == isimplex else -_EPS
                    if not (lo <= c[m] <= 1 + _EPS):
                        inside = False
                        break
                if inside:
                    return ineighbor
        return -1

    def _directed(self, c: list[float], x: list[float], start: list[int]) -> int:
        nd = self.ndim
        nsimplex = len(self.simplices)
        isimplex = start[0]
        if isimplex < 0 or isimplex >= nsimplex:
            isimplex = 0
        for _ in range(1 + nsimplex // 4):
            if isimplex == -1:
                break
            t = self.transform[isimplex]
            inside = 1
            for k in range(nd + 1):
                self._coordinate(t, x, c, k)
                if c[k] < -_EPS:
                    m = self.neighbors[isimplex][k]
                    if m == -1:
                        start[0] = isimplex
                        return -1
                    isimplex = m
                    inside = -1
                    break
                elif c[k] <= 1 + _EPS:
                    pass
                else:
                    inside = 0
            if inside == -1:
                continue
            if inside == 0:
                isimplex = self._bruteforce(c, x)
            break
        else:
            isimplex = self._bruteforce(c, x)
        start[0] = isimplex
        return isimplex

    def _find_simplex(self, c: list[float], x: list[float], start: list[int]) -> int:
        if self._outside_box(x) or not self.simplices:
            return -1
        nd = self.ndim
        isimplex = start[0]
        if isimplex < 0 or isimplex >= len(self.simplices):
            isimplex = 0
        z = [0.0] * (nd + 1)
        lift = 0.0
        for i in range(nd):
            z[i] = x[i]
            lift += x[i] ** 2
        lift *= self.paraboloid_scale
        lift += self.paraboloid_shift
        z[nd] = lift
        best = self._distplane(isimplex, z)
        changed = True
        while changed:
            if best > 0:
                break
            changed = False
            for k in range(nd + 1):
                # (the neighbours of the simplex reached so far: scipy moves in mid-cycle)
                ineigh = self.neighbors[isimplex][k]
                if ineigh == -1:
                    continue
                dist = self._distplane(ineigh, z)
                if dist > best + _EPS * (1 + abs(best)):
                    isimplex = ineigh
                    best = dist
                    changed = True
        start[0] = isimplex
        return self._directed(c, x, start)


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
        the measured batches (clamped to them)."""
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


# ---------------------------------------------------------------------------------------------
# Gavel
# ---------------------------------------------------------------------------------------------


class GavelTable:
    """Isolated throughputs (steps/s) by GPU type, model and scale factor."""

    def __init__(self, path: Path | None = None) -> None:
        p = Path(path) if path is not None else gavel_throughputs()
        raw = json.loads(p.read_text())
        self.table: dict[str, dict[str, dict[int, float]]] = {}
        for gtype, entries in raw.items():
            for key, val in entries.items():
                model, sf = _parse_gavel_key(key)
                v = val.get("null") if isinstance(val, dict) else None
                if v is None or not v or v <= 0:
                    continue  # missing measurement (Gavel stores 0.0 for some)
                self.table.setdefault(gtype, {}).setdefault(model, {})[sf] = float(v)
        self.types = sorted(t for t in self.table if not t.endswith("_unconsolidated"))
        self.models = sorted(self.table.get("v100", {}))

    def isolated(self, model: str, gpu_type: str) -> float:
        return self.table[gpu_type][model][1]

    def throughput(self, model: str, gpu_type: str, workers: int, consolidated: bool = True) -> float:
        """Steps/s of ``model`` on ``workers`` GPUs of ``gpu_type``.

        Measured points (scale factors 1, 2, 4, 8) are made non-decreasing (more workers never
        run slower: the extra ones could idle) and interpolated linearly; beyond the largest
        measured scale the throughput stays flat.
        """
        if workers <= 0:
            return 0.0
        pts = self._points(model, gpu_type, consolidated)
        xs, ys = pts
        return float(np.interp(workers, xs, ys))

    @cache  # noqa: B019 (one GavelTable per process, kept for its lifetime)
    def _points(self, model: str, gpu_type: str, consolidated: bool) -> tuple[np.ndarray, np.ndarray]:
        base = self.table[gpu_type][model]
        pts = dict(base)
        if not consolidated:
            unc = self.table.get(f"{gpu_type}_unconsolidated", {}).get(model, {})
            pts = {1: base[1], **{k: v for k, v in unc.items() if k > 1}}
            for k, v in base.items():  # fall back to consolidated figures where unmeasured
                pts.setdefault(k, v)
        xs = np.array(sorted(pts), dtype=float)
        ys = np.maximum.accumulate(np.array([pts[int(x)] for x in xs]))
        if xs[0] != 0:
            xs = np.concatenate([[0.0], xs])
            ys = np.concatenate([[0.0], ys])
        return xs, ys

    def __hash__(self) -> int:  # for lru_cache on methods
        return id(self)


def _parse_gavel_key(key: str) -> tuple[str, int]:
    # "('ResNet-50 (batch size 64)', 2)"
    inner = key.strip()[1:-1]
    model_part, sf_part = inner.rsplit(",", 1)
    return model_part.strip().strip("'\""), int(sf_part.strip())


@cache
def gavel_table() -> GavelTable:
    return GavelTable()


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
# Per-job speed functions
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


@dataclass
class GavelJobSpeed:
    """A job of a Gavel model configuration; work is counted in steps."""

    model: str

    def max_useful_workers(self) -> int:
        return 8

    def rate(self, placement: Iterable[int], gpu_type: str | None = None) -> float:
        pl = canonical_placement(placement)
        if not pl:
            return 0.0
        t = (gpu_type or "").lower()
        if t in ("", "default"):  # an untyped node: the type a Gavel trace's run times are given on
            t = "v100"
        return gavel_table().throughput(self.model, t, sum(pl), consolidated=len(pl) == 1)


@dataclass
class TabulatedJobSpeed:
    """Speed from measured (workers -> work units/s) points, e.g. reported by a running job.

    Interpolated linearly between measured worker counts; beyond the largest measured count the
    last per-worker marginal gain is extended but never decreases throughput; below the smallest
    measured count throughput scales linearly to zero.  This is the fitted-and-interpolated
    replacement for Voda's placeholder-filled speedup table.
    """

    points: dict[int, float]
    per_type: dict[str, float] = field(default_factory=dict)

    def rate(self, placement: Iterable[int], gpu_type: str | None = None) -> float:
        n = sum(canonical_placement(placement))
        if n <= 0 or not self.points:
            return 0.0
        xs = np.array(sorted(self.points), dtype=float)
        ys = np.maximum.accumulate(np.array([self.points[int(x)] for x in xs]))
        if n <= xs[0]:
            r = ys[0] * n / xs[0]
        elif n >= xs[-1]:
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if len(xs) >= 2 else ys[-1] / xs[-1]
            r = ys[-1] + max(slope, 0.0) * (n - xs[-1])
        else:
            r = float(np.interp(n, xs, ys))
        return float(r) * self.per_type.get(gpu_type or "", 1.0)

    def max_useful_workers(self) -> int:
        return 1 << 16


def rate_curve(
    speed: Any, gpu_type: str | None, max_workers: int, gpus_per_node: int, phase: int | None = None
) -> tuple[float, ...]:
    """Rates for 0..max_workers workers packed onto ``gpus_per_node``-GPU nodes (in training phase
    ``phase`` for a speed whose rate depends on progress)."""
    whole: Callable[[str | None, int, int], tuple[float, ...]] | None = getattr(speed, "packed_rates", None)
    if whole is not None:  # a speed that works out every count at once (a learned model)
        return whole(gpu_type, max_workers, gpus_per_node)
    if phase is not None and phase_bounds(speed):
        return tuple(
            0.0 if n == 0 else speed.rate(consolidated_placement(n, gpus_per_node), gpu_type, phase=phase)
            for n in range(max_workers + 1)
        )
    return tuple(
        0.0 if n == 0 else speed.rate(consolidated_placement(n, gpus_per_node), gpu_type)
        for n in range(max_workers + 1)
    )


# ---------------------------------------------------------------------------------------------
# Progress-dependent rates (adaptive batch: the batch is re-chosen in every training phase)
# ---------------------------------------------------------------------------------------------


def phase_bounds(speed: Any) -> tuple[float, ...]:
    """Work done at which the speed's rate changes (empty: the rate depends on placement only)."""
    return getattr(speed, "phase_bounds", ())


def rate_at(speed: Any, shape: Iterable[int], gpu_type: str | None, done: float) -> float:
    """The rate on ``shape`` of a job that has done ``done`` work units."""
    if not phase_bounds(speed):
        return float(speed.rate(shape, gpu_type))
    return float(speed.rate(shape, gpu_type, phase=speed.phase_of(done)))


def next_bound(speed: Any, done: float) -> float:
    """The work done at which the rate changes next (inf: never)."""
    b = phase_bounds(speed)
    if not b:
        return math.inf
    i = speed.phase_of(done)
    return b[i] if i < len(b) else math.inf


def advance(
    speed: Any, shape: Iterable[int], gpu_type: str | None, done: float, seconds: float, limit: float = math.inf
) -> float:
    """Work done after running ``seconds`` on ``shape`` from ``done`` (phase by phase), at most ``limit``."""
    if not phase_bounds(speed):
        # One rate and no bound but ``limit``: the loop below in closed form (the same operations).
        if seconds > 0 and done < limit:
            r = float(speed.rate(shape, gpu_type))
            if not r <= 0:  # (a NaN rate runs on, as in the loop)
                if (limit - done) / r >= seconds:
                    return min(done + r * seconds, limit)
                return limit
        return min(done, limit)
    rates = _phase_rates(speed, shape, gpu_type)
    if rates is not None:  # the same steps as below, with the phases' rates looked up once
        b = speed.phase_bounds
        while seconds > 0 and done < limit:
            i = speed.phase_of(done)
            r = float(rates[i])
            if r <= 0:
                break
            nb = min(b[i] if i < len(b) else math.inf, limit)
            dt = (nb - done) / r
            if dt >= seconds:
                return min(done + r * seconds, limit)
            done = nb
            seconds -= dt
        return min(done, limit)
    while seconds > 0 and done < limit:
        r = rate_at(speed, shape, gpu_type, done)
        if r <= 0:
            break
        nb = min(next_bound(speed, done), limit)
        dt = (nb - done) / r
        if dt >= seconds:
            return min(done + r * seconds, limit)
        done = nb
        seconds -= dt
    return min(done, limit)


def time_to(speed: Any, shape: Iterable[int], gpu_type: str | None, done: float, target: float) -> float:
    """Seconds of running on ``shape`` to get from ``done`` to ``target`` work units."""
    rates = _phase_rates(speed, shape, gpu_type)
    t = 0.0
    if rates is not None:
        b = speed.phase_bounds
        while done < target:
            i = speed.phase_of(done)
            r = float(rates[i])
            if r <= 0:
                return math.inf
            nb = min(b[i] if i < len(b) else math.inf, target)
            t += (nb - done) / r
            done = nb
        return t
    while done < target:
        r = rate_at(speed, shape, gpu_type, done)
        if r <= 0:
            return math.inf
        nb = min(next_bound(speed, done), target)
        t += (nb - done) / r
        done = nb
    return t


def _phase_rates(speed: Any, shape: Iterable[int], gpu_type: str | None) -> tuple[float, ...] | None:
    """Per-phase rates of a speed whose rate depends on progress (None for any other speed)."""
    if not phase_bounds(speed):
        return None
    rates = getattr(speed, "phase_rates", None)
    return rates(shape, gpu_type) if rates is not None else None
