"""Kubernetes quantity grammar: parse_quantity, quantity_to_float, format_quantity."""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml
from hypothesis import given, strategies as st

from lavaflow.api.core import Container
from lavaflow.api.quantity import (
    QuantityError,
    format_quantity,
    parse_quantity,
    quantity_to_float,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # plain numbers
        ("0", "0"),
        ("1", "1"),
        ("42", "42"),
        ("1.5", "1.5"),
        (".5", "0.5"),
        ("5.", "5"),
        ("+1", "1"),
        ("-1", "-1"),
        ("+.5", "0.5"),
        ("-0.25", "-0.25"),
        ("007", "7"),
        # decimal SI
        ("1n", "0.000000001"),
        ("1u", "0.000001"),
        ("1m", "0.001"),
        ("100m", "0.1"),
        ("250m", "0.25"),
        ("1500m", "1.5"),
        ("1k", "1000"),
        ("1M", "1000000"),
        ("1G", "1000000000"),
        ("4G", "4000000000"),
        ("1T", "1e12"),
        ("1P", "1e15"),
        ("0.5k", "500"),
        (".5M", "500000"),
        ("-2k", "-2000"),
        # binary SI
        ("1Ki", "1024"),
        ("1Mi", "1048576"),
        ("1Gi", "1073741824"),
        ("1.5Gi", "1610612736"),
        ("1Ti", str(2**40)),
        ("1Pi", str(2**50)),
        ("1Ei", str(2**60)),
        ("512Mi", str(512 * 2**20)),
        (".5Ki", "512"),
        # decimal exponents
        ("1e3", "1000"),
        ("1E3", "1000"),
        ("1e+3", "1000"),
        ("1E+3", "1000"),
        ("1e-3", "0.001"),
        ("1E-3", "0.001"),
        ("2.5e2", "250"),
        ("-2.5e2", "-250"),
        ("1e0", "1"),
        (".5e1", "5"),
        ("5.e1", "50"),
        ("12e-2", "0.12"),
    ],
)
def test_parse_valid_strings(text: str, expected: str) -> None:
    assert parse_quantity(text) == Decimal(expected)


def test_exponent_e() -> None:
    # "E" followed by digits is an exponent, not the exa suffix.
    assert parse_quantity("2E3") == Decimal(2000)
    assert parse_quantity("2E-3") == Decimal("0.002")


# Known bug in quantity.parse_quantity: a bare "E" suffix (exa) is taken for an
# exponent and int("") raises ValueError.  strict: remove the marker once fixed.
@pytest.mark.parametrize("text", ["1E", "2E", ".5E", "-3E"])
def test_exa_suffix(text: str) -> None:
    number = Decimal(text[:-1])
    assert parse_quantity(text) == number * Decimal(10) ** 18


def test_parse_is_exact() -> None:
    assert parse_quantity("100m") + parse_quantity("200m") == parse_quantity("300m")
    assert parse_quantity("1n") * 10**9 == 1
    assert parse_quantity("0.1") * 3 == Decimal("0.3")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (2, "2"),
        (-3, "-3"),
        (10**20, "1e20"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (2.0, "2"),
        (1e3, "1000"),
        (-0.25, "-0.25"),
    ],
)
def test_parse_numbers(value: int | float, expected: str) -> None:
    assert parse_quantity(value) == Decimal(expected)


def test_parse_decimal_passthrough() -> None:
    d = Decimal("1.25")
    assert parse_quantity(d) is d


def test_parse_yaml_scalars() -> None:
    doc = yaml.safe_load("cpu: 2\nhalf: 0.5\nmem: 1Gi\nmilli: 500m\nexp: 1e3\n")
    assert isinstance(doc["cpu"], int)
    assert isinstance(doc["half"], float)
    assert parse_quantity(doc["cpu"]) == 2
    assert parse_quantity(doc["half"]) == Decimal("0.5")
    assert parse_quantity(doc["mem"]) == 2**30
    assert parse_quantity(doc["milli"]) == Decimal("0.5")
    assert parse_quantity(doc["exp"]) == 1000


def test_model_fields_parse_quantities() -> None:
    c = Container.model_validate(
        yaml.safe_load("name: a\nresources:\n  requests: {cpu: 250m, memory: 64Mi}\n  limits: {cpu: 1}\n")
    )
    assert c.resources.requests["cpu"] == Decimal("0.25")
    assert c.resources.requests["memory"] == 64 * 2**20
    assert c.resources.limits["cpu"] == 1
    with pytest.raises(ValueError):
        Container.model_validate({"resources": {"requests": {"cpu": "1x"}}})


def test_parse_strips_surrounding_whitespace() -> None:
    assert parse_quantity(" 1Gi ") == 2**30


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "1x",
        "Mi",
        "m",
        "k",
        "e3",
        "1.2.3",
        "1 Gi",
        "--1",
        "+-1",
        "-+1",
        "1-",
        ".",
        "-.",
        "+",
        "-",
        "1e",
        "1e+",
        "1e-",
        "1e1.5",
        "1e3Mi",
        "1Mi3",
        "1K",
        "1KI",
        "1mi",
        "1gi",
        "1Gb",
        "1GiB",
        "1ki",
        "1MM",
        "1mm",
        "1..5",
        "1,5",
        "0x10",
        "1_000",
        "inf",
        "nan",
        "Infinity",
        "١",  # a non-ASCII digit
    ],
)
def test_parse_invalid_strings(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, False, None, [1], {"a": 1}, b"1", float("nan"), float("inf"), float("-inf")])
def test_parse_invalid_types(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_quantity_error_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


def test_quantity_to_float() -> None:
    assert quantity_to_float("500m") == 0.5
    assert quantity_to_float("1Gi") == float(2**30)
    assert quantity_to_float(3) == 3.0
    assert isinstance(quantity_to_float("1"), float)
    with pytest.raises(QuantityError):
        quantity_to_float("1x")


@pytest.mark.parametrize(
    ("resource", "amount", "expected"),
    [
        ("cpu", 0.0, "0"),
        ("cpu", 1.0, "1"),
        ("cpu", 16.0, "16"),
        ("cpu", 0.5, "500m"),
        ("cpu", 0.1, "100m"),
        ("cpu", 1.25, "1250m"),
        ("memory", 0.0, "0"),
        ("memory", 1000.0, "1000"),
        ("memory", 1024.0, "1Ki"),
        ("memory", float(2**20), "1Mi"),
        ("memory", float(512 * 2**20), "512Mi"),
        ("memory", float(2**30), "1Gi"),
        ("memory", float(3 * 2**40), "3Ti"),
        ("memory", 1.5 * 2**30, "1536Mi"),
        ("ephemeral-storage", float(10 * 2**30), "10Gi"),
        ("hugepages-2Mi", float(4 * 2**20), "4Mi"),
        ("nvidia.com/gpu", 4.0, "4"),
        ("nvidia.com/gpu", 0.5, "0.5"),
    ],
)
def test_format_quantity(resource: str, amount: float, expected: str) -> None:
    assert format_quantity(resource, amount) == expected


def test_format_memory_non_round_is_approximate() -> None:
    text = format_quantity("memory", 1.2345 * 2**30)
    assert text.endswith("Gi")
    assert abs(quantity_to_float(text) - 1.2345 * 2**30) < 0.05 * 2**30


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_format_cpu_round_trips(millicores: int) -> None:
    amount = millicores / 1000
    text = format_quantity("cpu", amount)
    assert parse_quantity(text) == Decimal(millicores) / 1000


@given(st.integers(min_value=0, max_value=2**40 - 1))
def test_format_memory_round_trips(amount: int) -> None:
    if amount >= 2**20 and amount % 2**10:
        return  # above 1Mi only Ki multiples are rendered exactly
    text = format_quantity("memory", float(amount))
    assert parse_quantity(text) == amount


@given(st.integers(min_value=0, max_value=2**30), st.sampled_from([2**10, 2**20, 2**30]))
def test_format_memory_round_trips_suffix_multiples(units: int, factor: int) -> None:
    amount = units * factor
    assert parse_quantity(format_quantity("memory", float(amount))) == amount


# Known bug in quantity.format_quantity: its absolute 1e-9 tolerance on
# amount/factor rounds 2Ti - 1Ki up to "2Ti".  strict: remove once fixed.
def test_format_memory_just_below_ti_multiple() -> None:
    amount = 2 * 2**40 - 2**10
    assert parse_quantity(format_quantity("memory", float(amount))) == amount


@given(
    st.integers(min_value=-(10**9), max_value=10**9),
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti"]),
)
def test_parse_integer_with_suffix(number: int, suffix: str) -> None:
    factors = {
        "": Decimal(1),
        "n": Decimal("1e-9"),
        "u": Decimal("1e-6"),
        "m": Decimal("1e-3"),
        "k": Decimal("1e3"),
        "M": Decimal("1e6"),
        "G": Decimal("1e9"),
        "T": Decimal("1e12"),
        "P": Decimal("1e15"),
        "E": Decimal("1e18"),
        "Ki": Decimal(2**10),
        "Mi": Decimal(2**20),
        "Gi": Decimal(2**30),
        "Ti": Decimal(2**40),
    }
    assert parse_quantity(f"{number}{suffix}") == number * factors[suffix]
