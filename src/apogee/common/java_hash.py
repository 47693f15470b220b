"""Java's ``String.hashCode``, bit for bit, because RocketMQ stores it.

The tag hash in every ConsumeQueue entry (docs/protocol.md, Tag hash) and the key hash of every IndexFile
entry (docs/protocol.md, IndexFile) are ``String.hashCode`` values: ``h = 31*h + c`` over the UTF-16 code units of the
string, wrapping at 32 bits.  A Java broker, a C++ client and Apogee must agree on them, or tag
filtering and key queries silently miss.

Speed: the obvious loop costs ~60 ns per character in CPython.  We evaluate the same polynomial
as ``sum(c_i * 31**(n-1-i)) mod 2**32`` with precomputed powers, which keeps the per-character
work inside ``map``/``sum`` (about 30 % faster); keys are hashed for every indexed message.
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Callable

from apogee.common.accel import native

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000
_MAX_CACHED_LEN = 256

_POW: list[int] = [1]
for _ in range(1, _MAX_CACHED_LEN):
    _POW.append((_POW[-1] * 31) & _MASK)
_POWS_BY_LEN: dict[int, tuple[int, ...]] = {}
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def _powers(n: int) -> tuple[int, ...]:
    pows = _POWS_BY_LEN.get(n)
    if pows is None:
        if n <= _MAX_CACHED_LEN:
            pows = tuple(_POW[n - 1 :: -1]) if n else ()
            _POWS_BY_LEN[n] = pows
        else:
            p, acc = 1, []
            for _ in range(n):
                acc.append(p)
                p = (p * 31) & _MASK
            pows = tuple(reversed(acc))
    return pows


def _units(s: str) -> bytes | array[int]:
    if s.isascii():
        return s.encode("ascii")
    units = array("H")
    units.frombytes(s.encode(_UTF16, "surrogatepass"))
    return units


def java_hash_unsigned_py(s: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value (the reference; see ``java_hash_unsigned``)."""
    units = _units(s)
    return int(sum(map(operator.mul, units, _powers(len(units))))) & _MASK


_prefix_cache: dict[str, int] = {}


def index_prefix_hash(topic: str) -> int:
    """Unsigned hash of ``topic#``, the prefix of every index key of ``topic`` (cached)."""
    h = _prefix_cache.get(topic)
    if h is None:
        h = java_hash_unsigned(topic + "#")
        if len(_prefix_cache) < 65536:
            _prefix_cache[topic] = h
    return h


def java_hash_concat(prefix_hash: int, s: str) -> int:
    """Unsigned ``String.hashCode`` of ``prefix + s`` given the unsigned hash of ``prefix``.

    ``h(p + s) = h(p) * 31**len(s) + h(s)`` (mod 2**32): the index hashes ``topic#key`` for
    every key, and this way the topic part is hashed once per topic, not once per key.
    """
    units = _units(s)
    n = len(units)
    scale = _POW[n] if n < _MAX_CACHED_LEN else pow(31, n, 1 << 32)
    return (prefix_hash * scale + int(sum(map(operator.mul, units, _powers(n))))) & _MASK


def java_string_hash(s: str) -> int:
    """``String.hashCode`` of ``s`` as Java's signed int32."""
    h = java_hash_unsigned(s)
    return h - 0x100000000 if h & _SIGN else h


_tags_cache: dict[str | None, int] = {None: 0, "": 0}


def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tagsCode of a TAGS property: its hashCode, 0 when empty or missing.

    Cached (a plain dict, cheaper than lru_cache) because a topic uses few distinct tags while
    every message carries one; the cache stops growing at 8192 entries.
    """
    code = _tags_cache.get(tags)
    if code is None:
        code = java_string_hash(tags)  # type: ignore[arg-type]
        if len(_tags_cache) < 8192:
            _tags_cache[tags] = code
    return code


def index_key_hash(key: str) -> int:
    """IndexFile key hash: ``abs(hashCode(key))``, and 0 for ``Integer.MIN_VALUE``.

    ``key`` is the full index key, ``topic + "#" + key``.
    """
    return abs_hash(java_hash_unsigned(key))


def abs_hash(unsigned: int) -> int:
    """Java ``Math.abs((int) h)`` of an unsigned hash, with MIN_VALUE mapped to 0 (IndexService)."""
    if unsigned & _SIGN:
        if unsigned == _SIGN:
            return 0  # abs(Integer.MIN_VALUE) stays negative in Java; RocketMQ then uses 0
        return 0x100000000 - unsigned
    return unsigned


def index_hashes_py(prefix_hash: int, keys: list[str]) -> list[int]:
    """IndexFile key hashes of ``prefix + key`` for each key (``prefix_hash`` unsigned).

    The loop of ``java_hash_concat`` + ``abs_hash`` inlined: the dispatcher calls this once per
    message (UNIQ_KEY plus KEYS), so per-key function calls are worth saving.
    """
    out = []
    mul = operator.mul
    for key in keys:
        units = key.encode("ascii") if key.isascii() else _units(key)
        n = len(units)
        pows = _POWS_BY_LEN.get(n) or _powers(n)
        scale = _POW[n] if n < _MAX_CACHED_LEN else pow(31, n, 1 << 32)
        h = (prefix_hash * scale + sum(map(mul, units, pows))) & _MASK
        if h & _SIGN:
            h = 0 if h == _SIGN else 0x100000000 - h
        out.append(h)
    return out



java_hash_unsigned: Callable[[str], int] = native.java_hash if native is not None else java_hash_unsigned_py
index_hashes: Callable[[int, list[str]], list[int]] = (
    native.index_hashes if native is not None else index_hashes_py
)
