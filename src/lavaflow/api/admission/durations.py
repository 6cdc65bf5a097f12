"""Go-style durations (``90s``, ``1h30m``), as Volcano's policies and timeouts write them."""

from __future__ import annotations

import re

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = r"(?:\d+\.?\d*|\.\d+)"
_DURATION_PART = re.compile(rf"({_NUMBER})(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_BARE_NUMBER = re.compile(_NUMBER)


def parse_duration(text: str | int | float) -> float:
    """Parse a Go-style duration (``"90s"``, ``"1h30m"``, ``"1.5h"``, ``"250ms"``) into seconds.

    Units are ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``m`` and ``h``; several
    number+unit parts may be concatenated and an optional leading sign applies
    to the whole.  A bare number (``"30"``, ``"0.5"``) is taken as seconds.
    Raises :class:`ValueError` for anything else.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration")
    body = text
    sign = 1.0
    if body[:1] in ("+", "-"):
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if not body:
        raise ValueError(f"{text!r} is not a duration: it has no number")
    if _BARE_NUMBER.fullmatch(body):
        return sign * float(body)
    total = 0.0
    pos = 0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            raise ValueError(
                f"{text!r} is not a duration: expected a number followed by one of "
                f"ns, us, ms, s, m, h at {body[pos:]!r}"
            )
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total
