"""Kubernetes resource quantities.

The grammar is Kubernetes' own (k8s.io/apimachinery resource.Quantity)::

    quantity        ::= <signedNumber><suffix>
    suffix          ::= <binarySI> | <decimalExponent> | <decimalSI>
    binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
    decimalExponent ::= "e" <signedNumber> | "E" <signedNumber>

Values are parsed exactly with :class:`decimal.Decimal`; the scheduler works on
floats in canonical units (CPU in cores, memory and storage in bytes, every
other resource in its own unit).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

__all__ = ["QuantityError", "parse_quantity", "quantity_to_float", "format_quantity"]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# A number: optional sign, digits with an optional fraction (".5" and "5." are valid).
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_RE = re.compile(rf"^({_NUMBER})(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)$")


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a quantity into an exact Decimal in base units.

    Integers and floats (as YAML produces for ``cpu: 2`` or ``cpu: 0.5``) are
    accepted as plain numbers.
    """
    if type(value) is str:  # (first: nearly every quantity read is a string)
        return _parse_text(value)
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or a string, not {value!r}")
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a number or a string, not {type(value).__name__}")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    """A quantity string (cached: clusters repeat a handful of them across thousands of objects;
    Decimals are immutable, so sharing one is safe)."""
    text = value.strip()
    m = _RE.match(text)
    if not m:
        raise QuantityError(f"{value!r} is not a valid quantity (expected e.g. 500m, 2, 1.5Gi, 4G, 1e3)")
    number, suffix = m.group(1), m.group(2)
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - regex already guards
        raise QuantityError(f"{value!r} is not a valid quantity") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        return base.scaleb(int(suffix[1:]))
    return base * _DECIMAL[suffix]


def quantity_to_float(value: str | int | float | Decimal) -> float:
    """Parse a quantity into a float in base units (cores, bytes, counts)."""
    return float(parse_quantity(value))


def format_quantity(resource: str, amount: float) -> str:
    """Render an amount of a resource the way a person writes it in YAML."""
    if resource == "cpu":
        if abs(amount - round(amount)) < 1e-9:
            return str(int(round(amount)))
        return f"{int(round(amount * 1000))}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        whole = amount == int(amount)
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and whole and int(amount) % factor == 0:
                return f"{int(amount) // factor}{suffix}"
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20)):
            if amount >= factor:
                return f"{amount / factor:.1f}{suffix}"
        return str(int(round(amount)))
    if abs(amount - round(amount)) < 1e-9:
        return str(int(round(amount)))
    return f"{amount:g}"
