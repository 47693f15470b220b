"""Headers of sending: SEND_MESSAGE (V1), SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (single-letter
keys), the send response, and CONSUMER_SEND_MSG_BACK.  Field names from RocketMQ's
``SendMessageRequestHeader(V2)``, ``SendMessageResponseHeader``,
``ConsumerSendMsgBackRequestHeader``."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, wire


@dataclass
class SendMessageRequestHeader(Header):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None


@dataclass
class SendMessageRequestHeaderV2(Header):
    """The same fields under one-letter keys, to shorten every frame (Java's V2 header)."""

    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: int = wire("d")
    queue_id: int = wire("e")
    sys_flag: int = wire("f")
    born_timestamp: int = wire("g")
    flag: int = wire("h")
    properties: str | None = wire("i", None)
    reconsume_times: int | None = wire("j", None)
    unit_mode: bool | None = wire("k", None)
    max_reconsume_times: int | None = wire("l", None)
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
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None


@dataclass
class ConsumerSendMsgBackRequestHeader(Header):
    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None


@dataclass
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
