"""Plugin arguments, checked when volcano-scheduler.conf is loaded (issue 35, item 3).

Volcano's ``framework.Arguments`` reads an argument of the wrong type as "not given" with a log
line; lavaflow refuses it when the configuration is loaded, naming tier, plugin and argument, so a
weight of ``nan`` or ``inf`` or a switch of ``"maybe"`` never reaches a session. A plugin declares its
arguments in ``Plugin.ARGUMENTS``: name (or ``prefix.*``) -> kind.
"""

from __future__ import annotations

import math
from typing import Any

NUMBER = "number"  # a finite number (YAML int or float, or a string holding one)
NONNEGATIVE = "non-negative number"
POSITIVE_INT = "positive whole number"
BOOL = "bool"  # true / false (also the strings "true" / "false", as lavaflow has always read them)
DURATION = "duration"  # 30s, 5m, 1h30m, or seconds as a number
TEXT = "text"  # a string (e.g. a comma-separated list of resource names)

_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _show(value: Any) -> str:
    return f"the string {value!r}" if isinstance(value, str) else repr(value)


def as_number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        try:
            v = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return v if math.isfinite(v) else None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _BOOL_WORDS.get(value.strip().lower())
    return None


def problem(kind: str, value: Any) -> str | None:
    """Why ``value`` is not a ``kind``, or None when it is."""
    if kind in (NUMBER, NONNEGATIVE, POSITIVE_INT):
        v = as_number(value)
        if v is None:
            return f"expected a finite number, got {_show(value)}"
        if kind == NONNEGATIVE and v < 0:
            return f"must not be negative, got {value!r}"
        if kind == POSITIVE_INT and (v < 1 or v != int(v)):
            return f"expected a positive whole number, got {value!r}"
        return None
    if kind == BOOL:
        return None if as_bool(value) is not None else f"expected true or false, got {_show(value)}"
    if kind == DURATION:
        from ...api.admission import parse_duration

        if isinstance(value, bool) or value is None:
            return f"expected a duration (e.g. 30s, 5m), got {_show(value)}"
        try:
            parse_duration(str(value))
        except ValueError as exc:
            return str(exc)
        return None
    if kind == TEXT:
        return None if isinstance(value, str) else f"expected a string, got {_show(value)}"
    raise ValueError(f"unknown argument kind {kind!r}")  # pragma: no cover - a declaration error


def kind_of(spec: dict[str, str], key: str) -> str | None:
    kind = spec.get(key)
    if kind is not None:
        return kind
    for name, k in spec.items():
        if name.endswith(".*") and key.startswith(name[:-1]) and len(key) > len(name) - 1:
            return k
    return None


def check_declared(spec: dict[str, str], arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """(argument, message) for each declared argument whose value is not of its kind."""
    out = []
    for key, value in arguments.items():
        kind = kind_of(spec, str(key))
        if kind is not None:
            why = problem(kind, value)
            if why:
                out.append((str(key), why))
    return out


def check_mapping(
    key: str, value: Any, fields: dict[str, str], nested: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """An argument that is a mapping: ``fields`` name -> kind; ``nested`` name -> kind of every
    value of a mapping under that name (e.g. per-resource weights)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(key, f"expected a mapping, got {_show(value)}")]
    out = []
    for name, v in value.items():
        where = f"{key}.{name}"
        if name in fields:
            why = problem(fields[name], v)
            if why:
                out.append((where, why))
        elif nested and name in nested and v is not None:
            if not isinstance(v, dict):
                out.append((where, f"expected a mapping, got {_show(v)}"))
                continue
            for k, item in v.items():
                why = problem(nested[name], item)
                if why:
                    out.append((f"{where}.{k}", why))
    return out


__all__ = [
    "BOOL",
    "DURATION",
    "NONNEGATIVE",
    "NUMBER",
    "POSITIVE_INT",
    "TEXT",
    "as_bool",
    "as_number",
    "check_declared",
    "check_mapping",
    "problem",
]
