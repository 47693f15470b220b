"""The message trace format of RocketMQ's clients: the records they write to the trace topic.

A trace message (topic ``RMQ_SYS_TRACE_TOPIC`` unless the client was given another) carries
in its body one or more records, each a list of text fields separated by ``\\x01`` and ended
by ``\\x02``; its KEYS are the ids of the traced messages and their own keys, so the broker's
index finds every trace of a message by its id (QUERY_MESSAGE by key, as mqadmin's
``queryMsgTraceById`` does).  The four records, field by field (Java's
``TraceDataEncoder``):

* ``Pub`` time, region, producer group, topic, msgId, tags, keys, store host, body length,
  cost, message type, offset msgId, success -- one per message a broker stored;
* ``SubBefore`` time, region, consumer group, request id, msgId, retry times, keys -- one per
  message handed to a listener;
* ``SubAfter`` request id (pairs it with its SubBefore), msgId, cost, success, keys,
  ConsumeReturnType, time, consumer group -- one per message after the listener returned;
* ``EndTransaction`` time, region, producer group, topic, msgId, tags, keys, store host,
  message type, transaction id, state, from a check -- one per transaction decision.

Java writes an absent value (a message without tags or keys, a consumed message without a
region) as the text ``null``, and so does this module; the decoder reads ``null`` back as
None.  The decoder follows Java's reading too: trailing empty fields do not count (Java's
``String.split``), a Pub has 12 to 15 fields (13: no offset msgId; 15: an old client's host),
a SubAfter 6 to 9 (the last two are left out by clients in Alibaba Cloud mode).  Unlike
Java's, it skips a malformed record instead of failing the whole message: trace messages are
written by any client and read by tools.

Pure: no I/O, used by the client's trace hooks and by ``apogee admin query-msg-trace-by-id``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

from apogee.common import constants as c

CONTENT_SEPARATOR: Final = "\x01"  # between the fields of a record (TraceConstants.CONTENT_SPLITOR)
RECORD_END: Final = "\x02"  # after each record (TraceConstants.FIELD_SPLITOR)
NULL_TEXT: Final = "null"  # Java's text for an absent value
DEFAULT_REGION: Final = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID
TRACE_TOPIC: Final = c.RMQ_SYS_TRACE_TOPIC
TRANSACTION_STATES: Final = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")  # LocalTransactionState


class MessageType(enum.IntEnum):
    """RocketMQ's MessageType; a record carries its ordinal."""

    NORMAL = 0  # Normal_Msg
    TRANS_HALF = 1  # Trans_Msg_Half
    TRANS_COMMIT = 2  # Trans_msg_Commit (every EndTransaction record, commit or not)
    DELAY = 3  # Delay_Msg


class ConsumeReturnType(enum.IntEnum):
    """How a listener call ended (RocketMQ's ConsumeReturnType); SubAfter carries the ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


class PubRecord(NamedTuple):
    """A message the broker stored (written after the send's answer)."""

    timestamp_ms: int  # when the send began
    region_id: str | None
    group: str
    topic: str
    msg_id: str  # the client's id (UNIQ_KEY)
    tags: str | None
    keys: str | None  # space-separated, as the KEYS property
    store_host: str  # the broker's address
    body_length: int
    cost_ms: int
    msg_type: int  # a MessageType
    offset_msg_id: str | None
    success: bool  # the broker answered SEND_OK
    client_host: str | None = None  # only in the records of old clients (a 15th field)


class SubBeforeRecord(NamedTuple):
    """A message handed to a listener."""

    timestamp_ms: int
    region_id: str | None
    group: str
    request_id: str  # one per listener call, repeated by its SubAfter records
    msg_id: str
    retry_times: int
    keys: str | None


class SubAfterRecord(NamedTuple):
    """A listener call ended."""

    request_id: str
    msg_id: str
    cost_ms: int  # the call's time divided by its number of messages
    success: bool
    keys: str | None
    context_code: int | None  # a ConsumeReturnType
    timestamp_ms: int | None  # None in Alibaba Cloud mode records, as the group
    group: str | None


class EndTransactionRecord(NamedTuple):
    """A transaction producer told the broker its decision."""

    timestamp_ms: int
    region_id: str | None
    group: str
    topic: str
    msg_id: str
    tags: str | None
    keys: str | None
    store_host: str
    msg_type: int
    transaction_id: str | None
    transaction_state: str  # one of TRANSACTION_STATES
    from_check: bool  # answered a broker's check rather than the local transaction's end


TraceRecord = PubRecord | SubBeforeRecord | SubAfterRecord | EndTransactionRecord


def encode_record(record: TraceRecord) -> str:
    """One record as Java's TraceDataEncoder writes it, ``\x02`` included.

    (f-strings rather than a joined list: this runs for every traced message.  An IntEnum
    formats as its number.)"""
    r = record
    if isinstance(r, PubRecord):
        return (
            f"Pub\x01{r.timestamp_ms}\x01{r.region_id or NULL_TEXT}\x01{r.group}\x01{r.topic}\x01{r.msg_id}"
            f"\x01{r.tags or NULL_TEXT}\x01{r.keys or NULL_TEXT}\x01{r.store_host}\x01{r.body_length}"
            f"\x01{r.cost_ms}\x01{r.msg_type}\x01{r.offset_msg_id or NULL_TEXT}"
            f"\x01{'true' if r.success else 'false'}\x02"
        )
    if isinstance(r, SubBeforeRecord):
        return (
            f"SubBefore\x01{r.timestamp_ms}\x01{r.region_id or NULL_TEXT}\x01{r.group}\x01{r.request_id}"
            f"\x01{r.msg_id}\x01{r.retry_times}\x01{r.keys or NULL_TEXT}\x02"
        )
    if isinstance(r, SubAfterRecord):
        return (
            f"SubAfter\x01{r.request_id}\x01{r.msg_id}\x01{r.cost_ms}\x01{'true' if r.success else 'false'}"
            f"\x01{r.keys or NULL_TEXT}\x01{r.context_code or 0}\x01{r.timestamp_ms or 0}\x01{r.group or NULL_TEXT}\x02"
        )
    return (
        f"EndTransaction\x01{r.timestamp_ms}\x01{r.region_id or NULL_TEXT}\x01{r.group}\x01{r.topic}\x01{r.msg_id}"
        f"\x01{r.tags or NULL_TEXT}\x01{r.keys or NULL_TEXT}\x01{r.store_host}\x01{r.msg_type}"
        f"\x01{r.transaction_id or NULL_TEXT}\x01{r.transaction_state}\x01{'true' if r.from_check else 'false'}\x02"
    )


# --- decoding -----------------------------------------------------------------------------------

_INT = re.compile(r"-?[0-9]{1,19}")


class _Malformed(ValueError):
    pass


def _int(text: str) -> int:
    if _INT.fullmatch(text) is None:
        raise _Malformed(text)
    return int(text)


def _opt(text: str) -> str | None:
    return None if text == NULL_TEXT else text


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Java's Boolean.parseBoolean


def _msg_type(text: str) -> int:
    value = _int(text)
    if value not in MessageType._value2member_map_:
        raise _Malformed(text)
    return value


def _pub(f: list[str]) -> PubRecord:
    if len(f) < 12:
        raise _Malformed("Pub")
    offset_id: str | None = None
    success = True  # what Java leaves when the field is missing
    client_host: str | None = None
    if len(f) == 13:
        success = _bool(f[12])
    elif len(f) >= 14:
        offset_id, success = _opt(f[12]), _bool(f[13])
        if len(f) >= 15:
            client_host = _opt(f[14])
    return PubRecord(
        _int(f[1]), _opt(f[2]), f[3], f[4], f[5], _opt(f[6]), _opt(f[7]), f[8], _int(f[9]), _int(f[10]),
        _msg_type(f[11]), offset_id, success, client_host,
    )


def _sub_before(f: list[str]) -> SubBeforeRecord:
    if len(f) < 8:
        raise _Malformed("SubBefore")
    return SubBeforeRecord(_int(f[1]), _opt(f[2]), f[3], f[4], f[5], _int(f[6]), _opt(f[7]))


def _sub_after(f: list[str]) -> SubAfterRecord:
    if len(f) < 6:
        raise _Malformed("SubAfter")
    code = _int(f[6]) if len(f) >= 7 else None
    timestamp, group = (_int(f[7]), _opt(f[8])) if len(f) >= 9 else (None, None)
    return SubAfterRecord(f[1], f[2], _int(f[3]), _bool(f[4]), _opt(f[5]), code, timestamp, group)


def _end_transaction(f: list[str]) -> EndTransactionRecord:
    if len(f) < 13 or f[11] not in TRANSACTION_STATES:
        raise _Malformed("EndTransaction")
    return EndTransactionRecord(
        _int(f[1]), _opt(f[2]), f[3], f[4], f[5], _opt(f[6]), _opt(f[7]), f[8], _msg_type(f[9]), _opt(f[10]),
        f[11], _bool(f[12]),
    )


_PARSERS: dict[str, Callable[[list[str]], TraceRecord]] = {
    "Pub": _pub, "SubBefore": _sub_before, "SubAfter": _sub_after, "EndTransaction": _end_transaction,
}


class Decoded(NamedTuple):
    records: list[TraceRecord]
    malformed: int  # records of a known type that could not be read
    unknown: int  # records of a type this decoder does not know (skipped, as Java does)


def decode_records(text: str) -> Decoded:
    """Every record of a trace message's body (decoded from UTF-8)."""
    records: list[TraceRecord] = []
    malformed = unknown = 0
    for chunk in text.split(RECORD_END):
        if not chunk:
            continue
        fields = chunk.split(CONTENT_SEPARATOR)
        while fields and not fields[-1]:  # Java's split drops trailing empty strings
            fields.pop()
        parse = _PARSERS.get(fields[0]) if fields else None
        if parse is None:
            unknown += 1
            continue
        try:
            records.append(parse(fields))
        except _Malformed:
            malformed += 1
    return Decoded(records, malformed, unknown)


def decode_body(body: bytes) -> Decoded:
    """``decode_records`` of a trace message's body (bytes that are not UTF-8 are replaced, as
    Java's ``new String(body, UTF_8)`` does)."""
    return decode_records(body.decode("utf-8", errors="replace"))


class TraceBatch(NamedTuple):
    """The body and KEYS of one trace message."""

    body: bytes
    keys: list[str]


class BatchBuilder:
    """Packs records into trace messages, one record at a time: each body the records one
    after another, at most ``max_body_bytes`` long; each KEYS the records' message ids and
    keys, once each in the order first seen, at most ``max_keys_chars`` long when joined (KEYS
    travels in the properties, which RocketMQ limits to 32 KiB).  A record too large for
    either limit travels alone.  A record's keys are counted in full against the limit before
    duplicates are dropped: cheap, and never over."""

    def __init__(self, max_body_bytes: int, max_keys_chars: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_keys_chars = max_keys_chars
        self._parts: list[bytes] = []
        self._keys: dict[str, None] = {}
        self._size = self._keys_chars = 0

    def add(self, record: TraceRecord) -> TraceBatch | None:
        """Add ``record``; returns the batch it closed when it did not fit with the others."""
        data = encode_record(record).encode()
        msg_id, text = record.msg_id, record.keys
        more = len(msg_id) + 1 + (len(text) + 1 if text else 0)
        closed = None
        if self._parts and (
            self._size + len(data) > self.max_body_bytes or self._keys_chars + more > self.max_keys_chars
        ):
            closed = self.take()
        self._parts.append(data)
        self._size += len(data)
        self._keys_chars += more
        keys = self._keys
        if msg_id:
            keys[msg_id] = None
        if text:
            for key in text.split(c.KEY_SEPARATOR):
                if key:
                    keys[key] = None
        return closed

    def take(self) -> TraceBatch | None:
        """The open batch (None when empty); the next record starts a new one."""
        if not self._parts:
            return None
        batch = TraceBatch(b"".join(self._parts), list(self._keys))
        self._parts, self._keys, self._size, self._keys_chars = [], {}, 0, 0
        return batch


def pack(records: Iterable[TraceRecord], max_body_bytes: int, max_keys_chars: int) -> list[TraceBatch]:
    """All of ``records`` as trace messages (``BatchBuilder``)."""
    builder = BatchBuilder(max_body_bytes, max_keys_chars)
    batches = [b for b in map(builder.add, records) if b is not None]
    last = builder.take()
    return batches if last is None else [*batches, last]
