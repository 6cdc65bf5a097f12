"""The speed of a job from measured (workers -> work units/s) points, e.g. reported by the job."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .common import canonical_placement


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
