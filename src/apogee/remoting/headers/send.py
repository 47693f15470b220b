"""Headers of sending: SEND_MESSAGE (V1), SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (single-letter
keys; SEND_REPLY_MESSAGE(_V2) use the same two), the send response, CONSUMER_SEND_MSG_BACK and
PUSH_REPLY_MESSAGE_TO_CLIENT.  Field names from RocketMQ's ``SendMessageRequestHeader(V2)``,
``SendMessageResponseHeader``, ``ConsumerSendMsgBackRequestHeader``,
``ReplyMessageRequestHeader``."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, Int32, Int64, wire


@dataclass
class SendMessageRequestHeader(Header):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: Int32 | None = None


@dataclass
class SendMessageRequestHeaderV2(Header):
    """The same fields under one-letter keys, to shorten every frame (Java's V2 header)."""

    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: Int32 = wire("d")
    queue_id: Int32 = wire("e")
    sys_flag: Int32 = wire("f")
    born_timestamp: Int64 = wire("g")
    flag: Int32 = wire("h")
    properties: str | None = wire("i", None)
    reconsume_times: Int32 | None = wire("j", None)
    unit_mode: bool | None = wire("k", None)
    max_reconsume_times: Int32 | None = wire("l", None)
    batch: bool | None = wire("m", None)

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            self.producer_group, self.topic, self.default_topic, self.default_topic_queue_nums,
            self.queue_id, self.sys_flag, self.born_timestamp, self.flag, self.properties,
            self.reconsume_times, self.unit_mode, self.batch, self.max_reconsume_times,
        )

    @classmethod
    def from_v1(cls, h: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(
            h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums, h.queue_id,
            h.sys_flag, h.born_timestamp, h.flag, h.properties, h.reconsume_times, h.unit_mode,
            h.max_reconsume_times, h.batch,
        )


@dataclass
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: Int32
    queue_offset: Int64
    transaction_id: str | None = None


@dataclass
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT: a reply the broker pushes to the requesting client, the
    replier's send header plus where and when the broker took it."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: Int64
    flag: Int32
    born_host: str  # the replier, "ip:port"
    store_host: str  # the broker, "ip:port"
    store_timestamp: Int64
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool | None = None


@dataclass
class ConsumerSendMsgBackRequestHeader(Header):
    offset: Int64
    group: str
    delay_level: Int32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: Int32 | None = None


@dataclass
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: Int64
    commit_log_offset: Int64
    commit_or_rollback: Int32
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: Int64
    commit_log_offset: Int64
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
