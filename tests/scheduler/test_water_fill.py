"""proportion's water-filling on Python floats gives the very bits of its numpy form."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.scheduler.plugins.proportion import QueueAttr, _water_fill_arrays, _water_fill_floats

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# Amounts as clusters have them (whole units, fractions of a core, bytes), with the corner
# cases the rules for np.minimum / np.maximum must get right: signed zeros, infinities, NaN.
AMOUNTS = st.one_of(
    st.integers(0, 64).map(float),
    st.sampled_from([0.0, -0.0, 0.5, 0.1, 1e-9, 2.5e10, float("inf"), float("nan")]),
    st.floats(0, 1e12, allow_nan=False),
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[np.ndarray, list[dict[str, object]]]:
    width = draw(st.integers(1, 5))
    vec = st.lists(AMOUNTS, min_size=width, max_size=width).map(np.array)
    total = draw(vec)
    out = []
    for i in range(draw(st.integers(1, 4))):
        out.append(
            {
                "name": f"q{i}",
                "weight": draw(st.sampled_from([1.0, 2.0, 3.0, 0.5, 0.0, 7.0])),
                "request": draw(vec),
                "guarantee": draw(st.one_of(st.just(np.zeros(width)), vec)),
                "real_capability": draw(st.one_of(st.just(np.full(width, np.inf)), vec)),
            }
        )
    return total, out


def _attrs(spec: list[dict[str, object]]) -> list[QueueAttr]:
    out = []
    for q in spec:
        width = len(q["request"])  # type: ignore[arg-type]
        a = QueueAttr(
            name=q["name"],  # type: ignore[arg-type]
            weight=q["weight"],  # type: ignore[arg-type]
            allocated=np.zeros(width),
            request=q["request"].copy(),  # type: ignore[attr-defined]
            inqueue=np.zeros(width),
            elastic=np.zeros(width),
            guarantee=q["guarantee"].copy(),  # type: ignore[attr-defined]
            capability=np.full(width, np.inf),
        )
        a.real_capability = q["real_capability"].copy()  # type: ignore[attr-defined]
        out.append(a)
    return out


@SETTINGS
@given(queues())
def test_water_fill_on_floats_gives_the_bits_of_the_array_form(
    case: tuple[np.ndarray, list[dict[str, object]]],
) -> None:
    total, spec = case
    arrays, floats = _attrs(spec), _attrs(spec)
    with np.errstate(all="ignore"):  # (infinities times a zero weight)
        _water_fill_arrays(arrays, total.copy())
    _water_fill_floats(floats, total.copy())
    for a, f in zip(arrays, floats):
        assert f.deserved.dtype == a.deserved.dtype
        assert f.deserved.tobytes() == a.deserved.tobytes()
