"""Recursive-descent parser for RocketMQ's SQL92 message selectors.

Design
------
A subscription is parsed once, checked the way RocketMQ checks it, and compiled once into a
closure (``compiler``) that runs per message on the pull path.  Semantics come from Apache
RocketMQ's ``filter`` module: the grammar ``parser/SelectorParser.jj``, the operand checks of
``ComparisonExpression`` (``checkEqualOperand``, ``checkLessThanOperand``, the BETWEEN bounds
check), ``ConstantExpression.createFromDecimal``/``createFloat`` and ``asBooleanExpression``.

Grammar (lowest precedence first)::

    or         := and ( OR and )*
    and        := not ( AND not )*
    not        := NOT not | equality
    equality   := comparison ( ('=' | '<>') comparison | IS [NOT] NULL )*
    comparison := unary ( ('>' | '>=' | '<' | '<=') unary
                        | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')' )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | property | '(' or ')'

The one place we differ from RocketMQ on purpose is the binding of a *leading* NOT.
RocketMQ (like ActiveMQ, whose grammar it copied) puts NOT in ``unary``, tighter than any
comparison, so ``NOT a = 'x'`` means ``(NOT a) = 'x'`` (never true), ``NOT a IS NULL`` means
``a IS NULL``, and ``NOT a > 5`` or ``NOT a IN ('x')`` do not parse at all.  We give a NOT that
starts a term the JMS/SQL precedence (``OR < AND < NOT < comparison``): ``NOT a = 'x'`` is
``NOT (a = 'x')``.  Every other expression RocketMQ accepts parses to the same tree; a NOT in
operand position (``a = NOT b``) keeps RocketMQ's meaning.  Also ours: input longer than 4096
characters, or nested deeper than 64 levels, is refused (subscriptions come from the network).

Not supported because RocketMQ does not support them: ``!=``, ``LIKE``, arithmetic other
than unary minus, hex/octal literals, IN lists of numbers, property names outside
``[A-Za-z_$][A-Za-z0-9_$]*``.
"""

from __future__ import annotations

from typing import Final

from apogee.filter.errors import FilterExpressionError
from apogee.filter.sql92 import ast
from apogee.filter.sql92.javatypes import DOUBLE_MIN_VALUE, INT_MAX, LONG_MAX, EvalError, java_compare
from apogee.filter.sql92.lexer import DECIMAL, EOF, FLOAT, ID, OP, STRING, Token, string_value, tokenize

MAX_EXPRESSION_LENGTH: Final = 4096
MAX_DEPTH: Final = 64

_RELATIONAL: Final = frozenset({">", ">=", "<", "<="})
_MATCH: Final = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_AFTER_NOT: Final = _MATCH | {"BETWEEN", "IN"}
_TRUE: Final = ast.Literal(True, "bool")
_FALSE: Final = ast.Literal(False, "bool")
_NULL: Final = ast.Literal(None, "null")


def parse(expression: str) -> ast.Node:
    """Parse and check a SQL92 selector; FilterExpressionError says what and where."""
    if not isinstance(expression, str):
        raise FilterExpressionError(f"a SQL92 expression must be a string, not {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise FilterExpressionError(
            f"expression is {len(expression)} characters long, more than the {MAX_EXPRESSION_LENGTH} accepted"
        )
    node = _Parser(expression).parse()
    if ast.depth(node) > MAX_DEPTH:
        raise FilterExpressionError(f"expression nested deeper than {MAX_DEPTH} levels", expression)
    return node


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.nesting = 0

    # --- token helpers -------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def is_op(self, *ops: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == OP and tok.text in ops

    def fail(self, reason: str, tok: Token | None = None) -> FilterExpressionError:
        tok = tok or self.tok
        return FilterExpressionError(reason, self.text, tok.pos, tok.describe())

    def error_at(self, reason: str, pos: int) -> FilterExpressionError:
        return FilterExpressionError(reason, self.text, pos)

    def expect_op(self, op: str) -> Token:
        if not self.is_op(op):
            raise self.fail(f"expected '{op}'")
        return self.advance()

    def expect_string(self, where: str) -> str:
        if self.tok.kind != STRING:
            raise self.fail(f"expected a string literal {where}")
        return string_value(self.advance().text)

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.error_at(f"expression nested deeper than {MAX_DEPTH} levels", pos)

    # --- grammar -------------------------------------------------------------------------------

    def parse(self) -> ast.Node:
        start = self.tok.pos
        node = self.or_()
        if self.tok.kind != EOF:
            raise self.fail("expected AND, OR or the end of the expression")
        return self.as_boolean(node, start)

    def or_(self) -> ast.Node:
        start = self.tok.pos
        first = self.and_()
        if self.tok.kind != "OR":
            return first
        operands: list[ast.Node] = []
        _push(ast.Or, operands, self.as_boolean(first, start))
        while self.tok.kind == "OR":
            self.advance()
            start = self.tok.pos
            _push(ast.Or, operands, self.as_boolean(self.and_(), start))
        return ast.Or(tuple(operands))

    def and_(self) -> ast.Node:
        start = self.tok.pos
        first = self.not_()
        if self.tok.kind != "AND":
            return first
        operands: list[ast.Node] = []
        _push(ast.And, operands, self.as_boolean(first, start))
        while self.tok.kind == "AND":
            self.advance()
            start = self.tok.pos
            _push(ast.And, operands, self.as_boolean(self.not_(), start))
        return ast.And(tuple(operands))

    def not_(self) -> ast.Node:
        if self.tok.kind != "NOT":
            return self.equality()
        self.enter(self.advance().pos)
        start = self.tok.pos
        node = ast.Not(self.as_boolean(self.not_(), start))
        self.nesting -= 1
        return node

    def equality(self) -> ast.Node:
        left = self.comparison()
        while True:
            tok = self.tok
            if tok.kind == OP and tok.text in ("=", "<>"):
                self.advance()
                right = self.comparison()
                left = self.make_equal(tok, left, right)
            elif tok.kind == "IS":
                self.advance()
                negated = self.tok.kind == "NOT"
                if negated:
                    self.advance()
                if self.tok.kind != "NULL":
                    raise self.fail("expected NULL or NOT NULL after IS")
                self.advance()
                left = ast.IsNull(left, negated)
            else:
                return left

    def comparison(self) -> ast.Node:
        left = self.unary()
        while True:
            tok = self.tok
            negated = tok.kind == "NOT" and self.tokens[self.i + 1].kind in _AFTER_NOT
            if negated:
                self.advance()
                tok = self.tok
            if tok.kind == OP and tok.text in _RELATIONAL:
                self.advance()
                left = self.make_relational(tok, left, self.unary())
            elif tok.kind in _MATCH:
                self.advance()
                search = self.expect_string(f"after {tok.kind}")
                left = ast.Match(tok.kind, left, search, negated)  # type: ignore[arg-type]
            elif tok.kind == "BETWEEN":
                self.advance()
                low = self.unary()
                if self.tok.kind != "AND":
                    raise self.fail("expected AND between the bounds of BETWEEN")
                self.advance()
                left = self.make_between(tok, left, low, self.unary(), negated)
            elif tok.kind == "IN":
                self.advance()
                self.expect_op("(")
                values = [self.expect_string("in the IN list")]
                while self.is_op(","):
                    self.advance()
                    values.append(self.expect_string("in the IN list"))
                if not self.is_op(")"):
                    raise self.fail("expected ',' or ')' in the IN list")
                self.advance()
                if not isinstance(left, ast.Property):
                    raise self.error_at("IN needs a property on its left", tok.pos)
                left = ast.In(left, frozenset(values), negated)
            else:
                return left

    def unary(self) -> ast.Node:
        tok = self.tok
        if tok.kind == OP and tok.text in ("+", "-"):
            self.advance()
            self.enter(tok.pos)
            operand = self.unary()
            self.nesting -= 1
            return operand if tok.text == "+" else ast.Negate(operand)
        if tok.kind == "NOT":  # RocketMQ's operand NOT, e.g. ``a = NOT b``
            self.advance()
            self.enter(tok.pos)
            start = self.tok.pos
            node = ast.Not(self.as_boolean(self.unary(), start))
            self.nesting -= 1
            return node
        return self.primary()

    def primary(self) -> ast.Node:
        tok = self.tok
        kind = tok.kind
        if kind == ID:
            self.advance()
            return ast.Property(tok.text)
        if kind == STRING:
            self.advance()
            return ast.Literal(string_value(tok.text), "string")
        if kind == DECIMAL:
            self.advance()
            return self.decimal(tok)
        if kind == FLOAT:
            self.advance()
            return self.floating(tok)
        if kind == "TRUE" or kind == "FALSE" or kind == "NULL":
            self.advance()
            return _TRUE if kind == "TRUE" else _FALSE if kind == "FALSE" else _NULL
        if kind == OP and tok.text == "(":
            self.advance()
            self.enter(tok.pos)
            node = self.or_()
            if not self.is_op(")"):
                raise self.fail("expected ')'")
            self.advance()
            self.nesting -= 1
            return node
        raise self.fail("expected a value, a property or '('")

    # --- literals (ConstantExpression) -----------------------------------------------------------

    def decimal(self, tok: Token) -> ast.Literal:
        value = int(tok.text.rstrip("lL"))
        if value > LONG_MAX:
            raise self.error_at(f"integer {tok.text} is larger than {LONG_MAX}", tok.pos)
        return ast.Literal(value, "int" if value <= INT_MAX else "long")

    def floating(self, tok: Token) -> ast.Literal:
        value = float(tok.text)
        if value == float("inf"):
            raise self.error_at(f"number {tok.text} is larger than 1.7976931348623157E308", tok.pos)
        if value < DOUBLE_MIN_VALUE:  # RocketMQ's createFloat check, which rejects 0.0 too
            raise self.error_at(
                f"number {tok.text} is less than 4.9E-324 (RocketMQ rejects a zero float literal; write 0)",
                tok.pos,
            )
        return ast.Literal(value, "double")

    # --- RocketMQ's construction-time checks ---------------------------------------------------

    def as_boolean(self, node: ast.Node, pos: int) -> ast.Node:
        """``SelectorParser.asBooleanExpression``: properties are cast, values refused."""
        if ast.is_boolean(node):
            return node
        if isinstance(node, ast.Property):
            return ast.BoolCast(node)
        raise self.error_at(f"{ast.to_sql(node)} is not a condition (it will not result in a boolean)", pos)

    def make_equal(self, tok: Token, left: ast.Node, right: ast.Node) -> ast.Node:
        """``ComparisonExpression.createEqual`` / ``createNotEqual`` checks."""
        for operand in (left, right):
            if isinstance(operand, ast.Literal) and operand.kind == "null":
                raise self.error_at(f"NULL cannot be compared with {tok.text}; use IS NULL or IS NOT NULL", tok.pos)
        if isinstance(left, ast.Literal) and isinstance(right, ast.Literal) and left.kind == "bool" != right.kind:
            raise self.error_at(f"{ast.to_sql(left)} cannot be compared with {ast.to_sql(right)}", tok.pos)
        return ast.Compare(tok.text, left, right)  # type: ignore[arg-type]

    def make_relational(self, tok: Token, left: ast.Node, right: ast.Node) -> ast.Node:
        """``checkLessThanOperand``: only numbers, properties and NULL-able values compare."""
        for operand in (left, right):
            if isinstance(operand, ast.Literal):
                if operand.kind not in ("int", "long", "double"):
                    raise self.error_at(
                        f"{ast.to_sql(operand)} cannot be compared with {tok.text}; only numbers can", tok.pos
                    )
            elif ast.is_boolean(operand):
                raise self.error_at(f"a condition cannot be compared with {tok.text}", tok.pos)
        return ast.Compare(tok.text, left, right)  # type: ignore[arg-type]

    def make_between(
        self, tok: Token, value: ast.Node, low: ast.Node, high: ast.Node, negated: bool
    ) -> ast.Node:
        """``createBetween`` (bounds checked when both are literals) / ``createNotBetween``."""
        ops = ("<", ">") if negated else (">=", "<=")
        if not negated and isinstance(low, ast.Literal) and isinstance(high, ast.Literal):
            if low.value is None or high.value is None:
                raise self.error_at("the bounds of BETWEEN cannot be NULL", tok.pos)
            try:
                order = java_compare(high.value, high.kind, low.value, low.kind)
            except EvalError:
                order = 0  # a string bound: the operand check below names it
            if order < 0:
                raise self.error_at(
                    f"illegal BETWEEN: the lower bound {ast.to_sql(low)} must not exceed the upper bound "
                    f"{ast.to_sql(high)}",
                    tok.pos,
                )
        first = self.make_relational(Token(OP, ops[0], tok.pos), value, low)
        second = self.make_relational(Token(OP, ops[1], tok.pos), value, high)
        return ast.Or((first, second)) if negated else ast.And((first, second))


def _push(cls: type[ast.And] | type[ast.Or], operands: list[ast.Node], node: ast.Node) -> None:
    """Append to an n-ary AND/OR, splicing a nested one of the same kind (both associate)."""
    if isinstance(node, cls):
        operands.extend(node.operands)
    else:
        operands.append(node)
