"""Gradient statistics for adaptive batch sizes: Pollux's ``gradSqr`` and ``gradVar``.

With ``R`` replicas each computing the mean gradient ``g_i`` of its local batch ``b`` and the
averaged gradient ``G`` (the global batch ``B = R·b``), for true gradient ``μ`` and per-sample
covariance ``Σ``::

    E[mean_i |g_i|²] = |μ|² + tr(Σ)/b          E[|G|²] = |μ|² + tr(Σ)/B

so ``|μ|² ≈ (R·|G|² − mean|g_i|²) / (R − 1)`` (``gradSqr``) and the noise of a gradient at the
job's initial batch ``B0``, ``tr(Σ)/B0 ≈ (mean|g_i|² − |G|²) · (B/B0) / (R − 1)`` (``gradVar``);
the scheduler's gain of a batch ``B`` over ``B0`` is then ``(var + sqr) / (var/s + sqr)``,
``s = B/B0``.  One replica has no second sample: two consecutive steps stand in for two replicas
(biased while the gradient moves, as AdaptDL's differenced estimate is).  Single estimates are
very noisy; both are smoothed by an exponential moving average with bias correction.
"""

from __future__ import annotations

import math


class GradientNoise:
    """Smoothed ``gradSqr`` / ``gradVar`` estimates (see the module docstring).

    ``smoothing`` is the weight the average keeps per update (0.9: about the last ten steps)."""

    def __init__(self, smoothing: float = 0.9) -> None:
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self._sqr = 0.0
        self._var = 0.0
        self._weight = 0.0  # the bias correction: 1 - smoothing ** updates
        self.updates = 0

    def update(self, local_sqr: float, total_sqr: float, count: int, scale: float) -> None:
        """One sample: ``local_sqr`` the mean squared norm of the ``count`` gradients that were
        averaged, ``total_sqr`` the squared norm of their average, ``scale`` = the batch they
        averaged over / the initial batch."""
        if count < 2 or not (math.isfinite(local_sqr) and math.isfinite(total_sqr)) or scale <= 0:
            return
        sqr = (count * total_sqr - local_sqr) / (count - 1)
        var = (local_sqr - total_sqr) * scale / (count - 1)
        k = self.smoothing
        self._sqr = k * self._sqr + (1 - k) * sqr
        self._var = k * self._var + (1 - k) * var
        self._weight = k * self._weight + (1 - k)
        self.updates += 1

    @property
    def value(self) -> tuple[float, float] | None:
        """(gradSqr, gradVar), or None before the first update.  Each is kept ≥ 0 (a single
        estimate may be negative, the quantities are not)."""
        if self._weight <= 0:
            return None
        return max(self._sqr / self._weight, 0.0), max(self._var / self._weight, 0.0)

    def state(self) -> list[float]:
        return [self._sqr, self._var, self._weight, float(self.updates)]

    def load(self, state: list[float]) -> None:
        self._sqr, self._var, self._weight = (float(x) for x in state[:3])
        self.updates = int(state[3])
