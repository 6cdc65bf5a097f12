"""sim/results.py works out the summary's percentiles itself (np.percentile imports numpy.ma on its
first call): the values must be numpy's to the bit, or the simulation's JSON would change."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from lavaflow.sim.results import _pct


def _samples() -> list[list[float]]:
    rng = random.Random(7)
    out: list[list[float]] = []
    for n in (1, 2, 3, 4, 5, 7, 10, 13, 20, 21, 100, 101, 999):
        out.append([float(rng.randint(0, 10**6)) for _ in range(n)])
        out.append([rng.random() * 10 ** rng.randint(0, 8) for _ in range(n)])
        out.append([rng.randint(0, 100) + rng.choice([0.0, 0.5, 0.25, 0.1]) for _ in range(n)])
        out.append([rng.choice([1.0, 2.5, 3.0, 1e9, 7.1]) for _ in range(n)])
    out.append([3, 1, 2])  # ints, as a JSON summary may hold them
    return out


@pytest.mark.parametrize("q", [0, 10, 25, 33.3, 50, 75, 90, 95, 99, 100])
def test_pct_is_numpys_to_the_bit(q: float) -> None:
    for values in _samples():
        got, want = _pct(values, q), float(np.percentile(values, q))
        assert type(got) is float
        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (values, q)


def test_pct_of_nothing_and_of_nan() -> None:
    assert _pct([], 50) is None
    got = _pct([math.nan, 1.0], 50)
    assert got is not None and math.isnan(got) and math.isnan(float(np.percentile([math.nan, 1.0], 50)))
