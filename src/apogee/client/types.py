"""Plain values of the client API: send and pull results, consume results, enums.

Kept apart from the classes that produce them so that pure modules (allocation, process
queue, offset arithmetic) and user code can import them without pulling in asyncio.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from apogee.common.message import MessageExt, MessageQueue


class SendStatus(enum.Enum):
    """How a broker stored a message (RocketMQ's SendStatus)."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 12
    SLAVE_NOT_AVAILABLE = 11


class SendResult(NamedTuple):
    """The outcome of one sent message.

    ``msg_id`` is the client-side unique id (UNIQ_KEY) the consumer sees as ``msg_id``;
    ``offset_msg_id`` is the broker's id (store host + CommitLog offset).
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = ""
    trace_on: bool = False


class MessageModel(enum.Enum):
    """CLUSTERING: the group shares the queues; BROADCASTING: every consumer gets all."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    """Where a consumer group with no committed offset starts (only for new groups)."""

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    """What a listener returns.

    ``CONSUME_SUCCESS``: done.  ``RECONSUME_LATER``: concurrently, the messages go to the
    group's retry topic (or DLQ past the max reconsume times); orderly, it means the same as
    ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the queue pauses and the messages are retried locally,
    keeping their order.  A listener that returns ``None`` succeeded; one that raises asked
    for ``RECONSUME_LATER``.
    """

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    """One pull: its status, where to pull next, the queue's bounds and the messages.

    ``messages`` holds only those matching the subscription's tags (the broker filters by
    tag hash; the client filters again by tag string, as RocketMQ clients do).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


@dataclass(slots=True)
class ConsumeContext:
    """Passed to a listener with its messages.

    Concurrent listeners may set ``delay_level_when_next_consume`` (0: the broker picks
    3 + reconsume times; -1: straight to the DLQ) and ``ack_index`` (the last message of the
    batch that succeeded when returning CONSUME_SUCCESS; the others are retried).  Orderly
    listeners may set ``suspend_current_queue_time_ms``.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1
    suspend_current_queue_time_ms: int = -1
