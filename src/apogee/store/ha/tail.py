"""The tail of a slave's CommitLog, as its divergence check compares it with the master's.

A slave that restarts, or whose link broke, continues from its own end.  After an unclean
master restart the master may have lost records the slave holds and written different
ones at the same offsets: continuing would splice two histories.  So before each link the
slave compares its last whole message record -- and any part of a record after it -- with
the master's bytes at the same offset (``HASlave``).  These functions find those bytes; they
block (a walk of one CommitLog file at most) and run on the store's I/O thread.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from apogee.common.message_codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE
from apogee.store.mapped_file_queue import MappedFileQueue

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE


class Tail(NamedTuple):
    """``record``: (offset, bytes) of the last whole message record before ``end``, or None;
    ``partial``: (offset, bytes) of a record's first bytes after it (a link that broke
    inside a record), or None."""

    record: tuple[int, bytes] | None
    partial: tuple[int, bytes] | None


def log_tail(mfq: MappedFileQueue, end: int) -> Tail:
    """The last whole record of the log before ``end`` and the incomplete record after it."""
    record: tuple[int, bytes] | None = None
    partial: tuple[int, bytes] | None = None
    probe = end - 1
    while probe >= mfq.min_offset and record is None:
        mf = mfq.find(probe)
        if mf is None:
            break
        limit = min(mf.wrote, end - mf.start)
        rel = 0
        while rel + 8 <= limit:
            total, magic = _HEAD.unpack_from(mf.mm, rel)
            if magic == BLANK_MAGIC_CODE or magic != MESSAGE_MAGIC_CODE or total <= 0:
                break
            if rel + total > limit:
                if partial is None:
                    partial = (mf.start + rel, bytes(mf.mm[rel:limit]))
                break
            record = (mf.start + rel, bytes(mf.mm[rel : rel + total]))
            rel += total
        probe = mf.start - 1  # nothing whole in this file: the previous one ends with the last
    return Tail(record, partial)
