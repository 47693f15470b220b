"""ConsumeQueue entry: 20 bytes, big-endian (docs/protocol.md, ConsumeQueue entry).

::

    off size field
      0    8 commitLogOffset   physical offset of the record in the CommitLog
      8    4 size              record size in bytes
     12    8 tagsCode          Java hashCode of TAGS (for SCHEDULE_TOPIC: deliver time)

Logical offset n lives at byte n*20 of the queue; file k holds entries
[k*entries_per_file, (k+1)*entries_per_file) and is named by its first byte offset.
An all-zero entry marks unwritten space (files are preallocated with zeros).
"""

from __future__ import annotations

import struct
from typing import Final

CQ_UNIT_SIZE: Final = 20
CQ_UNIT: Final = struct.Struct(">qiq")
assert CQ_UNIT.size == CQ_UNIT_SIZE

# RocketMQ's "pre-blank" entry, written before the first entry of a queue whose first file
# does not start at offset 0 (ConsumeQueue.fillPreBlank).
BLANK_PHYS_OFFSET: Final = 0
BLANK_SIZE: Final = 0x7FFFFFFF


def pack_unit(phys_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(phys_offset, size, tags_code)


def unpack_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """``(phys_offset, size, tags_code)`` of the entry at ``buf[pos:]``."""
    phys, size, tags = CQ_UNIT.unpack_from(buf, pos)
    return phys, size, tags


def is_valid_unit(phys_offset: int, size: int) -> bool:
    """RocketMQ's recovery test for a written entry."""
    return phys_offset >= 0 and size > 0
