"""Speed-up fitting from measured (workers, rate) points (lavaflow.elastic.fit)."""

from __future__ import annotations

import pytest

from lavaflow.elastic.fit import MeasurementError, fit_speed, parse_measurements


def _true(n, a=0.05, b=1.0, c=0.01):
    return 1.0 / (a + b / n + c * (n - 1))


def test_fit_recovers_the_curve():
    pts = {n: _true(n) for n in (1, 2, 4, 8)}
    sp = fit_speed(pts)
    assert sp.method == "fit"
    for n in (3, 5, 6, 7):
        assert sp.at(n) == pytest.approx(_true(n), rel=0.02)


def test_interpolation_is_exact_at_measured_points():
    pts = {1: 10.0, 2: 19.0, 4: 20.0, 6: 36.0}  # a curve the model cannot fit
    sp = fit_speed(pts)
    for k, v in pts.items():
        assert sp.at(k) == pytest.approx(v)
    assert sp.at(3) == pytest.approx(19.5)


def test_fit_is_exact_at_measured_points_too():
    pts = {n: _true(n) * (1.03 if n == 2 else 1.0) for n in (1, 2, 4, 8)}
    sp = fit_speed(pts)
    for k, v in pts.items():
        assert sp.at(k) == pytest.approx(v)


@pytest.mark.parametrize("pts", [{1: 10.0, 2: 19.0}, {1: 10.0, 2: 19.0, 4: 35.0}, {2: 8.0}])
def test_extrapolation_is_bounded_and_monotone(pts):
    sp = fit_speed(pts)
    last = max(pts)
    prev = 0.0
    for n in range(1, 65):
        r = sp.at(n)
        assert r >= prev - 1e-12  # monotone
        prev = r
        if n > last:
            assert r <= pts[last] * n / last + 1e-9  # never above linear scaling
    assert sp.at(0) == 0.0


def test_parse_forms():
    assert parse_measurements("1:10,2:18") == {1: 10.0, 2: 18.0}
    assert parse_measurements('{"1": 10, "4": 30}') == {1: 10.0, 4: 30.0}
    rows = [
        {"workers": 2, "epoch_time_sec": 50},
        {"workers": 2, "epoch_time_sec": 50},
        {"workers": 1, "epoch_time_sec": 100},
    ]
    assert parse_measurements(rows) == {1: 0.01, 2: 0.02}
    with pytest.raises(MeasurementError):
        parse_measurements("1:0")
    with pytest.raises(MeasurementError):
        parse_measurements("x")
