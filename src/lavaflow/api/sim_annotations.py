"""The ``sim.lavaflow.io/*`` annotations: when an object arrives and leaves, how long a pod runs,
its exit code, the pods it spawns, when a node fails and recovers.

They are part of lavaflow's API (a contract: these names do not change): the simulator runs
by them, and so does the fake kubelet of :mod:`lavaflow.testing` on a real or test API server.
"""

from __future__ import annotations

import math

from .admission.durations import parse_duration as go_duration

SUBMIT_AT = "sim.lavaflow.io/submit-at"
DELETE_AT = "sim.lavaflow.io/delete-at"
DURATION = "sim.lavaflow.io/duration"
EXIT_CODE = "sim.lavaflow.io/exit-code"
SPAWNED_BY = "sim.lavaflow.io/spawned-by"
SPAWN_DELAY = "sim.lavaflow.io/spawn-delay"
FAIL_AT = "sim.lavaflow.io/fail-at"
RECOVER_AT = "sim.lavaflow.io/recover-at"


def parse_duration(text: str | int | float, allow_inf: bool = False) -> float:
    """``90s``, ``5m``, ``1h30m``, ``250ms`` or bare seconds (Go duration syntax); ``inf`` where allowed."""
    if allow_inf and isinstance(text, str) and text.strip().lower() in ("inf", "infinity", "forever"):
        return math.inf
    value = go_duration(text.strip() if isinstance(text, str) else text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: it must be a finite number of seconds ≥ 0")
    return value


def age_text(seconds: float) -> str:
    """An age or a span as kubectl prints one (``45s``, ``12m``, ``3h20m``, ``4d``); it reads
    back with :func:`parse_duration` (to the unit shown)."""
    s = int(max(0.0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d"
