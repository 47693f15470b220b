"""Java's conversions and ordering as RocketMQ's comparisons use them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.filter.sql92.javatypes import EvalError, dcmp, java_compare, to_bool, to_double, to_int, to_long


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("+5", 5), ("-5", -5), ("007", 7), ("2147483647", 2**31 - 1), ("-2147483648", -(2**31)),
     ("٣", 3), ("0" * 5000 + "12", 12)],
)
def test_to_int(text: str, value: int) -> None:
    assert to_int(text) == value


@pytest.mark.parametrize(
    "text", ["", "+", "-", " 5", "5 ", "5.0", "1_000", "2147483648", "-2147483649", "0x10", "abc", "²", "1" * 5000]
)
def test_to_int_rejects(text: str) -> None:
    with pytest.raises(EvalError):
        to_int(text)


def test_to_long_range() -> None:
    assert to_long("9223372036854775807") == 2**63 - 1
    assert to_long("-9223372036854775808") == -(2**63)
    with pytest.raises(EvalError):
        to_long("9223372036854775808")


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1.0), (" 2.5 ", 2.5), ("\t-3\n", -3.0), ("5.", 5.0), (".5", 0.5), ("1e3", 1000.0), ("1E-2", 0.01),
     ("2f", 2.0), ("2.5D", 2.5), ("Infinity", math.inf), ("-Infinity", -math.inf), ("0x1.8p1", 3.0),
     ("-0x10P0", -16.0), ("1e999", math.inf), ("-0.0", -0.0), ("0x1p99999", math.inf),
     ("+.5", 0.5), ("-12.25", -12.25), ("007.50", 7.5)],
)
def test_to_double(text: str, value: float) -> None:
    got = to_double(text)
    assert got == value and math.copysign(1, got) == math.copysign(1, value)


@pytest.mark.parametrize("text", ["NaN", "-NaN", "+NaN"])
def test_to_double_nan(text: str) -> None:
    assert math.isnan(to_double(text))


@pytest.mark.parametrize(
    "text",
    ["", ".", "e5", "1e", "nan", "inf", "infinity", "1_0", "0x10", "1.5.5", "NaNd", "١", "٤٢.٥", "\u00a05", "1 2"]
    + ["+-1", "--1"],
)
def test_to_double_rejects_what_java_rejects(text: str) -> None:
    with pytest.raises(EvalError):
        to_double(text)


def test_to_bool() -> None:
    assert to_bool("true") and to_bool("TRUE") and to_bool("tRuE")
    assert not to_bool("yes") and not to_bool("1") and not to_bool(" true") and not to_bool("false")


def test_dcmp_is_double_compare() -> None:
    nan = math.nan
    assert dcmp(nan, nan) == 0
    assert dcmp(nan, math.inf) == 1 and dcmp(math.inf, nan) == -1
    assert dcmp(-0.0, 0.0) == -1 and dcmp(0.0, -0.0) == 1 and dcmp(0.0, 0.0) == 0
    assert dcmp(1.0, 2.0) == -1 and dcmp(2.0, 1.0) == 1 and dcmp(2.0, 2.0) == 0


def test_java_compare_conversions() -> None:
    assert java_compare("5", "string", 5, "int") == 0
    assert java_compare(5, "int", "6", "string") == -1
    assert java_compare(5, "int", 5.5, "double") == -1
    assert java_compare(2**40, "long", 3, "int") == 1
    assert java_compare(9007199254740993, "long", 9007199254740992.0, "double") == 0  # long -> double rounds
    assert java_compare("True", "string", True, "bool") == 0
    assert java_compare(True, "bool", 1, "int") == -1  # no conversion: "less"
    assert java_compare(1, "int", True, "bool") == -1
    with pytest.raises(EvalError):
        java_compare(True, "bool", "true", "string")  # ClassCastException in RocketMQ
    with pytest.raises(EvalError):
        java_compare("5.5", "string", 1, "int")


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_to_int_round_trips(n: int) -> None:
    assert to_int(str(n)) == n


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_to_double_round_trips_python_repr(x: float) -> None:
    assert to_double(repr(x)) == x
