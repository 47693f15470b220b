"""Tokens of RocketMQ's SQL92 filter language, as its JavaCC grammar defines them.

Source: ``filter/src/main/java/org/apache/rocketmq/filter/parser/SelectorParser.jj`` (and the
generated ``SelectorParserTokenManager``).  The rules that surprise people, kept on purpose:

* JavaCC takes the *longest* match, so ``007`` is three tokens (``0``, ``0``, ``7``), ``0x1F``
  is ``0`` followed by the identifier ``x1F`` and ``5L`` is one integer: there are no hex or
  octal literals, and the ``L`` suffix is accepted only after a non-zero first digit.
* Floats: ``5.``, ``.5``, ``5.5E10``, ``5E10`` (exponent letter in either case).
* Strings are single-quoted, ``''`` is a quote, and they may span lines; no other escapes.
* Identifiers are ASCII ``[A-Za-z_$][A-Za-z0-9_$]*`` and case-sensitive; keywords are
  case-insensitive and win over identifiers of the same length (``and`` is a keyword,
  ``andy`` a property).  So ``a.b`` or ``my-prop`` cannot be referenced.
* Blanks are space, tab, CR, LF and FF only.  Comments: ``/* ... */`` and ``-- ...`` *up to a
  line break*; a ``--`` with no line break after it is two minus signs.
* Operators: ``= <> > >= < <= ( ) , + -``.  There is no ``!=`` and no ``==``.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from apogee.filter.errors import FilterExpressionError

# Token kinds.  Keywords use their upper-case spelling as kind.
EOF: Final = "EOF"
ID: Final = "ID"
STRING: Final = "STRING"
DECIMAL: Final = "DECIMAL"
FLOAT: Final = "FLOAT"
OP: Final = "OP"

KEYWORDS: Final = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)


class Token(NamedTuple):
    kind: str
    text: str  # the source text (for keywords as written, for strings with the quotes)
    pos: int  # 0-based offset of the first character

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == EOF:
            return "end of expression"
        if self.kind in KEYWORDS:
            return f"keyword {self.kind}"
        if self.kind == ID:
            return f"property {self.text}"
        if len(self.text) > 40:
            return f"{self.text[:37]}..."
        return f"'{self.text}'" if self.kind == OP else self.text


_BLANK = re.compile(r"[ \t\n\r\f]+")
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_STRING = re.compile(r"'(?:''|[^'])*'")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?"
    r"|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+"
)
_OPERATORS: Final = ("<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-")
_DIGITS: Final = frozenset("0123456789.")


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``EOF`` token; FilterExpressionError if a
    character cannot start any token (the position is that character's)."""
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while pos < end:
        ch = text[pos]
        if ch in " \t\n\r\f":
            pos = _BLANK.match(text, pos).end()  # type: ignore[union-attr]
            continue
        if ch == "-" and text.startswith("--", pos):
            m = _LINE_COMMENT.match(text, pos)
            if m:
                pos = m.end()
                continue
        if ch == "/":
            m = _BLOCK_COMMENT.match(text, pos)
            if m is None:
                raise FilterExpressionError("unterminated or stray '/'", text, pos)
            pos = m.end()
            continue
        if ch == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise FilterExpressionError("unterminated string literal", text, pos)
            tokens.append(Token(STRING, m.group(), pos))
            pos = m.end()
            continue
        if ch in _DIGITS:
            f = _FLOAT.match(text, pos)
            d = _DECIMAL.match(text, pos)
            f_end = f.end() if f else pos
            d_end = d.end() if d else pos
            if f_end == pos and d_end == pos:
                raise FilterExpressionError("a '.' must be followed by digits", text, pos)
            if f_end > d_end:
                tokens.append(Token(FLOAT, text[pos:f_end], pos))
                pos = f_end
            else:
                tokens.append(Token(DECIMAL, text[pos:d_end], pos))
                pos = d_end
            continue
        m = _WORD.match(text, pos)
        if m:
            word = m.group()
            upper = word.upper()
            tokens.append(Token(upper if upper in KEYWORDS else ID, word, pos))
            pos = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, pos):
                tokens.append(Token(OP, op, pos))
                pos += len(op)
                break
        else:
            hint = " (use <> for 'not equal')" if text.startswith("!=", pos) else ""
            raise FilterExpressionError(f"unexpected character {ch!r}{hint}", text, pos)
    tokens.append(Token(EOF, "", end))
    return tokens


def string_value(token_text: str) -> str:
    """The value of a string literal token: quotes removed, ``''`` turned into ``'``."""
    return token_text[1:-1].replace("''", "'")
