"""The broker's offset msg id (docs/protocol.md, Message ids), and store hosts as address bytes.

*Offset msg id*: 32 upper-case hex characters, store host IPv4 (4 bytes) + port (int32) +
CommitLog offset (int64).  The C++ client decodes it (characters 16..31) to find the half
message of a transaction, so it must encode the real physical offset.  The client's unique id
(UNIQ_KEY) is made in ``uniq_id``.
"""

from __future__ import annotations

import ipaddress
import struct

from apogee.common.inet import ipv4_text, ipv6_text

_OFFSET_ID = struct.Struct(">4sIq")
_OFFSET_ID_V6 = struct.Struct(">16sIq")

ip_bytes_cache: dict[str, bytes] = {}


def ip_to_bytes(ip: str | bytes) -> bytes:
    """IPv4 address as 4 bytes.

    IPv6 peers are mapped to IPv4 (``::ffff:a.b.c.d``) or to 0.0.0.0, because every
    RocketMQ 4.x client decodes stored hosts as IPv4 only (docs/protocol.md, Stored record).
    """
    if isinstance(ip, bytes):
        if len(ip) == 4:
            return ip
        raise ValueError(f"expected 4 address bytes, got {len(ip)}")
    cached = ip_bytes_cache.get(ip)
    if cached is not None:
        return cached
    try:
        addr = ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        addr = None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        packed = addr.ipv4_mapped.packed
    elif isinstance(addr, ipaddress.IPv4Address):
        packed = addr.packed
    else:
        packed = b"\x00\x00\x00\x00"
    if len(ip_bytes_cache) < 4096:
        ip_bytes_cache[ip] = packed
    return packed


def create_offset_msg_id(store_ip: str | bytes, port: int, commit_log_offset: int) -> str:
    """The 32-hex offset msg id of a record stored at ``commit_log_offset``."""
    return _OFFSET_ID.pack(ip_to_bytes(store_ip), port & 0xFFFFFFFF, commit_log_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``(ip, port, commit_log_offset)`` of an offset msg id (IPv4: 32 hex, IPv6: 56 hex)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"not a message id: {msg_id!r}") from None
    if len(raw) == _OFFSET_ID.size:
        ip, port, offset = _OFFSET_ID.unpack(raw)
        return ipv4_text(ip), port, offset
    if len(raw) == _OFFSET_ID_V6.size:
        ip, port, offset = _OFFSET_ID_V6.unpack(raw)
        return ipv6_text(ip), port, offset
    raise ValueError(f"not a message id: {msg_id!r}")
