"""The cases of RocketMQ's ``filter/src/test/java/.../ExpressionTest.java``, with string
property values (the broker's ``MessageEvaluationContext`` only ever holds strings; the Java
cases that put Integer or Object values in the context have no broker equivalent)."""

from __future__ import annotations

import pytest

from apogee.filter import compile_sql92
from apogee.filter.sql92 import EvalError, evaluate, parse


def check(expression: str, props: dict[str, str], expected: bool) -> None:
    assert compile_sql92(expression)(props) is expected, (expression, props)
    assert evaluate(parse(expression), props) is expected, (expression, props)


MATCH_OPS = ("contains", "startswith", "endswith")


@pytest.mark.parametrize(
    ("value", "searches", "expected", "expected_not"),
    [
        ("axb", ("x", "ax", "xb"), True, False),
        ("abb", ("x", "x", "x"), False, True),
        ("axb", ("", "", ""), False, False),  # an empty search is FALSE both ways
        (None, ("x", "x", "x"), False, False),  # so is an absent property
    ],
)
def test_contains_startswith_endswith(
    value: str | None, searches: tuple[str, str, str], expected: bool, expected_not: bool
) -> None:
    props = {} if value is None else {"value": value}
    for op, search in zip(MATCH_OPS, searches, strict=True):
        check(f"value {op} '{search}'", props, expected)
        check(f"value not {op} '{search}'", props, expected_not)


@pytest.mark.parametrize(
    ("literal", "searches", "expected"),
    [
        ("'axb'", ("x", "ax", "xb"), True),
        ("'axb'", ("u", "u", "u"), False),
        ("'axb'", ("", "", ""), False),
        ("' '", (" ", " ", " "), True),
        ("'axb'", (".", ".", "."), False),
        ("'s'", ("\\", "\\", "\\"), False),
    ],
)
def test_match_on_string_literals(literal: str, searches: tuple[str, str, str], expected: bool) -> None:
    props = {"whatever": "whatever"}
    for op, search in zip(MATCH_OPS, searches, strict=True):
        check(f"{literal} {op} '{search}'", props, expected)
        check(f"{literal} not {op} '{search}'", props, bool(search) and not expected)


@pytest.mark.parametrize("op", MATCH_OPS)
def test_all_in_one(op: str) -> None:
    expression = f"a not in ('4', '4', '5') and b between 3 and 10 and c not {op} 'axbc'"
    check(expression, {"a": "3", "b": "3", "c": "axbdc"}, True)


def test_string_has_string() -> None:
    check("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True)


def test_string_compare_throws_and_does_not_match() -> None:
    between = compile_sql92("a between up and low")
    assert between.evaluate({"a": "3.14"}) is None
    for expression, props in [
        ("a between up and low", {"a": "3.14", "up": "up", "low": "low"}),
        ("key is not null and key between 0 and 100", {"key": "con"}),
        ("a between 0 and 100", {"a": "abc"}),
    ]:
        compiled = compile_sql92(expression)
        with pytest.raises(EvalError):
            compiled.evaluate(props)
        assert compiled(props) is False
    check("a=b", {"a": "3.14", "b": "3.14"}, True)
    check("a<>b", {"a": "3.14", "b": "3.14"}, False)
    check("a<>b", {"a": "3.14", "b": "3.141"}, True)


def test_numbers() -> None:
    check("a > 3.1E10", {"a": "3.1415E10"}, True)  # Java's String.valueOf(3.1415 * 10^10)
    check("a > 3.14", {"a": "3.1415"}, True)
    check("a > b", {"a": "10", "b": "20"}, False)
    check("a > b", {"a": "20", "b": "10"}, True)


def test_null_or() -> None:
    check("a is null OR a='hello'", {}, True)
    check("a is null OR a='hello'", {"a": "hello"}, True)
    check("a is null OR a='hello'", {"a": "abc"}, False)


def test_boolean() -> None:
    check("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True)
    check("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False)


def test_equal() -> None:
    check("a is not null and a='hello'", {"a": "hello"}, True)
    check("a is not null and a='hello'", {}, False)


AND = "a=3 and b<>4 And c>5 AND d<=4"
OR = "a=3 or b<>4 Or c>5 OR d<=4"


def test_and_or() -> None:
    check(AND, {"a": "3", "b": "5", "c": "6", "d": "1"}, True)
    check(AND, {"a": "4", "b": "5", "c": "6", "d": "1"}, False)
    check(OR, {"a": "3"}, True)
    check(OR, {"a": "4", "b": "5"}, True)
    check(OR, {"a": "4", "b": "4", "c": "6"}, True)
    check(OR, {"a": "4", "b": "4", "c": "3", "d": "2"}, True)
    check(OR, {"a": "4", "b": "4", "c": "3", "d": "10"}, False)


def test_in_between_null() -> None:
    for v in ("3", "4", "5"):
        check("a in ('3', '4', '5')", {"a": v}, True)
        check("a not in ('3', '4', '5')", {"a": v}, False)
    check("a in ('3', '4', '5')", {"a": "8"}, False)
    check("a not in ('3', '4', '5')", {"a": "8"}, True)
    for v in ("2", "10", "3"):
        check("a between 2 and 10", {"a": v}, True)
        check("a not between 2 and 10", {"a": v}, False)
    for v in ("1", "11"):
        check("a between 2 and 10", {"a": v}, False)
        check("a not between 2 and 10", {"a": v}, True)
    check("a is null", {"abc": "2"}, True)
    check("a is null", {"a": "2"}, False)
    check("a is not null", {"a": "2"}, True)
    check("a is not null", {"abc": "2"}, False)
