"""Reference evaluator: a slow, literal transcription of RocketMQ's ``evaluate`` methods.

It exists to check the compiled closures (``compiler``), which specialise and inline for speed:
the tests run both on random expressions and properties and require the same answers.  Each
function below names the Java method it mirrors; results are three-valued (``True``, ``False``,
``None`` for SQL NULL/unknown) and a Java RuntimeException is ``EvalError``.
"""

from __future__ import annotations

from collections.abc import Mapping

from apogee.filter.sql92 import ast
from apogee.filter.sql92.javatypes import EvalError, dcmp, java_compare, to_double

Value = tuple[object, str]  # (Python value or None, Java kind); kind "null" when value is None
_NULL: Value = (None, "null")
_NUMERIC = ("int", "long", "double")


def evaluate(node: ast.Node, properties: Mapping[str, str]) -> bool:
    """Whether the message matches, as ``ExpressionMessageFilter.isMatchedByCommitLog`` decides."""
    try:
        value, _ = evaluate_value(node, properties)
    except EvalError:
        return False
    return value is True


def evaluate_value(node: ast.Node, props: Mapping[str, str]) -> Value:
    """``Expression.evaluate``: the node's value and Java kind; raises EvalError."""
    if isinstance(node, ast.Literal):
        return (node.value, node.kind) if node.value is not None else _NULL
    if isinstance(node, ast.Property):  # PropertyExpression -> MessageEvaluationContext.get
        text = props.get(node.name)
        return (text, "string") if text is not None else _NULL
    if isinstance(node, ast.Negate):  # UnaryExpression.createNegate
        v, k = evaluate_value(node.operand, props)
        if v is None or k not in _NUMERIC:
            return _NULL
        return (-v, k)  # type: ignore[operator]
    return (_boolean(node, props), "bool")


def _boolean(node: ast.Node, props: Mapping[str, str]) -> bool | None:
    if isinstance(node, ast.Not):  # UnaryExpression.createNOT
        v = evaluate_value(node.operand, props)[0]
        return None if v is None else not v
    if isinstance(node, ast.BoolCast):  # UnaryExpression.createBooleanCast
        v, k = evaluate_value(node.operand, props)
        if v is None:
            return None
        return bool(v) if k == "bool" else False
    if isinstance(node, ast.And):  # LogicExpression.createAND, folded left
        result: bool | None = True
        for operand in node.operands:
            v = evaluate_value(operand, props)[0]
            if v is False:
                return False
            if v is None:
                result = None
        return result
    if isinstance(node, ast.Or):  # LogicExpression.createOR, folded left
        result = False
        for operand in node.operands:
            v = evaluate_value(operand, props)[0]
            if v is True:
                return True
            if v is None:
                result = None
        return result
    if isinstance(node, ast.Compare):
        if node.op == "=":
            return _equal(node.left, node.right, props)
        if node.op == "<>":  # createNotEqual = NOT(createEqual)
            eq = _equal(node.left, node.right, props)
            return None if eq is None else not eq
        return _relational(node.op, node.left, node.right, props)
    if isinstance(node, ast.In):  # UnaryExpression.createInExpression
        v, _ = evaluate_value(node.prop, props)
        if v is None:
            return None
        return (v in node.values) != node.negated
    if isinstance(node, ast.Match):  # ComparisonExpression.ContainsExpression & co.
        if not node.search:
            return False
        v, k = evaluate_value(node.operand, props)
        if v is None or k != "string":
            return False
        s = str(v)
        if node.op == "CONTAINS":
            hit = node.search in s
        elif node.op == "STARTSWITH":
            hit = s.startswith(node.search)
        else:
            hit = s.endswith(node.search)
        return hit != node.negated
    if isinstance(node, ast.IsNull):  # createIsNull = doCreateEqual(x, NULL)
        v, _ = evaluate_value(node.operand, props)
        return (v is None) != node.negated
    if isinstance(node, ast.Literal):  # BooleanConstantExpression TRUE/FALSE/NULL
        return node.value  # type: ignore[return-value]
    raise TypeError(f"not a boolean node: {node!r}")


def _equal(left: ast.Node, right: ast.Node, props: Mapping[str, str]) -> bool | None:
    """``ComparisonExpression.doCreateEqual(...).evaluate``."""
    lv, lk = evaluate_value(left, props)
    rv, rk = evaluate_value(right, props)
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is None:
        return True
    return java_compare(lv, lk, rv, rk) == 0


def _relational(op: str, left: ast.Node, right: ast.Node, props: Mapping[str, str]) -> bool | None:
    """``ComparisonExpression.evaluate`` for ``> >= < <=``."""
    lv, lk = evaluate_value(left, props)
    if lv is None:
        return None
    rv, rk = evaluate_value(right, props)
    if rv is None:
        return None
    both_strings = lk == "string" and rk == "string"  # Java: "Compare String is illegal"
    c = dcmp(to_double(lv), to_double(rv)) if both_strings else java_compare(lv, lk, rv, rk)  # type: ignore[arg-type]
    if op == ">":
        return c > 0
    if op == ">=":
        return c >= 0
    if op == "<":
        return c < 0
    return c <= 0
