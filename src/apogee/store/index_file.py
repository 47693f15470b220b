"""IndexFile: a hash index from ``topic#key`` to CommitLog offsets, RocketMQ's exact format.

Layout in ``store.layout.index``.  Each slot holds the newest entry of its chain and each
entry links to the previous one, so a query walks newest-first and stops at entries older
than the time range.  The header is rewritten on every put (as RocketMQ does): after a process
kill the header always matches the entries and slots in the page cache.

Index entries are hints: a hash collision, or an entry written before a crash cut the
CommitLog, can point at an unrelated record.  ``MessageStore.query_message`` therefore checks
every candidate against the record itself (valid, same topic, the key present).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from array import array
from pathlib import Path

from apogee.store.layout import index as lay
from apogee.store.mapped_file import MappedFile

log = logging.getLogger("apogee.store.index_file")

_pack_entry = lay.ENTRY.pack_into
_unpack_entry = lay.ENTRY.unpack_from
_pack_slot = lay.SLOT.pack_into
_unpack_slot = lay.SLOT.unpack_from
_pack_header = lay.HEADER.pack_into


def index_file_name(now_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, as RocketMQ names index files."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"


class IndexFile:
    __slots__ = (
        "mf", "slots", "index_num", "begin_ts", "end_ts", "begin_phy", "end_phy",
        "slot_count", "index_count", "dirty", "_entries_base",
    )

    def __init__(self, mf: MappedFile, slots: int, index_num: int) -> None:
        self.mf = mf
        self.slots = slots
        self.index_num = index_num
        b, e, bp, ep, sc, ic = lay.HEADER.unpack_from(mf.mm, 0)
        self.begin_ts: int = b
        self.end_ts: int = e
        self.begin_phy: int = bp
        self.end_phy: int = ep
        self.slot_count: int = sc
        self.index_count: int = max(ic, 1)
        self.dirty = False
        self._entries_base = lay.entry_position(slots, 0)

    # --- creation / loading (I/O thread) ------------------------------------------------------

    @classmethod
    def create(cls, path: Path, slots: int, index_num: int, *, prev_end_phy: int = 0,
               prev_end_ts: int = 0, preallocate: bool = True) -> IndexFile:
        """Create a new empty index file continuing from the previous one.  Blocking."""
        mf = MappedFile.create(path, 0, lay.file_size(slots, index_num), preallocate=preallocate,
                               advise_random=True)  # hash slots and chains: random, for good
        f = cls(mf, slots, index_num)
        f.begin_phy = f.end_phy = prev_end_phy
        f.begin_ts = f.end_ts = prev_end_ts
        f.index_count = 1
        f.slot_count = 0
        f.write_header()
        return f

    @classmethod
    def load(cls, path: Path, slots: int, index_num: int) -> IndexFile:
        """Map an existing index file.  Blocking."""
        mf = MappedFile.open_existing(path, 0, lay.file_size(slots, index_num))
        mf.advise_random()  # hash slots and chains: read and written at random, for good
        return cls(mf, slots, index_num)

    @property
    def name(self) -> str:
        return self.mf.path.name

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def room(self) -> int:
        return self.index_num - self.index_count

    def write_header(self) -> None:
        _pack_header(self.mf.mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                     self.slot_count, self.index_count)

    # --- put / query (owner thread) -----------------------------------------------------------

    def put_key(self, key_hash: int, phy_offset: int, store_ts: int) -> bool:
        """Add one entry (RocketMQ IndexFile.putKey); False when the file is full."""
        return self.put_keys((key_hash,), phy_offset, store_ts) == 1

    def put_keys(self, key_hashes: tuple[int, ...] | list[int], phy_offset: int, store_ts: int) -> int:
        """Add one entry per hash for the message at ``phy_offset``; returns how many fit.

        Entries, slots and counters are RocketMQ's putKey.  Crash order: the header (with the
        new count) is written first, then each entry before the slot that points at it, so a
        writer killed at any point leaves every slot pointing at a written entry below the
        header's count (at worst an unreachable or all-zero entry).
        """
        count = self.index_count
        room = self.index_num - count
        if room <= 0 or not key_hashes:
            return 0
        hashes = key_hashes if len(key_hashes) <= room else key_hashes[:room]
        mm = self.mf.mm
        slots = self.slots
        begin_ts = self.begin_ts
        if begin_ts <= 0:
            diff = 0
        else:
            diff = (store_ts - begin_ts) // 1000
            diff = 0 if diff < 0 else (diff if diff < lay.INT_MAX else lay.INT_MAX)
        slot_count = self.slot_count
        latest: dict[int, int] = {}
        plan = []
        idx = count
        for key_hash in hashes:
            abs_slot = 40 + (key_hash % slots) * 4
            prev = latest.get(abs_slot)
            if prev is None:
                (prev,) = _unpack_slot(mm, abs_slot)
                if prev <= 0 or prev > count:
                    prev = 0
                    slot_count += 1
            latest[abs_slot] = idx
            plan.append((abs_slot, key_hash, prev, idx))
            idx += 1
        if count <= 1:  # the first entry sets the begin values (its own timeDiff is 0)
            self.begin_phy = phy_offset
            self.begin_ts = store_ts
        self.index_count = idx
        self.slot_count = slot_count
        self.end_phy = phy_offset
        self.end_ts = store_ts
        _pack_header(mm, 0, self.begin_ts, store_ts, self.begin_phy, phy_offset, slot_count, idx)
        base = self._entries_base
        for abs_slot, key_hash, prev, i in plan:
            _pack_entry(mm, base + i * 20, key_hash, phy_offset, diff, prev)
            _pack_slot(mm, abs_slot, i)
        self.dirty = True
        return len(plan)

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_ts, self.end_ts
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select(self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` the offsets of ``key_hash`` stored in [begin, end], newest first."""
        mm = self.mf.mm
        count = self.index_count
        (nxt,) = _unpack_slot(mm, 40 + (key_hash % self.slots) * 4)
        if nxt <= 0 or nxt > count or count <= 1:
            return
        seen = 0
        while len(out) < max_num and seen < count:
            seen += 1
            kh, phy, diff, prev = _unpack_entry(mm, self._entries_base + nxt * 20)
            if diff < 0:
                break
            t = self.begin_ts + diff * 1000
            if kh == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or t < begin:
                break
            nxt = prev

    # --- maintenance (I/O thread) -------------------------------------------------------------

    def flush(self) -> None:
        """fdatasync if anything changed.  Blocking."""
        if self.dirty and not self.mf.closed:
            self.dirty = False
            os.fdatasync(self.mf.fd)

    def is_consistent(self) -> bool:
        """Cheap structural check after a crash: every slot and the header within bounds.

        The slot table is checked with one C-level pass (array + byteswap + max).
        """
        count = self.index_count
        if not 1 <= count <= self.index_num or self.slot_count < 0:
            return False
        slots = array("i")
        slots.frombytes(self.mf.view[40 : 40 + self.slots * 4])
        if sys.byteorder == "little":
            slots.byteswap()
        return (max(slots, default=0) < count) and (min(slots, default=0) >= 0)

    def clamp_end(self, commitlog_end: int) -> None:
        """After the CommitLog was cut at ``commitlog_end``: forget that later messages were
        indexed, so they are indexed again when new records reuse those offsets."""
        if self.end_phy >= commitlog_end:
            self.end_phy = max(0, commitlog_end - 1)
            self.write_header()
            self.dirty = True
