"""Lenient parsing of header values, as the real clients write them.

The C++ client sends booleans as "0"/"1" and numbers as JSON numbers or strings; Java sends
"true"/"false" strings; Node sends JSON booleans.  Every parser here accepts all of them and
raises ``HeaderError`` (which a server turns into an error response) for anything else.
"""

from __future__ import annotations

from apogee.errors import HeaderError

_TRUE = frozenset(("true", "1", "True", "TRUE"))
_FALSE = frozenset(("false", "0", "False", "FALSE", ""))


def parse_int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise HeaderError(f"the custom field <{key}> is not an integer: {raw!r}") from None


def parse_text(raw: object) -> str:
    """A string field sent as a JSON number or boolean reads as Java's String.valueOf would."""
    if raw.__class__ is str:
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


def parse_bool(key: str, raw: str) -> bool:
    if not isinstance(raw, str):
        if isinstance(raw, bool) or raw in (0, 1):  # a JSON boolean (Node) or 0/1 number (C++)
            return bool(raw)
        raise HeaderError(f"the custom field <{key}> is not a boolean: {raw!r}")
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise HeaderError(f"the custom field <{key}> is not a boolean: {raw!r}")
