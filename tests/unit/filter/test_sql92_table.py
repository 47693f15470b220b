"""SQL92 selectors against a fixed set of messages, with the matching set worked out by hand
from RocketMQ's semantics (ComparisonExpression, LogicExpression, UnaryExpression and the
broker's ExpressionMessageFilter, which treats an evaluation exception as "no match").

Each row is checked three ways: the compiled closure, the reference evaluator, and (for the
messages that carry properties) the full stored-record path.
"""

from __future__ import annotations

import pytest

from apogee.common.message_codec import encode_record
from apogee.filter import SqlMessageFilter, compile_sql92
from apogee.filter.sql92 import evaluate, parse

MESSAGES: dict[str, dict[str, str]] = {
    "m0": {},
    "m1": {"TAGS": "TagA", "a": "3", "b": "x", "name": "hello"},
    "m2": {"TAGS": "TagB", "a": "6", "b": "y", "name": "world", "price": "9.99"},
    "m3": {"TAGS": "TagA", "a": "10", "b": "z", "flag": "true", "price": "100"},
    "m4": {"TAGS": "TagC", "a": "abc", "flag": "FALSE", "name": "hello world"},
    "m5": {"a": "5.5", "b": "x", "big": "3000000000", "flag": "True"},
    "m6": {"TAGS": "it's", "a": "-7", "price": "NaN", "big": "-9223372036854775808", "c": "-7"},
}
ALL = set(MESSAGES)

# (expression, names of the matching messages, why)
TABLE: list[tuple[str, set[str], str]] = [
    ("TAGS = 'TagA'", {"m1", "m3"}, "string equality"),
    ("TAGS <> 'TagA'", {"m2", "m4", "m6"}, "absent TAGS is unknown, not 'different'"),
    ("TAGS IN ('TagA', 'TagB')", {"m1", "m2", "m3"}, "IN"),
    ("TAGS NOT IN ('TagA', 'TagB')", {"m4", "m6"}, "NOT IN of an absent property is unknown"),
    ("TAGS IS NULL", {"m0", "m5"}, "IS NULL"),
    ("TAGS IS NOT NULL", {"m1", "m2", "m3", "m4", "m6"}, "IS NOT NULL"),
    ("a > 5", {"m2", "m3"}, "Integer.valueOf: 'abc' and '5.5' throw, so no match"),
    ("a > 5.0", {"m2", "m3", "m5"}, "Double.valueOf accepts '5.5'"),
    ("a >= 6", {"m2", "m3"}, ">="),
    ("a < 5", {"m1", "m6"}, "<"),
    ("a <= -7", {"m6"}, "unary minus on a literal"),
    ("a = 3", {"m1"}, "string property vs Integer: converted"),
    ("a = '3'", {"m1"}, "string vs string"),
    ("a <> 3", {"m2", "m3", "m6"}, "<> is NOT(=): a failed conversion is still no match"),
    ("a BETWEEN 3 AND 6", {"m1", "m2"}, "inclusive bounds"),
    ("a NOT BETWEEN 3 AND 6", {"m3", "m6"}, "< low OR > high"),
    ("a BETWEEN 6 AND 6", {"m2"}, "equal bounds are allowed"),
    ("a NOT BETWEEN 6 AND 3", {"m1", "m2", "m3", "m6"}, "NOT BETWEEN has no bounds check"),
    ("b IN ('x', 'y')", {"m1", "m2", "m5"}, "IN"),
    ("b NOT IN ('x')", {"m2", "m3"}, "NOT IN"),
    ("NOT (b IN ('x'))", {"m2", "m3"}, "NOT of unknown is unknown"),
    ("NOT b IN ('x')", {"m2", "m3"}, "a leading NOT binds looser than IN (JMS precedence)"),
    ("name CONTAINS 'hello'", {"m1", "m4"}, "CONTAINS"),
    ("name NOT CONTAINS 'hello'", {"m2"}, "NOT CONTAINS of an absent property is FALSE"),
    ("NOT (name CONTAINS 'hello')", {"m0", "m2", "m3", "m5", "m6"}, "CONTAINS is FALSE, never unknown"),
    ("name STARTSWITH 'hel'", {"m1", "m4"}, "STARTSWITH"),
    ("name ENDSWITH 'world'", {"m2", "m4"}, "ENDSWITH"),
    ("name CONTAINS ''", set(), "an empty search is FALSE"),
    ("name NOT STARTSWITH ''", set(), "and so is its NOT form"),
    ("flag = TRUE", {"m3", "m5"}, "Boolean.valueOf ignores case"),
    ("flag = FALSE", {"m4"}, "Boolean.valueOf('FALSE') is false"),
    ("flag <> TRUE", {"m4"}, "<> TRUE"),
    ("TRUE = flag", set(), "Boolean vs String is a ClassCastException in RocketMQ"),
    ("price > 50", {"m3"}, "'9.99' and 'NaN' fail Integer.valueOf"),
    ("price > 50.5", {"m3", "m6"}, "Double.compareTo puts NaN above everything"),
    ("price < 50.5", {"m2"}, "NaN is not below"),
    ("price = 100", {"m3"}, "numeric equality"),
    ("price = 100.0", {"m3"}, "Double equality"),
    ("big > 2147483647", set(), "an Integer literal makes Integer.valueOf fail past 2**31"),
    ("big > 2147483648", {"m5"}, "a Long literal uses Long.valueOf"),
    ("big <= -9223372036854775807", {"m6"}, "Long.MIN_VALUE as a property value"),
    ("a > b", set(), "two properties compare as doubles: 'x' fails"),
    ("a = c", {"m0", "m6"}, "two absent properties are equal (null == null)"),
    ("a IS NULL OR a = '3'", {"m0", "m1"}, "ExpressionTest nullOr"),
    ("a > 5 OR TAGS = 'TagA'", {"m1", "m2", "m3"}, "OR"),
    ("TAGS = 'TagC' OR a > 5", {"m2", "m3", "m4"}, "a TRUE left operand short-circuits"),
    ("a > 5 OR TAGS = 'TagC'", {"m2", "m3"}, "an exception on the left loses the match"),
    ("NOT (a > 5)", {"m1", "m6"}, "NOT"),
    ("NOT NOT (TAGS = 'TagA')", {"m1", "m3"}, "double NOT"),
    ("TAGS = 'TagA' AND (a = 3 OR b = 'z')", {"m1", "m3"}, "parentheses"),
    ("(TAGS = 'TagA' OR TAGS = 'TagB') AND NOT a BETWEEN 4 AND 8", {"m1", "m3"}, "NOT (a BETWEEN ..)"),
    ("TAGS = 'TagA' AND a > 5 OR TAGS = 'TagB'", {"m2", "m3"}, "AND binds tighter than OR"),
    ("TAGS = 'it''s'", {"m6"}, "'' is a quote"),
    ("a = 'hello' OR name = 'hello'", {"m1"}, "OR of string tests"),
    ("tags = 'TagA'", set(), "property names are case-sensitive"),
    ("TAGS = 'taga'", set(), "values are case-sensitive"),
    ("a > 5 and tags is null", {"m2", "m3"}, "keywords are case-insensitive"),
    ("TRUE", ALL, "constant TRUE"),
    ("FALSE", set(), "constant FALSE"),
    ("NULL", set(), "constant NULL is unknown"),
    ("NOT NULL", set(), "NOT unknown is unknown"),
    ("TAGS", set(), "a property as a condition is FALSE (its value is no Boolean) or NULL"),
    ("NOT TAGS", {"m1", "m2", "m3", "m4", "m6"}, "so NOT property means 'is present'"),
    ("'x' = b", {"m1", "m5"}, "literal on the left"),
    ("'x' <> b", {"m0", "m2", "m3", "m4", "m6"}, "a NULL right operand makes = FALSE, so <> TRUE"),
    ("b <> 'x'", {"m2", "m3"}, "but a NULL left operand makes it unknown"),
    ("5 < a", {"m2", "m3"}, "literal on the left of <"),
    ("a = -7", {"m6"}, "negative literal"),
    ("a >= 1E1", {"m3"}, "exponent literal"),
    ("a > .5E1", {"m2", "m3", "m5"}, "float literal starting with '.'"),
    ("a IS NOT NULL AND a = 'abc'", {"m4"}, "ExpressionTest equal"),
    ("(a > 1) = TRUE", {"m1", "m2", "m3"}, "a condition compared with TRUE"),
    ("a = NOT b", {"m0"}, "RocketMQ's operand NOT: absent a and NOT(absent b) are both NULL"),
    ("a > 5 -- a comment\n AND TAGS = 'TagA'", {"m3"}, "line comment"),
    ("/* block */ a IN ('3') AND a > 2", {"m1"}, "block comment"),
    ("a = 3L", {"m1"}, "L suffix, still an Integer"),
]


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 40
    assert len({row[0] for row in TABLE}) == len(TABLE)


@pytest.mark.parametrize(("expression", "expected", "why"), TABLE, ids=[row[0] for row in TABLE])
def test_compiled(expression: str, expected: set[str], why: str) -> None:
    compiled = compile_sql92(expression)
    got = {name for name, props in MESSAGES.items() if compiled(props)}
    assert got == expected, why


@pytest.mark.parametrize(("expression", "expected", "why"), TABLE, ids=[row[0] for row in TABLE])
def test_reference_evaluator(expression: str, expected: set[str], why: str) -> None:
    tree = parse(expression)
    got = {name for name, props in MESSAGES.items() if evaluate(tree, props)}
    assert got == expected, why


@pytest.mark.parametrize(("expression", "expected", "why"), TABLE, ids=[row[0] for row in TABLE])
def test_stored_records(expression: str, expected: set[str], why: str) -> None:
    message_filter = SqlMessageFilter(expression)
    got = set()
    for name, props in MESSAGES.items():
        record = encode_record(topic="TopicTest", body=b"body " + name.encode(), properties=props)
        assert message_filter.is_matched_by_consume_queue(12345)
        if message_filter.is_matched_by_commit_log(memoryview(record)):
            got.add(name)
    assert got == expected, why
