"""IndexFile layout (docs/protocol.md, IndexFile): 40-byte header, hash slots, 20-byte linked entries.

::

    header (40 bytes)
      0  8 beginTimestamp   store time of the first indexed message
      8  8 endTimestamp     store time of the last indexed message
     16  8 beginPhyOffset   CommitLog offset of the first indexed message
     24  8 endPhyOffset     CommitLog offset of the last indexed message
     32  4 hashSlotCount    slots in use
     36  4 indexCount       next entry number; starts at 1, entry 0 is unused

    slot table: hashSlotNum x int32 at 40, each the newest entry number of its chain (0 = empty)

    entry k at 40 + hashSlotNum*4 + k*20:
      0  4 keyHash          abs(hashCode(topic + "#" + key)), 0 for Integer.MIN_VALUE
      4  8 phyOffset        CommitLog offset of the message
     12  4 timeDiff         (storeTimestamp - beginTimestamp) / 1000, clamped to [0, INT_MAX]
     16  4 prevIndex        previous entry of the same slot, 0 = end of chain

File name: local time at creation, ``yyyyMMddHHmmssSSS``.
"""

from __future__ import annotations

import struct
from typing import Final

INDEX_HEADER_SIZE: Final = 40
INDEX_SLOT_SIZE: Final = 4
INDEX_ENTRY_SIZE: Final = 20
INVALID_INDEX: Final = 0
INT_MAX: Final = 0x7FFFFFFF

HEADER: Final = struct.Struct(">qqqqii")
ENTRY: Final = struct.Struct(">iqii")
SLOT: Final = struct.Struct(">i")
assert HEADER.size == INDEX_HEADER_SIZE and ENTRY.size == INDEX_ENTRY_SIZE


def file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of an index file with these capacities (420 000 040 for the defaults)."""
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE


def entry_position(hash_slot_num: int, index: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index * INDEX_ENTRY_SIZE


def time_diff_s(store_timestamp: int, begin_timestamp: int) -> int:
    """The timeDiff field for a message stored at ``store_timestamp``."""
    if begin_timestamp <= 0:
        return 0
    diff = (store_timestamp - begin_timestamp) // 1000
    if diff < 0:
        return 0
    return min(diff, INT_MAX)


def pack_header(
    begin_ts: int, end_ts: int, begin_phy: int, end_phy: int, slot_count: int, index_count: int
) -> bytes:
    return HEADER.pack(begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count)


def unpack_header(buf: bytes | bytearray | memoryview) -> tuple[int, int, int, int, int, int]:
    b, e, bp, ep, sc, ic = HEADER.unpack_from(buf, 0)
    return b, e, bp, ep, sc, ic


def pack_entry(key_hash: int, phy_offset: int, time_diff: int, prev_index: int) -> bytes:
    return ENTRY.pack(key_hash, phy_offset, time_diff, prev_index)


def unpack_entry(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int, int]:
    k, p, t, prev = ENTRY.unpack_from(buf, pos)
    return k, p, t, prev
