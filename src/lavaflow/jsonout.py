"""``json.dumps(obj, indent=2, default=str)``, byte for byte, several times faster.

The standard library encodes indented JSON with a chain of Python generators (its C encoder
does not indent); a simulation result holds hundreds of thousands of values, so the CLI uses
this flat recursive encoder instead. Strings are escaped by the standard library's own C
function, numbers formatted as it formats them. A dict or list holding only scalars (and empty
containers), such as each pod's record, is written in one call to the standard library's C
encoder, told to separate its items with the newline and indentation of that depth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from json.encoder import (  # type: ignore[attr-defined]  # (c_make_encoder: CPython's, untyped)
    c_make_encoder,
    encode_basestring_ascii as _str,
)
from typing import Any

_INF = float("inf")


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return float.__repr__(o)


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {k.__class__.__name__}")


def _null(o: None) -> str:
    return "null"


def _bool(o: bool) -> str:
    return "true" if o else "false"


# Exact types encoded without recursion (subclasses go through _encode, as the stdlib's checks).
_SCALAR: dict[type, Callable[[Any], str]] = {
    str: _str,
    int: int.__repr__,
    float: _float,
    type(None): _null,
    bool: _bool,
}


_SCALAR_TYPES = frozenset(_SCALAR)
_FLAT_TYPES = _SCALAR_TYPES | {dict, list, tuple}  # containers: only when empty
_CONTAINERS = (dict, list, tuple)
_flat_encoders: dict[str, Callable[[Any, int], Any]] = {}


def _no_default(o: Any) -> Any:
    raise TypeError(f"not a scalar: {o!r}")  # never reached: only flat containers are given


def _flat(o: dict[Any, Any] | list[Any] | tuple[Any, ...], values: Iterable[Any], inner: str) -> str | None:
    """``o``'s items joined at indentation ``inner`` by the C encoder, or None if ``o`` (whose
    values are ``values``) holds anything but scalars and empty containers."""
    types = set(map(type, values))  # (most records: scalars only, told apart at C speed)
    if not types <= _SCALAR_TYPES:
        if not types <= _FLAT_TYPES:
            return None
        for v in values:
            if v and type(v) in _CONTAINERS:
                return None
    enc = _flat_encoders.get(inner)
    if enc is None:
        if c_make_encoder is None:  # pragma: no cover (CPython always has it)
            return None
        enc = _flat_encoders[inner] = c_make_encoder(
            None, _no_default, _str, None, ": ", "," + inner, False, False, True
        )
    return "".join(enc(o, 0))[1:-1]


def dumps(obj: Any) -> str:
    """``json.dumps(obj, indent=2, default=str)``."""
    return _encode(obj, "\n", set())


def _encode(o: Any, nl: str, markers: set[int]) -> str:
    while True:
        f = _SCALAR.get(type(o))
        if f is not None:
            return f(o)
        if isinstance(o, str):
            return _str(o)
        if isinstance(o, int):
            return int.__repr__(o)
        if isinstance(o, float):
            return _float(o)
        if isinstance(o, (list, tuple)):
            return _list(o, nl, markers)
        if isinstance(o, dict):
            return _dict(o, nl, markers)
        o = str(o)  # default=str, then encode what it returned


def _dict(d: dict[Any, Any], nl: str, markers: set[int]) -> str:
    if not d:
        return "{}"
    i = id(d)
    if i in markers:
        raise ValueError("Circular reference detected")
    inner = nl + "  "
    flat = _flat(d, d.values(), inner)
    if flat is not None:
        return "{" + inner + flat + nl + "}"
    markers.add(i)
    scalar = _SCALAR.get
    parts = []
    for k, v in d.items():
        f = scalar(type(v))
        parts.append(
            _str(k if type(k) is str else _key(k)) + ": " + (f(v) if f is not None else _encode(v, inner, markers))
        )
    markers.discard(i)
    return "{" + inner + ("," + inner).join(parts) + nl + "}"


def _list(lst: list[Any] | tuple[Any, ...], nl: str, markers: set[int]) -> str:
    if not lst:
        return "[]"
    i = id(lst)
    if i in markers:
        raise ValueError("Circular reference detected")
    inner = nl + "  "
    flat = _flat(lst, lst, inner)
    if flat is not None:
        return "[" + inner + flat + nl + "]"
    markers.add(i)
    scalar = _SCALAR.get
    parts = []
    for v in lst:
        f = scalar(type(v))
        parts.append(f(v) if f is not None else _encode(v, inner, markers))
    markers.discard(i)
    return "[" + inner + ("," + inner).join(parts) + nl + "]"
