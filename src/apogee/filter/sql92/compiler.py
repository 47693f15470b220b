"""Compile a checked SQL92 tree into one Python closure per node, once per subscription.

Why closures: the broker evaluates the expression for every message a SQL92 consumer pulls,
and walking a tree with ``isinstance`` dispatch costs several times more than calling nested
closures that already know their operand kinds.  Each node becomes a function of the
properties mapping, specialised at compile time on what is static in RocketMQ's semantics:

* the Java kind of every operand (properties are strings or absent, literals have a fixed
  class, conditions are booleans), so the conversion ``__compare`` would pick (``to_int``,
  ``to_long``, ``to_double``, ``to_bool``) is chosen here, not per message;
* property-versus-literal shapes (``a > 5``, ``TAGS = 'x'``, ``b IN (...)``) read the mapping
  directly instead of calling an operand closure.

Two modes.  *Value* closures return ``True``/``False``/``None`` (SQL unknown), needed under NOT
and inside comparisons.  *Truth* closures return only whether the value is ``True``; they are
used where nothing else matters (the root and the operands of a root AND/OR chain), which lets
AND/OR stop at the first operand that settles the outcome.  Skipping the rest of an AND after an
unknown operand only skips a possible Java exception, and that exception would also have meant
"no match", so the outcome is the same.  ``evaluate.py`` is the slow reference; the tests hold
the two equal on random input.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from apogee.filter.errors import FilterExpressionError
from apogee.filter.sql92 import ast
from apogee.filter.sql92.javatypes import EvalError, dcmp, java_compare, to_bool, to_double, to_int, to_long
from apogee.filter.sql92.parser import parse

Fn = Callable[[Mapping[str, str]], Any]


class _NoConst:
    __slots__ = ()


_NC: Final = _NoConst()
_CONVERT: Final[dict[str, Callable[[str], Any]]] = {"int": to_int, "long": to_long, "double": to_double}
_RELATIONAL: Final[dict[str, Callable[[Any, Any], bool]]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}

_MATCHERS: Final[dict[str, Callable[[str, str], bool]]] = {
    "CONTAINS": operator.contains, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith,
}


class _Operand(NamedTuple):
    fn: Fn
    kind: str  # Java kind of a non-null value: int long double string bool null
    const: object  # the value when known at compile time, else _NC
    prop: str | None  # the property name when the node is a bare property


class CompiledSql92:
    """A SQL92 selector ready to run: ``compiled(properties) -> bool``.

    ``matches`` is the bare closure (no method dispatch) for hot loops; ``properties`` names
    every property the expression reads, so a caller can extract only those.
    """

    __slots__ = ("expression", "tree", "properties", "matches", "_value")

    def __init__(self, expression: str, tree: ast.Node) -> None:
        self.expression = expression
        self.tree = tree
        self.properties: frozenset[str] = ast.property_names(tree)
        truth = _compile(tree, truth=True)
        self._value = _compile(tree, truth=False)

        def matches(properties: Mapping[str, str]) -> bool:
            try:
                return truth(properties)  # type: ignore[no-any-return]
            except EvalError:  # RocketMQ logs the exception and does not deliver the message
                return False

        self.matches: Callable[[Mapping[str, str]], bool] = matches

    def __call__(self, properties: Mapping[str, str]) -> bool:
        return self.matches(properties)

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """The three-valued result (``None`` = unknown); raises EvalError where Java throws."""
        return self._value(properties)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"CompiledSql92({self.expression!r})"


def compile_sql92(expression: str) -> CompiledSql92:
    """Parse, check and compile; cached like RocketMQ's parse cache (clients resend the same
    few expressions with every heartbeat and pull).  FilterExpressionError if invalid."""
    if not isinstance(expression, str):
        raise FilterExpressionError(f"a SQL92 expression must be a string, not {type(expression).__name__}")
    return _compile_cached(expression)


@functools.lru_cache(maxsize=512)
def _compile_cached(expression: str) -> CompiledSql92:
    return CompiledSql92(expression, parse(expression))


# --- operands (any node, value semantics) -------------------------------------------------------


def _operand(node: ast.Node) -> _Operand:
    if isinstance(node, ast.Literal):
        value = node.value
        return _Operand(lambda p: value, node.kind if value is not None else "null", value, None)
    if isinstance(node, ast.Property):
        name = node.name
        return _Operand(lambda p: p.get(name), "string", _NC, name)
    if isinstance(node, ast.Negate):
        inner = _operand(node.operand)
        if inner.const is not _NC:
            if inner.kind in _CONVERT:
                negated = -inner.const  # type: ignore[operator]
                return _Operand(lambda p: negated, inner.kind, negated, None)
            return _Operand(lambda p: None, "null", None, None)
        if inner.prop is not None:  # a string is no Number: always NULL
            return _Operand(lambda p: None, "null", None, None)
        f = inner.fn

        def negate_nothing(p: Mapping[str, str]) -> None:
            f(p)  # only for its exceptions: no non-constant operand is a Number
            return None

        return _Operand(negate_nothing, "null", _NC, None)
    return _Operand(_compile(node, truth=False), "bool", _NC, None)


# --- conditions ------------------------------------------------------------------------------------


def _compile(node: ast.Node, truth: bool) -> Fn:
    """A value closure (True/False/None) or, with ``truth``, one returning ``value is True``."""
    null = False if truth else None
    if isinstance(node, ast.Literal):
        value = bool(node.value) if truth else node.value
        return lambda p: value
    if isinstance(node, ast.And):
        return _and([_compile(o, truth) for o in node.operands], truth)
    if isinstance(node, ast.Or):
        return _or([_compile(o, truth) for o in node.operands], truth)
    if isinstance(node, ast.Not):
        g = _compile(node.operand, truth=False)
        if truth:
            return lambda p: g(p) is False

        def not_(p: Mapping[str, str]) -> bool | None:
            v = g(p)
            return None if v is None else not v

        return not_
    if isinstance(node, ast.BoolCast):  # a property as a condition: NULL or FALSE
        name = node.operand.name  # type: ignore[union-attr]
        if truth:
            return lambda p: False
        return lambda p: None if p.get(name) is None else False
    if isinstance(node, ast.Compare):
        left, right = _operand(node.left), _operand(node.right)
        if node.op in ("=", "<>"):
            return _equal(left, right, node.op == "<>", null)
        return _relational(node.op, left, right, null)
    if isinstance(node, ast.In):
        return _in(node.prop.name, node.values, node.negated, null)
    if isinstance(node, ast.Match):
        return _match(node, _operand(node.operand))
    if isinstance(node, ast.IsNull):
        return _is_null(_operand(node.operand), node.negated)
    raise TypeError(f"not a condition: {node!r}")


def _and(fns: list[Fn], truth: bool) -> Fn:
    if truth:
        if len(fns) == 2:
            f0, f1 = fns
            return lambda p: f0(p) and f1(p)
        if len(fns) == 3:
            f0, f1, f2 = fns
            return lambda p: f0(p) and f1(p) and f2(p)

        def all_true(p: Mapping[str, str]) -> bool:
            for f in fns:  # noqa: SIM110 - a generator costs ~0.3 us per call on the hot path
                if not f(p):
                    return False
            return True

        return all_true

    def and_(p: Mapping[str, str]) -> bool | None:
        result: bool | None = True
        for f in fns:
            v = f(p)
            if v is False:
                return False
            if v is None:
                result = None
        return result

    return and_


def _or(fns: list[Fn], truth: bool) -> Fn:
    if truth:
        if len(fns) == 2:
            f0, f1 = fns
            return lambda p: f0(p) or f1(p)

        def any_true(p: Mapping[str, str]) -> bool:
            for f in fns:  # noqa: SIM110 - a generator costs ~0.3 us per call on the hot path
                if f(p):
                    return True
            return False

        return any_true

    def or_(p: Mapping[str, str]) -> bool | None:
        result: bool | None = False
        for f in fns:
            v = f(p)
            if v is True:
                return True
            if v is None:
                result = None
        return result

    return or_


def _equal(left: _Operand, right: _Operand, neg: bool, null: bool | None) -> Fn:
    """``doCreateEqual`` (and ``NOT`` of it for ``<>``): a NULL left gives NULL, a NULL right
    gives FALSE, two NULLs give TRUE.  ``neg`` flips every non-NULL outcome."""
    if left.prop is not None and right.const is not _NC and right.const is not None:
        return _prop_equal_const(left.prop, right.const, right.kind, neg, null, prop_on_left=True)
    if right.prop is not None and left.const is not _NC and left.const is not None:
        return _prop_equal_const(right.prop, left.const, left.kind, neg, null, prop_on_left=False)
    if left.prop is not None and right.prop is not None:
        a, b = left.prop, right.prop

        def prop_equal_prop(p: Mapping[str, str]) -> bool | None:
            x = p.get(a)
            y = p.get(b)
            if x is None:
                return (not neg) if y is None else null
            if y is None:
                return neg
            return (x == y) != neg

        return prop_equal_prop
    lf, lk, rf, rk = left.fn, left.kind, right.fn, right.kind

    def equal(p: Mapping[str, str]) -> bool | None:
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return (not neg) if rv is None else null
        if rv is None:
            return neg
        return (java_compare(lv, lk, rv, rk) == 0) != neg

    return equal


def _prop_equal_const(name: str, c: object, kind: str, neg: bool, null: bool | None, prop_on_left: bool) -> Fn:
    # A NULL property on the left is NULL; on the right it makes the equality FALSE.
    when_null = null if prop_on_left else neg
    if kind == "string":
        return lambda p: when_null if (v := p.get(name)) is None else (v == c) != neg
    if kind == "bool":
        if not prop_on_left:  # Boolean vs String: ClassCastException in RocketMQ

            def boolean_vs_string(p: Mapping[str, str]) -> bool | None:
                if p.get(name) is None:
                    return when_null
                raise EvalError("Boolean compared with String (ClassCastException in RocketMQ)")

            return boolean_vs_string
        return lambda p: when_null if (v := p.get(name)) is None else (to_bool(v) == c) != neg
    convert = _CONVERT[kind]  # numbers; a double literal is never 0.0 or NaN, so == is compareTo == 0
    return lambda p: when_null if (v := p.get(name)) is None else (convert(v) == c) != neg


def _relational(op: str, left: _Operand, right: _Operand, null: bool | None) -> Fn:
    """``ComparisonExpression.evaluate`` for > >= < <=: NULL on either side gives NULL; two
    strings compare as doubles; otherwise ``__compare`` conversions."""
    test = _RELATIONAL[op]
    if left.prop is not None and right.const is not _NC and right.kind in _CONVERT:
        return _prop_vs_number(left.prop, right.const, right.kind, test, null, prop_on_left=True)
    if right.prop is not None and left.const is not _NC and left.kind in _CONVERT:
        return _prop_vs_number(right.prop, left.const, left.kind, test, null, prop_on_left=False)
    if left.prop is not None and right.prop is not None:
        a, b = left.prop, right.prop

        def prop_vs_prop(p: Mapping[str, str]) -> bool | None:
            x = p.get(a)
            if x is None:
                return null
            y = p.get(b)
            if y is None:
                return null
            return test(dcmp(to_double(x), to_double(y)), 0)

        return prop_vs_prop
    lf, lk, rf, rk = left.fn, left.kind, right.fn, right.kind

    def relational(p: Mapping[str, str]) -> bool | None:
        lv = lf(p)
        if lv is None:
            return null
        rv = rf(p)
        if rv is None:
            return null
        if lk == "string" and rk == "string":
            return test(dcmp(to_double(lv), to_double(rv)), 0)
        return test(java_compare(lv, lk, rv, rk), 0)

    return relational


def _prop_vs_number(
    name: str, c: Any, kind: str, test: Callable[[Any, Any], bool], null: bool | None, prop_on_left: bool
) -> Fn:
    convert = _CONVERT[kind]
    if kind == "double":
        # Double.compareTo puts NaN above everything; Python's NaN compares false both ways.
        nan_result = test(1, 0) if prop_on_left else test(0, 1)
        if prop_on_left:

            def prop_vs_double(p: Mapping[str, str]) -> bool | None:
                v = p.get(name)
                if v is None:
                    return null
                x = to_double(v)
                return test(x, c) if x == x else nan_result

            return prop_vs_double

        def double_vs_prop(p: Mapping[str, str]) -> bool | None:
            v = p.get(name)
            if v is None:
                return null
            x = to_double(v)
            return test(c, x) if x == x else nan_result

        return double_vs_prop
    if prop_on_left:
        return lambda p: null if (v := p.get(name)) is None else test(convert(v), c)
    return lambda p: null if (v := p.get(name)) is None else test(c, convert(v))


def _in(name: str, values: frozenset[str], neg: bool, null: bool | None) -> Fn:
    if not neg and null is False:
        return lambda p: p.get(name) in values  # an absent property (None) is in no set
    return lambda p: null if (v := p.get(name)) is None else (v in values) != neg


def _match(node: ast.Match, operand: _Operand) -> Fn:
    """CONTAINS/STARTSWITH/ENDSWITH: FALSE (never NULL) for an empty search, a NULL or a
    non-string operand, and so are their NOT forms."""
    search, neg = node.search, node.negated
    test = _MATCHERS[node.op]
    if not search:
        return lambda p: False
    if operand.prop is not None:
        name = operand.prop
        return lambda p: (v := p.get(name)) is not None and test(v, search) != neg
    if operand.const is not _NC:
        result = operand.kind == "string" and test(operand.const, search) != neg  # type: ignore[arg-type]
        return lambda p: result
    f = operand.fn
    if operand.kind != "string":

        def not_a_string(p: Mapping[str, str]) -> bool:
            f(p)  # evaluated for its exceptions, as Java does
            return False

        return not_a_string
    return lambda p: (v := f(p)) is not None and test(v, search) != neg


def _is_null(operand: _Operand, neg: bool) -> Fn:
    if operand.prop is not None:
        name = operand.prop
        if neg:
            return lambda p: p.get(name) is not None
        return lambda p: p.get(name) is None
    if operand.const is not _NC:
        result = (operand.const is None) != neg
        return lambda p: result
    f = operand.fn
    return lambda p: (f(p) is None) != neg
