"""Store filters for pull requests: TAG (hash codes) and SQL92 (properties of the record).

RocketMQ's ``ExpressionMessageFilter`` in two steps, as the store calls them:

* ``is_matched_by_consume_queue(tags_code)``: for SQL92 always True (RocketMQ may consult a
  bloom filter in the ConsumeQueue extension here; Apogee has none, so it is a pure
  optimisation we skip).
* ``is_matched_by_commit_log(record)``: reads the stored record's properties and evaluates
  the compiled expression; a Java exception during evaluation means "no match".  ``TAGS`` is
  an ordinary property of the record, so ``TAGS = 'TagA'`` needs nothing special.

Only the properties the expression names are extracted from the record (the body is never
touched), with the same rules as ``MessageDecoder.string2messageProperties``: items
``name\\x01value`` separated by ``\\x02``, empty values dropped, the last duplicate winning.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Final

from apogee.common import constants as c
from apogee.common.pull_filter import MessageFilter
from apogee.filter.errors import FilterExpressionError
from apogee.filter.sql92.compiler import CompiledSql92, compile_sql92
from apogee.filter.tag import parse_tag_expression

TAG: Final = "TAG"
SQL92: Final = "SQL92"

_MAGIC_V2: Final = -626843477  # 0xDAA320AB, RocketMQ 5.x: 2-byte topic length
_HEAD = struct.Struct(">i28xi44xi")  # MAGICCODE at 4, SYSFLAG at 36, BODYLENGTH at 84 (IPv4)
_MAGIC_SYSFLAG = struct.Struct(">i28xi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_V6_BORN: Final = c.BORNHOST_V6_FLAG
_V6_STORE: Final = c.STOREHOSTADDRESS_V6_FLAG
_TOO_SHORT: Final = "stored record too short to hold its properties"


def record_properties_text(record: bytes | bytearray | memoryview) -> str:
    """The properties string of a stored record (docs/protocol.md, Stored record), without touching the body.

    Follows ``MessageDecoder.decodeProperties``: host lengths from SYSFLAG, a 1-byte topic
    length (2 bytes for the 5.x V2 magic), a signed 2-byte properties length where zero or
    negative means none, UTF-8 with malformed bytes replaced.  ValueError if the record is
    too short for the lengths it claims.
    """
    try:
        magic, sysflag, body_len = _HEAD.unpack_from(record, 4)
        if sysflag & (_V6_BORN | _V6_STORE) or magic == _MAGIC_V2:
            return _record_properties_general(record)
        p = 88 + body_len
        p += 1 + record[p]
        (length,) = _I16.unpack_from(record, p)
    except (struct.error, IndexError):
        raise ValueError(_TOO_SHORT) from None
    if length <= 0:
        return ""
    p += 2
    if p + length > len(record):
        raise ValueError(_TOO_SHORT)
    return str(record[p : p + length], "utf-8", "replace")


def _record_properties_general(record: bytes | bytearray | memoryview) -> str:
    magic, sysflag = _MAGIC_SYSFLAG.unpack_from(record, 4)
    p = 48 + (20 if sysflag & _V6_BORN else 8) + 8 + (20 if sysflag & _V6_STORE else 8) + 12
    p += 4 + _I32.unpack_from(record, p)[0]
    p += (2 + _I16.unpack_from(record, p)[0]) if magic == _MAGIC_V2 else (1 + record[p])
    (length,) = _I16.unpack_from(record, p)
    if length <= 0:
        return ""
    p += 2
    if p + length > len(record):
        raise ValueError(_TOO_SHORT)
    return str(record[p : p + length], "utf-8", "replace")


def _extractor(names: frozenset[str]) -> Callable[[str], dict[str, str]]:
    """A function pulling just ``names`` out of a properties string.

    Cheaper than decoding every property when an expression reads a few of them (a producer
    adds UNIQ_KEY, WAIT, KEYS... to every message); same result as ``string2messageProperties``.
    """
    probes = tuple((name, "\x02" + name + "\x01", len(name) + 2, name + "\x01") for name in sorted(names))

    def extract(text: str) -> dict[str, str]:
        out: dict[str, str] = {}
        if not text:
            return out
        for name, inner, skip, first in probes:
            idx = text.rfind(inner)
            if idx >= 0:
                start = idx + skip
                end = text.find("\x02", start)
                if end < 0:
                    end = len(text)
                if end > start:
                    out[name] = text[start:end]
                    continue
                value = _earlier_value(text, idx, inner, skip, first)
            elif text.startswith(first):
                end = text.find("\x02")
                value = text[skip - 1 : end] if end >= 0 else text[skip - 1 :]
            else:
                continue
            if value:
                out[name] = value
        return out

    return extract


def _earlier_value(text: str, idx: int, inner: str, skip: int, first: str) -> str:
    """The last non-empty value of a name whose last item (at ``idx``) is empty (Java drops
    empty values, so an earlier one stays in the map)."""
    idx = text.rfind(inner, 0, idx)
    while idx >= 0:
        end = text.find("\x02", idx + skip)
        value = text[idx + skip : end] if end >= 0 else text[idx + skip :]
        if value:
            return value
        idx = text.rfind(inner, 0, idx)
    if text.startswith(first):
        end = text.find("\x02")
        return text[skip - 1 : end] if end >= 0 else text[skip - 1 :]
    return ""


class SqlMessageFilter:
    """The SQL92 ``MessageFilter``: every ConsumeQueue entry passes, the record decides."""

    __slots__ = ("compiled", "_matches", "_extract")

    def __init__(self, expression: str | CompiledSql92) -> None:
        self.compiled = expression if isinstance(expression, CompiledSql92) else compile_sql92(expression)
        self._matches = self.compiled.matches
        self._extract = _extractor(self.compiled.properties)

    @property
    def expression(self) -> str:
        return self.compiled.expression

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        try:
            text = record_properties_text(record)
        except ValueError:
            return False  # not a message record; nothing to deliver
        return self._matches(self._extract(text))

    def matches_properties(self, properties: Mapping[str, str]) -> bool:
        """The same decision from already decoded properties."""
        return self._matches(properties)

    def __repr__(self) -> str:
        return f"SqlMessageFilter({self.compiled.expression!r})"


def compile_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The store filter of a subscription, as the broker builds it for a pull.

    ``TAG`` (also ``None`` or empty, RocketMQ's ``ExpressionType.isTagType``) gives a
    ``TagCodeFilter``; ``SQL92`` a ``SqlMessageFilter``.  Type names are case-sensitive as in
    RocketMQ.  FilterExpressionError for another type, or a missing or invalid SQL92 text.
    """
    if not expression_type or expression_type == TAG:
        return parse_tag_expression(expression).to_filter()
    if expression_type == SQL92:
        if not expression:
            raise FilterExpressionError("a SQL92 subscription needs an expression")
        return SqlMessageFilter(expression)
    raise FilterExpressionError(f"unsupported expression type {expression_type!r}; expected 'TAG' or 'SQL92'")
