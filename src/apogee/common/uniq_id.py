"""UNIQ_KEY: the id a producer gives each message (docs/protocol.md, Message ids), made here, once.

Produced by clients, indexed by the broker, otherwise opaque.  We generate it with Java's
``MessageClientIDSetter`` layout: ip4 + pid int16 + a per-process random int32 (Java uses a
class loader hash) + milliseconds since the start of the current month (int32, wrapping) + a
counter int16.  The producer's C fast path (``native.batch_append``, ``native.uniq_id_now``)
makes the same ids from the generator's fields.  The broker's offset msg id is in
``message_id``.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import struct
import threading
import time

from apogee.common.accel import native
from apogee.common.constants import UNIQ_KEY
from apogee.common.host import local_ip
from apogee.common.message_id import ip_to_bytes


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current month and of the next one, local time, in epoch ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
        month=start.month + 1
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """Thread-safe generator of UNIQ_KEY values in Java's MessageClientIDSetter layout."""

    def __init__(self, ip: str | bytes | None = None, pid: int | None = None) -> None:
        ip4 = ip_to_bytes(ip if ip is not None else local_ip())
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
