"""Message ids: the broker's offset id and the client's unique id (reference §5.6).

*Offset msg id*: 32 upper-case hex characters, store host IPv4 (4 bytes) + port (int32) +
CommitLog offset (int64).  The C++ client decodes it (characters 16..31) to find the half
message of a transaction, so it must encode the real physical offset.

*UNIQ_KEY*: produced by clients, indexed by the broker, otherwise opaque.  We generate it with
Java's ``MessageClientIDSetter`` layout: ip4 + pid int16 + a per-process random int32 (Java
uses a class loader hash) + milliseconds since the start of the current month (int32,
wrapping) + a counter int16.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import random
import socket
import struct
import threading
import time

from apogee.common.accel import native
from apogee.common.constants import UNIQ_KEY

_OFFSET_ID = struct.Struct(">4sIq")
_OFFSET_ID_V6 = struct.Struct(">16sIq")
_UNIQ_TAIL = struct.Struct(">IH")

ip_bytes_cache: dict[str, bytes] = {}


def ip_to_bytes(ip: str | bytes) -> bytes:
    """IPv4 address as 4 bytes.

    IPv6 peers are mapped to IPv4 (``::ffff:a.b.c.d``) or to 0.0.0.0, because every
    RocketMQ 4.x client decodes stored hosts as IPv4 only (reference §5.1, broker rule).
    """
    if isinstance(ip, bytes):
        if len(ip) == 4:
            return ip
        raise ValueError(f"expected 4 address bytes, got {len(ip)}")
    cached = ip_bytes_cache.get(ip)
    if cached is not None:
        return cached
    try:
        packed = socket.inet_aton(ip) if ip.count(".") == 3 else b""
    except OSError:
        packed = b""
    if len(packed) != 4:
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
        return socket.inet_ntoa(ip), port, offset
    if len(raw) == _OFFSET_ID_V6.size:
        ip, port, offset = _OFFSET_ID_V6.unpack(raw)
        return socket.inet_ntop(socket.AF_INET6, ip), port, offset
    raise ValueError(f"not a message id: {msg_id!r}")


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current month and of the next one, local time, in epoch ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
        month=start.month + 1
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def _local_ip() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent for UDP connect
            return socket.inet_aton(s.getsockname()[0])
    except Exception:  # no network (or sockets forbidden): any stable value will do
        return socket.inet_aton("127.0.0.1")


class UniqIdGenerator:
    """Thread-safe generator of UNIQ_KEY values in Java's MessageClientIDSetter layout."""

    def __init__(self, ip: str | bytes | None = None, pid: int | None = None) -> None:
        ip4 = ip_to_bytes(ip) if ip is not None else _local_ip()
        pid16 = (os.getpid() if pid is None else pid) & 0xFFFF
        # prefix, counter, start_ms and next_start_ms are read by the producer's C fast path
        # (native.batch_append), which makes the same ids as next_id from them.
        own, bulk = random.sample(range(1 << 32), 2)  # two random fields, never equal
        self.prefix = (ip4 + struct.pack(">HI", pid16, own)).hex().upper()
        self.bulk_prefix = (ip4 + struct.pack(">HI", pid16, bulk)).hex().upper()  # reserve()'s stream
        self.counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self.start_ms, self.next_start_ms = _month_start_ms(int(time.time() * 1000))
        self._bulk_month = self.start_ms  # reserve(): the time field it used last, and how
        self._bulk_ms = -1  # many counter values it took with that field
        self._bulk_used = 0

    def next_id(self) -> str:
        # Hot path (one call per message sent): no lock unless the month rolls over, since
        # next() on itertools.count is atomic under the GIL; hex digits by format, not pack.
        if native is not None:
            fast = native.uniq_id_now(self.prefix, self.start_ms, self.next_start_ms, next(self.counter))
            if fast is not None:
                return fast
        now = int(time.time() * 1000)
        if now >= self.next_start_ms:
            with self._lock:
                if now >= self.next_start_ms:
                    self.start_ms, self.next_start_ms = _month_start_ms(now)
        seq = next(self.counter) & 0xFFFF
        return f"{self.prefix}{(now - self.start_ms) & 0xFFFFFFFF:08X}{seq:04X}"

    def ensure(self, properties: dict[str, str]) -> str:
        """The UNIQ_KEY of a message's ``properties``, set to a new id when it has none."""
        uniq = properties.get(UNIQ_KEY)
        if not uniq:
            uniq = properties[UNIQ_KEY] = self.next_id()
        return uniq

    def reserve(self, n: int) -> list[tuple[str, int, int]]:
        """``n`` ids at once, as blocks ``(head, first, count)``: a block's ids are ``head``
        (28 hex digits: a prefix and the time field) followed by the counter values
        ``first, first + 1, ...`` in 4 hex digits.

        For writers that make ids by the thousand (the Spark sink builds their text column
        by column): one clock read for all of them.  Reserved ids are a second stream of this
        generator, told apart from ``next_id``'s by the random field of their prefix (as two
        Java generators in two class loaders are), with their own count per millisecond: at
        most 65,536 share a time field, beyond that a block borrows the next millisecond's,
        so no id repeats however many are reserved and however many ``next_id`` gives.
        """
        blocks: list[tuple[str, int, int]] = []
        with self._lock:
            now = int(time.time() * 1000)
            if now >= self.next_start_ms:
                self.start_ms, self.next_start_ms = _month_start_ms(now)
            if self._bulk_month != self.start_ms:
                self._bulk_month, self._bulk_ms = self.start_ms, -1
            elapsed = now - self.start_ms
            if elapsed > self._bulk_ms:
                self._bulk_ms, self._bulk_used = elapsed, 0
            while n > 0:
                if self._bulk_used >= 0x10000:
                    self._bulk_ms, self._bulk_used = self._bulk_ms + 1, 0
                k = min(n, 0x10000 - self._bulk_used)
                blocks.append((f"{self.bulk_prefix}{self._bulk_ms & 0xFFFFFFFF:08X}", self._bulk_used, k))
                self._bulk_used += k
                n -= k
        return blocks

    def take(self, n: int) -> list[str]:
        """``n`` new ids (``reserve`` spelled out)."""
        return [f"{head}{first + i:04X}" for head, first, k in self.reserve(n) for i in range(k)]


_default_generator: UniqIdGenerator | None = None


def default_generator() -> UniqIdGenerator:
    """The process-wide generator (for senders without a client instance of their own)."""
    global _default_generator
    if _default_generator is None:
        _default_generator = UniqIdGenerator()
    return _default_generator


def create_uniq_id() -> str:
    """A new UNIQ_KEY from the process-wide generator."""
    return default_generator().next_id()
