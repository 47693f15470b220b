"""The one error a filter expression can raise: it does not parse or is not allowed.

Subscriptions arrive from the network, so the message must let a user fix the expression
without reading our source: what was expected, where (a 1-based column, and a line when the
expression spans several), and the expression itself (an excerpt when it is long).  It also
derives from ``ValueError`` so generic validation code catches it.
"""

from __future__ import annotations

import json

from apogee.errors import ApogeeError

_EXCERPT = 60  # characters shown either side of the error in a long expression


class FilterExpressionError(ApogeeError, ValueError):
    """A subscription expression (TAG or SQL92) that is malformed, unsupported or too large.

    ``reason`` is the bare complaint, ``position`` the 0-based offset in ``expression`` (or
    ``None`` when the error has no place), ``column``/``line`` the 1-based place shown.
    """

    def __init__(
        self,
        reason: str,
        expression: str | None = None,
        position: int | None = None,
        found: str | None = None,
    ) -> None:
        self.reason = reason
        self.expression = expression
        self.position = position
        self.found = found
        self.line: int | None = None
        self.column: int | None = None
        if expression is not None and position is not None:
            position = max(0, min(position, len(expression)))
            self.line = expression.count("\n", 0, position) + 1
            self.column = position - (expression.rfind("\n", 0, position) + 1) + 1
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.reason
        if self.column is not None:
            place = f"column {self.column}" if self.line == 1 else f"line {self.line}, column {self.column}"
            text += f" at {place}"
        if self.expression is not None:
            text += f" in {_quote(self.expression, self.position)}"
        if self.found is not None:
            text += f"; found {self.found}"
        return text


def _quote(expression: str, position: int | None) -> str:
    """The expression as a JSON string (control characters escaped), cut around ``position``."""
    if len(expression) <= 2 * _EXCERPT + 20:
        return json.dumps(expression, ensure_ascii=False)
    centre = position if position is not None else 0
    start = max(0, centre - _EXCERPT)
    end = min(len(expression), centre + _EXCERPT)
    head = "…" if start else ""
    tail = "…" if end < len(expression) else ""
    return f"{head}{json.dumps(expression[start:end], ensure_ascii=False)}{tail} ({len(expression)} characters)"
