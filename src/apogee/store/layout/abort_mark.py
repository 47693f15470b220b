"""The ``abort`` file's content: where a process crash left the store (Apogee).

RocketMQ's ``abort`` file is empty: it only says "the last run did not shut down cleanly".
Apogee writes 36 bytes into it while running, big-endian::

    off size field
      0    8 "APGABRT1"
      8   16 bootId             the kernel's boot id (/proc/sys/kernel/random/boot_id) when written
     24    8 dispatchedOffset   CommitLog offset below which every record is complete and its
                                ConsumeQueue entries are written (into the mapping; not fsync'd)
     32    4 crc32              of bytes 0..32

A process killed while the kernel keeps running leaves every write to a mapping in the page
cache, so after a crash of the same boot the ConsumeQueues hold every entry below
``dispatchedOffset`` and recovery only scans and re-dispatches from there.  After a reboot (an
OS crash or power loss) the page cache is gone and the mark says nothing; recovery then starts
at the checkpoint's fsync'd ``safePhysOffset`` (``layout.checkpoint``).
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

MARK: Final = struct.Struct(">8s16sqI")
MARK_SIZE: Final = MARK.size  # 36
MARK_TAG: Final = b"APGABRT1"


def pack_mark(boot_id: bytes, dispatched_offset: int) -> bytes:
    head = MARK_TAG + boot_id.ljust(16, b"\0")[:16] + dispatched_offset.to_bytes(8, "big", signed=True)
    return head + zlib.crc32(head).to_bytes(4, "big")


def unpack_mark(buf: bytes | bytearray | memoryview) -> tuple[bytes, int] | None:
    """``(boot_id, dispatched_offset)``, or None for an empty, short or damaged mark."""
    if len(buf) < MARK_SIZE:
        return None
    tag, boot_id, offset, crc = MARK.unpack_from(buf, 0)
    if tag != MARK_TAG or offset < 0 or zlib.crc32(bytes(buf[:32])) != crc:
        return None
    return boot_id, int(offset)
