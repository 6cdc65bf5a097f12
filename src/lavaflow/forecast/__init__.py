"""When will my job start? A snapshot of a cluster simulated forward with the same scheduling
core, controllers and configuration (docs/forecast.md)."""

from .core import Forecast, JobForecast, forecast, objects_by_kind
from .runtimes import EXPECTED_DURATION, SOURCES, RunTimeHistory, RuntimeSource

__all__ = [
    "EXPECTED_DURATION",
    "SOURCES",
    "Forecast",
    "JobForecast",
    "RunTimeHistory",
    "RuntimeSource",
    "forecast",
    "objects_by_kind",
]
