"""Parsing: RocketMQ's lexical quirks, precedence, the checks it makes while building the
tree, readable errors and the size limits."""

from __future__ import annotations

import pytest

from apogee.errors import ApogeeError
from apogee.filter import FilterExpressionError, compile_sql92
from apogee.filter.sql92 import MAX_DEPTH, MAX_EXPRESSION_LENGTH, parse
from apogee.filter.sql92 import ast as A
from apogee.filter.sql92.ast import to_sql

a, b, c = A.Property("a"), A.Property("b"), A.Property("c")


def lit(value: object, kind: str) -> A.Literal:
    return A.Literal(value, kind)  # type: ignore[arg-type]


# --- literals and tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("5", 5, "int"),
        ("5L", 5, "int"),  # the suffix does not make a Long (createFromDecimal)
        ("5l", 5, "int"),
        ("2147483647", 2147483647, "int"),
        ("2147483648", 2147483648, "long"),
        ("9223372036854775807", 9223372036854775807, "long"),
        ("0", 0, "int"),
        ("5.", 5.0, "double"),
        (".5", 0.5, "double"),
        ("5.5E10", 5.5e10, "double"),
        ("5e-1", 0.5, "double"),
        ("1E+2", 100.0, "double"),
        ("'it''s'", "it's", "string"),
        ("''", "", "string"),
        ("'a\nb'", "a\nb", "string"),
        ("TRUE", True, "bool"),
        ("false", False, "bool"),
    ],
)
def test_literals(text: str, value: object, kind: str) -> None:
    tree = parse(f"x = {text}")
    assert tree == A.Compare("=", A.Property("x"), lit(value, kind))


@pytest.mark.parametrize(
    "text",
    [
        "a = 007",  # JavaCC: 0, 0, 7
        "a = 0x1F",  # 0 then the identifier x1F: no hex literals
        "a = 0L",  # the L suffix needs a non-zero first digit
        "a = 1.2.3",
        "a == 1",
        "a != 1",
        "a.b = 1",
        "my-prop = 'x'",
        "a = \"x\"",
        "a = 1;",
        "a\u00a0= 1",  # only space, tab, CR, LF and FF are blanks
        "a = 1 -- no line break after the comment",
        "a = 1 /* unterminated",
        "ä = 1",  # identifiers are ASCII
    ],
)
def test_rejected_tokens(text: str) -> None:
    with pytest.raises(FilterExpressionError):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "$a = '1'",
        "_x_1 = '1'",
        "a BeTwEeN 1 aNd 2",
        "a iS nOt NuLl",
        "a\t=\r\n1\f",
        "/* x */ a = 1 /* y */",
        "a = 1 -- x\n",
        "a = 1 -- x\r",
        "a > 5. AND a < .5E2",
        "a > +5",
        "a > - - 5",
        "a contains 'x' and b not startswith 'y' or c endswith 'z'",
        "a <= now",  # ParserTest: "now" is a property
    ],
)
def test_accepted(text: str) -> None:
    parse(text)


def test_keywords_win_only_at_equal_length() -> None:
    assert parse("andy = 'x'") == A.Compare("=", A.Property("andy"), lit("x", "string"))
    assert parse("notnull IS NULL") == A.IsNull(A.Property("notnull"), False)


# --- structure and precedence ------------------------------------------------------------------------


def test_and_binds_tighter_than_or() -> None:
    x, y, z = (A.Compare("=", p, lit("1", "string")) for p in (a, b, c))
    assert parse("a = '1' OR b = '1' AND c = '1'") == A.Or((x, A.And((y, z))))
    assert parse("(a = '1' OR b = '1') AND c = '1'") == A.And((A.Or((x, y)), z))


def test_chains_are_flattened() -> None:
    tree = parse("a = 1 AND b = 1 AND (c = 1 AND a = 2)")
    assert isinstance(tree, A.And) and len(tree.operands) == 4


def test_leading_not_takes_the_whole_comparison() -> None:
    # JMS precedence OR < AND < NOT < comparison.  RocketMQ's grammar binds NOT tighter
    # (``(NOT a) = 'x'``); see the parser's module notes.
    assert parse("NOT a = 'x'") == parse("NOT (a = 'x')")
    assert parse("NOT a IS NULL") == A.Not(A.IsNull(a, False))
    assert parse("NOT a > 5 AND b = 'y'") == A.And((parse("NOT (a > 5)"), parse("b = 'y'")))
    assert parse("NOT NOT a = 1") == A.Not(A.Not(parse("a = 1")))


def test_not_in_operand_position_keeps_rocketmq_meaning() -> None:
    assert parse("a = NOT b") == A.Compare("=", a, A.Not(A.BoolCast(b)))


def test_comparisons_chain_left_to_right_like_rocketmq() -> None:
    assert parse("a = 1 = TRUE") == A.Compare("=", A.Compare("=", a, lit(1, "int")), lit(True, "bool"))
    assert parse("a > 1 = TRUE") == A.Compare("=", A.Compare(">", a, lit(1, "int")), lit(True, "bool"))


def test_between_is_desugared() -> None:
    assert parse("a BETWEEN 1 AND 2") == A.And((A.Compare(">=", a, lit(1, "int")), A.Compare("<=", a, lit(2, "int"))))
    assert parse("a NOT BETWEEN 1 AND 2") == A.Or((A.Compare("<", a, lit(1, "int")), A.Compare(">", a, lit(2, "int"))))
    tree = parse("a BETWEEN 1 AND 2 AND b = 'x'")
    assert isinstance(tree, A.And) and len(tree.operands) == 3


def test_property_as_condition_is_cast() -> None:
    assert parse("a") == A.BoolCast(a)
    assert parse("a AND NOT b") == A.And((A.BoolCast(a), A.Not(A.BoolCast(b))))


def test_blank_insensitive_like_parser_test_equals() -> None:
    assert parse("a=3 and b<>4 And c>5 AND d<=4") == parse("a=3  and    b<>4 And c>5 AND d<=4")
    assert parse("a=3 and b<>4 And c>5 AND d<=4") != parse("a=3 or b<>4 Or c>5 OR d<=4")


@pytest.mark.parametrize(
    "text",
    [
        "a > 5 AND b IN ('x', 'y') AND TAGS = 'TagA'",
        "NOT (a = 'x') OR b NOT BETWEEN -1 AND 2.5",
        "a = NOT b",
        "(NOT a) = TRUE",
        "'it''s' = TAGS OR c IS NOT NULL",
        "x CONTAINS 'q' AND NOT y NOT ENDSWITH 'z'",
        "a = -b AND -(-5) < c",
        "a > 3000000000 AND b < 1E300 AND c = 5E-324",
    ],
)
def test_to_sql_round_trips(text: str) -> None:
    tree = parse(text)
    assert parse(to_sql(tree)) == tree


# --- RocketMQ's construction-time checks and other errors ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ("a > 1 AND (b = 2", "expected ')'", 17),
        ("a != 1", "use <> for 'not equal'", 3),
        ("a == 1", "expected a value, a property or '('", 4),
        ("a > 'x'", "'x' cannot be compared with >; only numbers can", 3),
        ("a >= TRUE", "TRUE cannot be compared with >=", 3),
        ("a > (b > 1)", "a condition cannot be compared with >", 3),
        ("a = NULL", "use IS NULL", 3),
        ("NULL <> a", "use IS NULL", 6),
        ("TRUE = 1", "TRUE cannot be compared with 1", 6),
        ("a BETWEEN 10 AND 0", "lower bound 10 must not exceed the upper bound 0", 3),
        ("a BETWEEN 1.5 AND 1", "lower bound 1.5", 3),
        ("a BETWEEN NULL AND 1", "cannot be NULL", 3),
        ("a BETWEEN 'a' AND 'b'", "only numbers can", 3),
        ("a BETWEEN 1 OR 2", "expected AND between the bounds", 13),
        ("a > 0.0", "4.9E-324", 5),
        ("a > 100000000000000000000000", "larger than 9223372036854775807", 5),
        ("a > 9223372036854775808", "larger than 9223372036854775807", 5),
        ("a > 1e309", "larger than 1.7976931348623157E308", 5),
        ("5", "5 is not a condition", 1),
        ("'x'", "'x' is not a condition", 1),
        ("-a", "is not a condition", 1),
        ("NOT 5", "5 is not a condition", 5),
        ("a = 1 AND 2", "2 is not a condition", 11),
        ("a + 1 > 2", "expected AND, OR or the end of the expression", 3),
        ("a in (1)", "expected a string literal in the IN list", 7),
        ("a in ()", "expected a string literal in the IN list", 7),
        ("a IN ('x'", "expected ',' or ')' in the IN list", 10),
        ("'x' IN ('x')", "IN needs a property on its left", 5),
        ("(a) NOT IN ('x') = TRUE", None, None),  # fine: (a) is still a property
        ("a IS 5", "expected NULL or NOT NULL after IS", 6),
        ("value contains x", "expected a string literal after CONTAINS", 16),
        ("value not contains 123", "expected a string literal after CONTAINS", 20),
        ("'axb' contains ", "expected a string literal after CONTAINS", 16),
        ("a and between 2 and 10", "expected a value, a property or '('", 7),
        ("", "expected a value, a property or '('", 1),
        ("   ", "expected a value, a property or '('", 4),
        ("a = 'open", "unterminated string literal", 5),
        ("a = 1 /", "unterminated or stray '/'", 7),
        ("a = 1 -- comment", "expected AND, OR or the end of the expression", 7),
        ("a = 1)", "expected AND, OR or the end of the expression", 6),
    ],
)
def test_errors(text: str, fragment: str | None, column: int | None) -> None:
    if fragment is None:
        parse(text)
        return
    with pytest.raises(FilterExpressionError) as info:
        parse(text)
    err = info.value
    assert fragment in str(err)
    assert err.column == column, str(err)
    assert f"at column {column} in " in str(err)
    assert isinstance(err, ApogeeError) and isinstance(err, ValueError)


def test_error_message_reads_well() -> None:
    with pytest.raises(FilterExpressionError) as info:
        compile_sql92("a > 1 AND (b = 2")
    assert str(info.value) == "expected ')' at column 17 in \"a > 1 AND (b = 2\"; found end of expression"
    assert info.value.reason == "expected ')'"
    assert info.value.position == 16


def test_error_on_a_later_line_names_the_line() -> None:
    with pytest.raises(FilterExpressionError) as info:
        parse("a = 1\nAND (b = 2")
    assert info.value.line == 2 and info.value.column == 11
    assert "at line 2, column 11" in str(info.value)
    assert "\\n" in str(info.value)  # the newline is escaped in the quoted expression


def test_long_expression_is_excerpted() -> None:
    text = " OR ".join(f"p{i} = 'v'" for i in range(100)) + " OR ("
    with pytest.raises(FilterExpressionError) as info:
        parse(text)
    message = str(info.value)
    assert "…" in message and f"({len(text)} characters)" in message
    assert len(message) < 300


def test_not_a_string() -> None:
    for value in (None, 5, b"a = 1", ["a"]):
        with pytest.raises(FilterExpressionError):
            compile_sql92(value)  # type: ignore[arg-type]


# --- limits --------------------------------------------------------------------------------------------


def test_length_limit() -> None:
    ok = "a = '" + "x" * (MAX_EXPRESSION_LENGTH - 6) + "'"
    assert len(ok) == MAX_EXPRESSION_LENGTH
    parse(ok)
    with pytest.raises(FilterExpressionError, match="4097 characters long, more than the 4096 accepted"):
        parse(ok + " ")


def test_parenthesis_depth_limit() -> None:
    parse("(" * MAX_DEPTH + "a = 1" + ")" * MAX_DEPTH)
    with pytest.raises(FilterExpressionError, match="nested deeper than 64 levels") as info:
        parse("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    assert info.value.column == MAX_DEPTH + 1


@pytest.mark.parametrize(
    "text",
    [
        "NOT " * 65 + "a = 1",
        "a > " + "-" * 65 + "1",
        "a = " + "NOT " * 65 + "b",
        " = ".join(["1"] * 70),  # a left-deep chain of comparisons
    ],
)
def test_other_deep_nesting_is_refused(text: str) -> None:
    with pytest.raises(FilterExpressionError, match="nested deeper than 64 levels"):
        parse(text)


def test_long_flat_chains_are_fine() -> None:
    text = " OR ".join(f"p{i}='{i}'" for i in range(300))
    assert len(text) <= MAX_EXPRESSION_LENGTH
    compiled = compile_sql92(text)
    assert compiled({"p299": "299"}) and not compiled({"p299": "1"})
