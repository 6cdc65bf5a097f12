"""The simulator's annotations (a contract: these names do not change)."""

from __future__ import annotations

import math
import re

SUBMIT_AT = "sim.lavaflow.io/submit-at"
DELETE_AT = "sim.lavaflow.io/delete-at"
DURATION = "sim.lavaflow.io/duration"
EXIT_CODE = "sim.lavaflow.io/exit-code"
SPAWNED_BY = "sim.lavaflow.io/spawned-by"
SPAWN_DELAY = "sim.lavaflow.io/spawn-delay"

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")


def parse_duration(text: str | int | float, allow_inf: bool = False) -> float:
    """``90s``, ``5m``, ``1h30m``, ``250ms`` or bare seconds; ``inf`` where allowed."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = str(text).strip()
        if allow_inf and s.lower() in ("inf", "infinity", "forever"):
            return math.inf
        try:
            value = float(s)
        except ValueError:
            pos, value = 0, 0.0
            if not s:
                raise ValueError("empty duration") from None
            for m in _PART.finditer(s):
                if m.start() != pos:
                    break
                n = float(m.group(1))
                value += n * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[m.group(2)]
                pos = m.end()
            if pos != len(s):
                raise ValueError(
                    f"{text!r} is not a duration (use e.g. 90s, 5m, 1h30m or a number of seconds)"
                ) from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: it must be a finite number of seconds ≥ 0")
    return value
