"""A stored message found by the CommitLog offset a client names (VIEW_MESSAGE_BY_ID,
CONSUMER_SEND_MSG_BACK, END_TRANSACTION).

A client may name any offset, also one inside a message body, where four bytes can claim
any size: answering that would send megabytes of other messages' bytes (a 47-byte request
once drew a 48 MiB answer).  So a record is returned only where one starts: the magic code,
sizes that add up, the CRC of the body, and the record's own PHYSICALOFFSET field equal to
the offset asked for (``message_codec.check_record``, recovery's test).  One record, never more.
"""

from __future__ import annotations

from typing import Protocol

from apogee.common.message import MessageExt
from apogee.common.message_codec import check_record, decode_record


class RecordSource(Protocol):
    def select_one_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> memoryview | None: ...


def record_at(store: RecordSource, offset: int) -> memoryview | None:
    """The record that starts at CommitLog ``offset``, or None when none starts there."""
    if offset < 0:
        return None
    view = store.select_one_message_by_offset(offset)
    if view is None:
        return None
    if check_record(view, 0, len(view), offset) != len(view):
        view.release()
        return None
    return view


def message_at(store: RecordSource, offset: int) -> MessageExt | None:
    """``record_at`` decoded (the body uninflated, as stored)."""
    view = record_at(store, offset)
    if view is None:
        return None
    try:
        return decode_record(view, inflate=False)
    except ValueError:
        return None
    finally:
        view.release()
