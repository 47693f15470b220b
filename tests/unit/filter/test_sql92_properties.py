"""Property tests: the compiled closures against the reference evaluator, NOT against its
operand, round trips through ``to_sql``, and garbage that must fail cleanly."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from apogee.filter import FilterExpressionError, compile_sql92
from apogee.filter.sql92 import EvalError, parse
from apogee.filter.sql92.ast import to_sql
from apogee.filter.sql92.evaluate import evaluate_value

NAMES = ("a", "b", "c", "TAGS")
VALUES = (
    "1", "5", "-3", "0", "5.5", "-0.0", "1e3", "3000000000", "-9223372036854775808", "NaN", "Infinity",
    "abc", "x", "true", "TRUE", "false", " 7 ", "+4", "٣", "0x10", "it's",
)
LITERALS = (
    "1", "5", "-3", "0", "2147483648", "5L", "2.5", ".5", "1E3", "'x'", "'abc'", "'5'", "'true'", "''", "'it''s'",
    "TRUE", "FALSE", "NULL",
)

props_strategy = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=len(NAMES))
operand = st.one_of(st.sampled_from(NAMES), st.sampled_from(LITERALS), st.sampled_from(NAMES).map(lambda n: "-" + n))


def _string_list(values: list[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _condition(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["AND", "OR"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda e: f"NOT ({e})"),
        children.map(lambda e: f"NOT {e}"),
        st.tuples(children, st.sampled_from(["=", "<>"]), st.sampled_from(["TRUE", "FALSE"])).map(" ".join),
    )


leaf = st.one_of(
    st.tuples(operand, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]), operand).map(" ".join),
    st.tuples(st.sampled_from(NAMES), st.sampled_from(["", "NOT "]), operand, operand).map(
        lambda t: f"{t[0]} {t[1]}BETWEEN {t[2]} AND {t[3]}"
    ),
    st.tuples(
        st.sampled_from(NAMES), st.sampled_from(["", "NOT "]), st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)
    ).map(lambda t: f"{t[0]} {t[1]}IN ({_string_list(t[2])})"),
    st.tuples(operand, st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
    st.tuples(operand, st.sampled_from(["", "NOT "]), st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]),
              st.sampled_from(["'a'", "'x'", "''", "'1'"])).map(lambda t: f"{t[0]} {t[1]}{t[2]} {t[3]}"),
    st.sampled_from(NAMES),
    st.sampled_from(["TRUE", "FALSE", "NULL"]),
)
expressions = st.recursive(leaf, _condition, max_leaves=8)


def _reference(text: str, props: dict[str, str]) -> object:
    try:
        return evaluate_value(parse(text), props)[0]
    except EvalError:
        return "error"


def _compiled_value(text: str, props: dict[str, str]) -> object:
    try:
        return compile_sql92(text).evaluate(props)
    except EvalError:
        return "error"


def _parses(text: str) -> bool:
    try:
        parse(text)
    except FilterExpressionError:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(expressions, props_strategy)
def test_compiled_equals_reference(text: str, props: dict[str, str]) -> None:
    assume(_parses(text))
    expected = _reference(text, props)
    assert _compiled_value(text, props) == expected
    assert compile_sql92(text)(props) is (expected is True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(expressions, props_strategy)
def test_not_is_three_valued(text: str, props: dict[str, str]) -> None:
    assume(_parses(text))
    value = _reference(text, props)
    negated = compile_sql92(f"NOT ({text})")
    if value == "error":
        assert negated(props) is False
    else:
        # NOT TRUE = FALSE, NOT FALSE = TRUE, NOT unknown = unknown (no match either way).
        assert negated(props) is (value is False)


# On messages that carry every referenced property with an integer value, and expressions
# without NULL or string comparisons, nothing is unknown and nothing throws: NOT is the
# exact complement.
int_operand = st.one_of(st.sampled_from(["a", "b", "c"]), st.integers(-5, 5).map(str))
simple_leaf = st.one_of(
    st.tuples(int_operand, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]), int_operand).map(" ".join),
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["", "NOT "]), st.integers(-5, 0),
              st.integers(0, 5)).map(lambda t: f"{t[0]} {t[1]}BETWEEN {t[2]} AND {t[3]}"),
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["", "NOT "]),
              st.lists(st.integers(-5, 5).map(str), min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {t[1]}IN (" + ", ".join(f"'{v}'" for v in t[2]) + ")"),
)
simple_expressions = st.recursive(
    simple_leaf,
    lambda ch: st.one_of(
        st.tuples(ch, st.sampled_from(["AND", "OR"]), ch).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        ch.map(lambda e: f"NOT ({e})"),
    ),
    max_leaves=8,
)
full_props = st.fixed_dictionaries({n: st.integers(-6, 6).map(str) for n in ("a", "b", "c")})


@settings(max_examples=300, deadline=None)
@given(simple_expressions, full_props)
def test_not_is_the_complement_when_everything_is_known(text: str, props: dict[str, str]) -> None:
    assert compile_sql92(f"NOT ({text})")(props) is not compile_sql92(text)(props)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(expressions)
def test_to_sql_round_trip(text: str) -> None:
    assume(_parses(text))
    tree = parse(text)
    assert parse(to_sql(tree)) == tree


TOKENS = (
    "a", "b", "TAGS", "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "=", "<>",
    ">", "<=", "(", ")", ",", "+", "-", "'x'", "'", "1", "2.5", "1e", ".", "--", "/*", "*/", "\n", "!", "0x1",
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(TOKENS), max_size=20).map(" ".join)), props_strategy)
def test_garbage_fails_cleanly(text: str, props: dict[str, str]) -> None:
    try:
        compiled = compile_sql92(text)
    except FilterExpressionError as err:
        assert str(err)
        return
    assert compiled(props) in (True, False)
