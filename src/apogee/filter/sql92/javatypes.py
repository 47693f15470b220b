"""Java's value semantics, as RocketMQ's ComparisonExpression uses them.

Property values are always strings on the broker (``MessageEvaluationContext`` wraps the
``Map<String, String>`` of the stored properties), so every numeric test converts a string with
``Integer.valueOf``, ``Long.valueOf`` or ``Double.valueOf``, whichever matches the class of the
*other* operand (``ComparisonExpression.__compare`` with ``convertStringExpressions`` on, as
``SelectorParser.parse`` always sets it).  A string that does not convert raises a
RuntimeException in Java; the broker's ``ExpressionMessageFilter`` catches it and the message
does *not* match, whatever the rest of the expression says.  ``EvalError`` plays that part here.

Consequences users hit, reproduced on purpose:

* ``a > 5`` with ``a = '5.5'`` or ``a = '3000000000'`` fails (Integer.valueOf), so no match;
  ``a > 5.0`` accepts both (Double.valueOf).
* ``a = 5`` with ``a = 'abc'`` fails too: no match, and ``a <> 5`` does not match either.
* Doubles compare with ``Double.compareTo``: NaN equals NaN and is above +Infinity, and
  -0.0 is below 0.0.
"""

from __future__ import annotations

import math
import re
from typing import Final

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
DOUBLE_MIN_VALUE: Final = 5e-324  # Java Double.MIN_VALUE, the smallest positive double


class EvalError(Exception):
    """A Java RuntimeException during evaluation: the message does not match."""


def to_int(s: str) -> int:
    """``Integer.valueOf(s)``: optional sign, decimal digits (any Unicode Nd digit, as Java's
    ``Character.digit``), no blanks, 32-bit range."""
    return _to_integer(s, INT_MIN, INT_MAX)


def to_long(s: str) -> int:
    """``Long.valueOf(s)``."""
    return _to_integer(s, LONG_MIN, LONG_MAX)


def _to_integer(s: str, lo: int, hi: int) -> int:
    if not s.isdecimal() and (len(s) < 2 or s[0] not in "+-" or not s[1:].isdecimal()):
        raise EvalError(f"not an integer: {s[:40]!r}")
    if len(s) > 24:  # int() refuses > 4300 digits; Java accepts any number of leading zeros
        sign = "-" if s[0] == "-" else ""
        digits = s.lstrip("+-").lstrip("0") or "0"
        if len(digits) > 24:
            raise EvalError(f"integer out of range: {s[:40]!r}")
        s = sign + digits
    n = int(s)
    if n < lo or n > hi:
        raise EvalError(f"integer out of range: {s[:40]!r}")
    return n


# Java FloatingDecimal.readJavaFormatString, after String.trim() (which drops chars <= ' ').
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity"
    r"|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)",
)
_TRIM: Final = "".join(chr(c) for c in range(33))


def to_double(s: str) -> float:
    """``Double.valueOf(s)``: Java's syntax (``NaN``, ``Infinity``, hex floats, an ``f``/``d``
    suffix, surrounding control characters and blanks ignored), not Python's."""
    if s.isascii():  # fast path: [+-]digits[.digits], which both languages read alike
        digits = s[1:] if s[:1] in ("+", "-") else s
        if digits.replace(".", "", 1).isdigit():
            return float(s)
    t = s.strip(_TRIM)
    m = _JAVA_DOUBLE.fullmatch(t)
    if m is None:
        raise EvalError(f"not a number: {s[:40]!r}")
    negative = t[0] == "-"
    if m.group("dec") is not None:
        value = float(m.group("dec"))
    elif m.group("hex") is not None:
        try:
            value = float.fromhex(m.group("hex"))
        except OverflowError:
            value = math.inf
    elif t.endswith("NaN"):
        return math.nan
    else:
        value = math.inf
    return -value if negative else value


def to_bool(s: str) -> bool:
    """``Boolean.valueOf(s)``: true only for "true" in any case."""
    return len(s) == 4 and s.lower() == "true"


def dcmp(x: float, y: float) -> int:
    """``Double.compare``: a total order with -0.0 < 0.0 and NaN above everything."""
    if x < y:
        return -1
    if x > y:
        return 1
    if x == y:
        if x != 0.0:
            return 0
        return (math.copysign(1.0, x) > 0) - (math.copysign(1.0, y) > 0)
    x_nan, y_nan = x != x, y != y
    return 0 if x_nan and y_nan else (1 if x_nan else -1)


def java_compare(lv: object, lk: str, rv: object, rk: str) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)`` for non-null values of Java kinds
    ``lk``/``rk`` (``int``, ``long``, ``double``, ``string``, ``bool``).

    Mismatched kinds are converted the way Java converts them; pairs Java cannot convert
    compare as "less" (-1), and Boolean-vs-String raises (a ClassCastException in Java).
    """
    if lk != rk:
        if lk == "bool":
            if rk == "string":
                raise EvalError("Boolean compared with String (ClassCastException in RocketMQ)")
            return -1
        if lk == "int" or lk == "long":
            if rk == "int" or rk == "long":
                pass
            elif rk == "double":
                return dcmp(float(lv), rv)  # type: ignore[arg-type]
            elif rk == "string":
                rv = to_int(rv) if lk == "int" else to_long(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lk == "double":
            if rk == "int" or rk == "long":
                return dcmp(lv, float(rv))  # type: ignore[arg-type]
            if rk == "string":
                return dcmp(lv, to_double(rv))  # type: ignore[arg-type]
            return -1
        elif lk == "string":
            if rk == "bool":
                lv = to_bool(lv)  # type: ignore[arg-type]
            elif rk == "int":
                lv = to_int(lv)  # type: ignore[arg-type]
            elif rk == "long":
                lv = to_long(lv)  # type: ignore[arg-type]
            elif rk == "double":
                return dcmp(to_double(lv), rv)  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    elif lk == "double":
        return dcmp(lv, rv)  # type: ignore[arg-type]
    return (lv > rv) - (lv < rv)  # type: ignore[operator,no-any-return]
