"""What the broker hands the store to put: RocketMQ's MessageExtBrokerInner and MessageExtBatch.

The broker fills in everything a SEND request decides (topic, queue, properties with CLUSTER
added and WAIT removed, sysflag, born and store hosts); the store assigns the queue offset,
the physical offset and the store timestamp under its writer lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from apogee.common.message_codec import BatchItem, decode_batch

HostAddress = tuple[str, int]


@dataclass(slots=True)
class InnerMessage:
    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    # The properties string (name\x01value\x02...) or a dict; the broker usually has a dict.
    properties: str | Mapping[str, str] = ""
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("127.0.0.1", 0)
    # brokerIP1:listenPort; clients send CONSUMER_SEND_MSG_BACK here (docs/protocol.md, Send-back and redelivery).
    store_host: HostAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # Java hashCode of TAGS; None lets the store compute it from the properties.
    tags_code: int | None = None


class PlainMessage(NamedTuple):
    """A single send the broker stores without rewriting it in Python (``CommitLog.put_plain``):
    the stored properties are ``properties`` without WAIT, then ``extra`` (the broker's
    CLUSTER), ``properties_len`` long, as ``native.scan_single`` measured them.  A tuple, not a
    dataclass: one is built per message on the broker's hottest path."""

    topic: str
    queue_id: int
    body: bytes
    properties: str | bytes
    extra: bytes
    properties_len: int
    sysflag: int
    flag: int
    born_timestamp: int
    born_host: HostAddress
    store_host: HostAddress
    reconsume_times: int


@dataclass(slots=True)
class InnerBatch:
    """A client batch: each item becomes one record, contiguous, with consecutive offsets.

    queueId, sysflag, born/store hosts and reconsume times apply to every item; ``properties``
    (the batch-level properties, e.g. CLUSTER) are appended to each item's own.
    """

    topic: str
    queue_id: int
    items: list[BatchItem] = field(default_factory=list)
    properties: str | Mapping[str, str] = ""
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("127.0.0.1", 0)
    store_host: HostAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    # The client batch body itself, when ``accel.native.scan_batch`` accepted it: the store
    # then writes the records straight from it (``items`` stays empty).  ``raw_scan`` is what
    # scan_batch answered: (item count, size of the records without their topic fields).
    raw: bytes | None = None
    raw_scan: tuple[int, int] = (0, 0)

    @classmethod
    def from_body(cls, topic: str, queue_id: int, body: bytes, **kwargs: object) -> InnerBatch:
        """Build from a client batch body (docs/protocol.md, Client batch body); ValueError if it is malformed.

        A C++ 1.2.3 client may have zlib-compressed the whole body (sysflag bit 0): the broker
        must inflate it and clear that bit first.
        """
        return cls(topic, queue_id, decode_batch(body), **kwargs)  # type: ignore[arg-type]
