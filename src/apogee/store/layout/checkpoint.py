"""Checkpoint file layout (reference §6.4): 4096 bytes, three int64 at the start.

::

    off size field
      0    8 physicMsgTimestamp  store time of the last CommitLog message known flushed
      8    8 logicsMsgTimestamp  store time of the last message whose ConsumeQueue entry is flushed
     16    8 indexMsgTimestamp   store time of the last message whose index entries are flushed
     24 4072 zero               (RocketMQ 5.x puts masterFlushedOffset at 24, confirmPhyOffset at 32)

Recovery after a crash starts from the CommitLog file whose first message is older than the
smallest of these times (minus 3 s of clock slack), as RocketMQ does.
"""

from __future__ import annotations

import struct
from typing import Final

CHECKPOINT_FILE_SIZE: Final = 4096
FIELDS: Final = struct.Struct(">qqq")
CLOCK_SLACK_MS: Final = 3000


def pack(physic_ts: int, logics_ts: int, index_ts: int) -> bytes:
    """The whole 4096-byte file."""
    head = FIELDS.pack(physic_ts, logics_ts, index_ts)
    return head + bytes(CHECKPOINT_FILE_SIZE - len(head))


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
