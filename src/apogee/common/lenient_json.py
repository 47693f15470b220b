"""Reading JSON written by Java's fastjson, which may carry unquoted integer map keys.

fastjson writes ``Map<Integer|Long, V>`` as ``{0:"a",1:"b"}`` (route ``brokerAddrs``,
``consumerOffset.json``, ``delayOffset.json``).  We always *write* standard JSON; when
*reading* bodies or files that may come from Java, ``loads`` first tries orjson and only on
failure quotes bare numeric keys outside of strings and tries again.
"""

from __future__ import annotations

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
