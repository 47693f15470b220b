"""Reading JSON written by Java's fastjson, which may carry unquoted integer map keys.

fastjson writes ``Map<Integer|Long, V>`` as ``{0:"a",1:"b"}`` (route ``brokerAddrs``,
``consumerOffset.json``, ``delayOffset.json``).  We always *write* standard JSON; when
*reading* bodies or files that may come from Java, ``loads`` first tries orjson and only on
failure quotes bare numeric keys outside of strings and tries again.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_BARE_KEY = re.compile(rb'([{,]\s*)(-?\d+)(\s*:)')


def _quote_bare_keys(data: bytes) -> bytes:
    # Split into string literals and the rest, so digits inside strings are left alone.
    out: list[bytes] = []
    pos = 0
    for match in re.finditer(rb'"(?:[^"\\]|\\.)*"', data):
        out.append(_BARE_KEY.sub(rb'\1"\2"\3', data[pos : match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_BARE_KEY.sub(rb'\1"\2"\3', data[pos:]))
    return b"".join(out)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON, or fastjson's variant with unquoted numeric keys.

    Raises ``ValueError`` (orjson.JSONDecodeError) when neither form parses.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        return orjson.loads(_quote_bare_keys(raw))


class KeyedPairs(list[tuple[Any, Any]]):
    """A JSON map whose keys are not all strings, as ``(key, value)`` pairs in text order.

    fastjson writes ``Map<MessageQueue, V>`` (TopicStatsTable, ConsumeStats, ResetOffsetBody)
    with the key *object* as the key: ``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``.
    """


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_MAX_DEPTH = 64


def loads_keyed(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON as fastjson writes it, object-valued map keys included.

    Maps with string keys come back as dicts; a map with any other key (an object, a bare
    number) as ``KeyedPairs``.  Raises ``ValueError`` on anything else (depth bounded).
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    value, pos = _value(text, _WS.match(text, 0).end(), 0)  # type: ignore[union-attr]
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if pos != len(text):
        raise ValueError(f"extra data at {pos}")
    return value


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deep")
    if pos >= len(text):
        raise ValueError("unexpected end of data")
    ch = text[pos]
    if ch == '"':
        return json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined,no-any-return]
    if ch == "{":
        return _map(text, pos + 1, depth + 1)
    if ch == "[":
        items: list[Any] = []
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            return items, pos + 1
        while True:
            item, pos = _value(text, pos, depth + 1)
            items.append(item)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if text.startswith("]", pos):
                return items, pos + 1
            if not text.startswith(",", pos):
                raise ValueError(f"expected , or ] at {pos}")
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    for word, literal in _LITERALS.items():
        if text.startswith(word, pos):
            return literal, pos + len(word)
    match = _NUMBER.match(text, pos)
    if match is None:
        raise ValueError(f"unexpected {ch!r} at {pos}")
    number = match.group(0)
    return (float(number) if any(c in number for c in ".eE") else int(number)), match.end()


def _map(text: str, pos: int, depth: int) -> tuple[Any, int]:
    pairs: list[tuple[Any, Any]] = []
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        return {}, pos + 1
    while True:
        key, pos = _value(text, pos, depth)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise ValueError(f"expected : at {pos}")
        value, pos = _value(text, _WS.match(text, pos + 1).end(), depth)  # type: ignore[union-attr]
        pairs.append((key, value))
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            pos += 1
            break
        if not text.startswith(",", pos):
            raise ValueError(f"expected , or }} at {pos}")
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if all(isinstance(k, str) for k, _ in pairs):
        return dict(pairs), pos
    return KeyedPairs(pairs), pos


def dumps_keyed(pairs: list[tuple[Any, Any]]) -> bytes:
    """A map with object keys as fastjson writes it (each key and value standard JSON)."""
    return b"{" + b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in pairs) + b"}"
