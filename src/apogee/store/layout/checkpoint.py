"""Checkpoint file layout (docs/protocol.md, Checkpoint): 4096 bytes, three int64 at the start.

::

    off size field
      0    8 physicMsgTimestamp  store time of the last CommitLog message known flushed
      8    8 logicsMsgTimestamp  store time of the last message whose ConsumeQueue entry is flushed
     16    8 indexMsgTimestamp   store time of the last message whose index entries are flushed
     24   40 zero               (RocketMQ 5.x puts masterFlushedOffset at 24, confirmPhyOffset at 32)
     64    8 "APGSAFE1"         Apogee: the block below is present
     72    8 safePhysOffset     CommitLog offset below which the log, every ConsumeQueue entry and
                                (with messageIndexSafe) the index are on disk (fsync'd)
     80    4 crc32              of bytes 64..80: a block that does not match is ignored
     84 4012 zero

RocketMQ's recovery after a crash starts from the CommitLog file whose first message is older
than the smallest of the times (minus 3 s of clock slack); Apogee starts at ``safePhysOffset``
when it is later (a record boundary, not a file start: the scan is bounded by what was written
since, whatever the log's length).  RocketMQ ignores bytes past 24.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

CHECKPOINT_FILE_SIZE: Final = 4096
FIELDS: Final = struct.Struct(">qqq")
CLOCK_SLACK_MS: Final = 3000
SAFE_AT: Final = 64
SAFE: Final = struct.Struct(">8sqI")
SAFE_TAG: Final = b"APGSAFE1"


def pack(physic_ts: int, logics_ts: int, index_ts: int, safe_offset: int = -1) -> bytes:
    """The whole 4096-byte file (with the Apogee block when ``safe_offset`` >= 0)."""
    head = FIELDS.pack(physic_ts, logics_ts, index_ts)
    out = bytearray(CHECKPOINT_FILE_SIZE)
    out[: len(head)] = head
    if safe_offset >= 0:
        block = SAFE_TAG + safe_offset.to_bytes(8, "big")
        SAFE.pack_into(out, SAFE_AT, SAFE_TAG, safe_offset, zlib.crc32(block))
    return bytes(out)


def unpack_safe_offset(buf: bytes | bytearray | memoryview) -> int:
    """``safePhysOffset``, or -1 when the block is absent or damaged."""
    if len(buf) < SAFE_AT + SAFE.size:
        return -1
    tag, offset, crc = SAFE.unpack_from(buf, SAFE_AT)
    if tag != SAFE_TAG or offset < 0 or zlib.crc32(bytes(buf[SAFE_AT : SAFE_AT + 16])) != crc:
        return -1
    return int(offset)


def unpack(buf: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(physic, logics, index)`` timestamps; zeros for a short or missing file."""
    if len(buf) < FIELDS.size:
        return 0, 0, 0
    p, lg, i = FIELDS.unpack_from(buf, 0)
    return p, lg, i


def min_timestamp(physic_ts: int, logics_ts: int, index_ts: int, *, index_safe: bool) -> int:
    """Store time from which recovery must rescan (RocketMQ getMinTimestamp[Index])."""
    low = min(physic_ts, logics_ts)
    if index_safe:
        low = min(low, index_ts)
    return max(0, low - CLOCK_SLACK_MS)
