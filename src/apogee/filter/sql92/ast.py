"""Syntax tree of a SQL92 filter expression.

The node set follows RocketMQ's expression classes, after the desugaring its parser does
(``BETWEEN`` is ``>= AND <=``, ``NOT BETWEEN`` is ``< OR >``, ``IS NOT NULL`` is ``NOT (IS NULL)``
in effect), with two changes that matter for us: AND/OR chains are n-ary (RocketMQ nests them
left-deep; the result and the evaluation order are the same, and a long chain does not become a
deep Python call stack), and a property used as a boolean is an explicit ``BoolCast``.

``kind`` of a ``Literal`` is the Java class RocketMQ gives the constant: ``int`` (Integer), ``long``
(Long), ``double`` (Double), ``string``, ``bool`` (Boolean) or ``null``.  The Integer/Long
distinction is not cosmetic: a property compared with an Integer constant is parsed with
``Integer.valueOf`` and fails past 2**31 (see ``javatypes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal as TLiteral
from typing import TypeAlias

LiteralKind: TypeAlias = TLiteral["int", "long", "double", "string", "bool", "null"]
CompareOp: TypeAlias = TLiteral["=", "<>", ">", ">=", "<", "<="]
MatchOp: TypeAlias = TLiteral["CONTAINS", "STARTSWITH", "ENDSWITH"]


@dataclass(frozen=True, slots=True)
class Literal:
    value: object  # int, float, str, bool or None
    kind: LiteralKind


@dataclass(frozen=True, slots=True)
class Property:
    name: str


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus.  On anything but a number it yields NULL (RocketMQ ``createNegate``)."""

    operand: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A property used as a boolean: NULL if absent, else FALSE (values are strings, never
    ``java.lang.Boolean``; RocketMQ ``createBooleanCast``)."""

    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    prop: Property
    values: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class Match:
    """``[NOT] CONTAINS|STARTSWITH|ENDSWITH 'text'`` (RocketMQ 5.x)."""

    op: MatchOp
    operand: Node
    search: str
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    negated: bool


Node: TypeAlias = Literal | Property | Negate | Not | BoolCast | And | Or | Compare | In | Match | IsNull

BOOLEAN_NODES: tuple[type, ...] = (Not, BoolCast, And, Or, Compare, In, Match, IsNull)


def is_boolean(node: Node) -> bool:
    """Whether RocketMQ would see a ``BooleanExpression`` here (TRUE, FALSE and NULL are)."""
    if isinstance(node, Literal):
        return node.kind in ("bool", "null")
    return isinstance(node, BOOLEAN_NODES)


def children(node: Node) -> Iterator[Node]:
    if isinstance(node, (Negate, Not, BoolCast, Match, IsNull)):
        yield node.operand
    elif isinstance(node, (And, Or)):
        yield from node.operands
    elif isinstance(node, Compare):
        yield node.left
        yield node.right
    elif isinstance(node, In):
        yield node.prop


def depth(node: Node) -> int:
    """Height of the tree (a lone literal is 1), computed without recursion."""
    best = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in children(n))
    return best


def property_names(node: Node) -> frozenset[str]:
    """Every property the expression reads."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Property):
            names.add(n.name)
        stack.extend(children(n))
    return frozenset(names)


def to_sql(node: Node) -> str:
    """Canonical text (fully parenthesised); parsing it gives back an equal tree."""
    if isinstance(node, Literal):
        if node.kind == "string":
            return "'" + str(node.value).replace("'", "''") + "'"
        if node.kind == "bool":
            return "TRUE" if node.value else "FALSE"
        if node.kind == "null":
            return "NULL"
        if node.kind == "double":
            return repr(node.value)
        return str(node.value)
    if isinstance(node, Property):
        return node.name
    if isinstance(node, Negate):
        return f"-({to_sql(node.operand)})"
    if isinstance(node, Not):
        return f"(NOT ({to_sql(node.operand)}))"
    if isinstance(node, BoolCast):
        return to_sql(node.operand)
    if isinstance(node, And):
        return "(" + " AND ".join(to_sql(o) for o in node.operands) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(to_sql(o) for o in node.operands) + ")"
    if isinstance(node, Compare):
        return f"({to_sql(node.left)} {node.op} {to_sql(node.right)})"
    if isinstance(node, In):
        values = ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(node.values))
        return f"({node.prop.name} {'NOT ' if node.negated else ''}IN ({values}))"
    if isinstance(node, Match):
        search = "'" + node.search.replace("'", "''") + "'"
        return f"({to_sql(node.operand)} {'NOT ' if node.negated else ''}{node.op} {search})"
    return f"({to_sql(node.operand)} IS {'NOT ' if node.negated else ''}NULL)"
