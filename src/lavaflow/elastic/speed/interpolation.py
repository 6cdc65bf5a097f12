"""The step-time interpolation of :class:`~lavaflow.elastic.speed.pollux.PolluxApp` over
(#nodes, #replicas, local batch) for placements its traces did not measure: scipy's Delaunay
triangulation with its linear (and, outside it, nearest-point) interpolation, computed without
importing ``scipy.interpolate`` or ``scipy.spatial`` (~0.45 s of every replay), value for value.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ..scipy_ext import extension


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
