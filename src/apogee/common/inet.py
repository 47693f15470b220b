"""IP addresses between their bytes and their text, without the socket module.

Stored records and message ids carry hosts as 4 (IPv4) or 16 (IPv6) address bytes.  The codecs
that turn them into text are sans-I/O and do not import ``socket`` (an import contract checks
it), so the conversions live here, written as ``socket.inet_ntoa`` / ``inet_ntop`` write them:
dotted quads; IPv6 in RFC 5952 form (lower-case hex, the longest run of two or more zero words,
the first if tied, as ``::``), with an embedded IPv4 address in dotted form for ``::ffff:a.b.c.d``
(IPv4-mapped) and ``::a.b.c.d`` (IPv4-compatible), as glibc's ``inet_ntop`` prints them.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import TYPE_CHECKING, Final, TypeAlias, Union

if TYPE_CHECKING:
    import mmap

_IP4: Final = struct.Struct("4B")
_IP6: Final = struct.Struct(">8H")

Buffer: TypeAlias = Union[bytes, bytearray, memoryview, "mmap.mmap"]  # a stored record's


def ipv4_text(raw: Buffer, pos: int = 0) -> str:
    """The dotted quad of the 4 address bytes at ``raw[pos:]``."""
    return "%d.%d.%d.%d" % _IP4.unpack_from(raw, pos)  # noqa: UP031 - the fastest spelling (per record)


def ipv6_text(raw: Buffer, pos: int = 0) -> str:
    """The text of the 16 IPv6 address bytes at ``raw[pos:]``, as ``inet_ntop`` writes it."""
    words = _IP6.unpack_from(raw, pos)
    if words[:5] == (0, 0, 0, 0, 0) and (words[5] == 0xFFFF or (words[5] == 0 and words[6] != 0)):
        return ("::ffff:" if words[5] else "::") + ipv4_text(raw, pos + 12)
    best_start, best_len, start = -1, 1, -1  # a single zero word stays written out
    for i, word in enumerate((*words, 1)):  # the sentinel closes a run at the end
        if word == 0:
            if start < 0:
                start = i
        elif start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    hexes = [f"{word:x}" for word in words]
    if best_start < 0:
        return ":".join(hexes)
    return ":".join(hexes[:best_start]) + "::" + ":".join(hexes[best_start + best_len :])


def ipv6_bytes(text: str) -> bytes:
    """The 16 address bytes of an IPv6 address's text; ValueError if it is not one."""
    return ipaddress.IPv6Address(text).packed
