"""The jobs pages' forecast column: when each pending job is predicted to start, with a range.

The one place the dashboard calls ``lavaflow.forecast`` (its entry point is
``forecast(objects, conf, now, *, runtime_source=None, seed=0)``, whose ``jobs`` map
``"ns/name"`` to a prediction with ``start``, ``start_low``, ``start_high`` and ``source``).
Where that module is not installed, or the forecast fails, the column shows "—" (never an error
on the page). A forecast simulates forward, so it is worked out in the background, at most every
``interval`` seconds (sooner, ``soonest``, after jobs or pods changed), and the pages show the
last one.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("lavaflow.dashboard")

NONE = "—"


def forecast_entry() -> Callable[..., Any] | None:
    """``lavaflow.forecast.forecast``, or None when it cannot be imported."""
    try:
        module = importlib.import_module("lavaflow.forecast")
    except ImportError:
        return None
    entry = getattr(module, "forecast", None)
    return entry if callable(entry) else None


def _span(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def describe(prediction: Any, now: float) -> str:
    """One prediction as the column shows it: "in 4m (2m–9m)" and where its run times came from."""
    start = getattr(prediction, "start", None)
    if getattr(prediction, "running", False):
        return "running"
    if start is None:
        reason = getattr(prediction, "reason", None)
        return f"not within the horizon ({reason})" if reason else "not within the horizon"
    low, high = getattr(prediction, "start_low", None), getattr(prediction, "start_high", None)
    text = f"in {_span(start - now)}"
    if low is not None and high is not None:
        text += f" ({_span(low - now)}–{_span(high - now)})"
    source = getattr(prediction, "source", None)
    return f"{text}, {source}" if source else text


class ForecastColumn:
    """The last forecast's text per job key."""

    def __init__(self, interval: float = 30.0, entry: Callable[..., Any] | None = None, soonest: float = 10.0) -> None:
        self.interval = interval
        self.soonest = soonest  # after a change of jobs or pods: again no sooner than this
        self.entry = entry if entry is not None else forecast_entry()
        self.texts: dict[str, str] = {}
        self.last = -float("inf")

    @property
    def available(self) -> bool:
        return self.entry is not None

    def due(self, changed: bool = False) -> bool:
        """Whether to forecast again: every ``interval`` seconds, or ``soonest`` after the last
        one when jobs or pods ``changed`` since."""
        wait = time.monotonic() - self.last
        return self.available and (wait >= self.interval or (changed and wait >= self.soonest))

    def refresh(self, objects: list[Any], conf: Any, now: float) -> None:
        """Forecast again from ``objects`` (the cluster's, as the store holds them)."""
        self.last = time.monotonic()
        if self.entry is None:
            return
        try:
            result = self.entry(objects, conf, now)
            self.texts = {key: describe(p, now) for key, p in getattr(result, "jobs", {}).items()}
        except Exception:  # noqa: BLE001 - a forecast that fails shows "—", the page stays up
            log.exception("forecast failed; the column shows %s", NONE)
            self.texts = {}

    def text(self, job_key: str, podgroup: str | None = None) -> str:
        """The job's forecast, looked up by its key, else by its PodGroup's."""
        got = self.texts.get(job_key)
        if got is None and podgroup:
            got = self.texts.get(podgroup)
        return NONE if got is None else got
