"""Headers of consumer management, offsets and queries (RocketMQ ``header/*``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, Int32, Int64, Perm, wire


@dataclass
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32


@dataclass
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32
    commit_offset: Int64


@dataclass
class OffsetResponseHeader(Header):
    """QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: Int64


@dataclass
class TopicQueueRequestHeader(Header):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str
    queue_id: Int32


@dataclass
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: Int32
    timestamp: Int64
    # RocketMQ 5's BoundaryType ("LOWER" / "UPPER"); 4.x clients leave it out.
    boundary_type: str | None = None


@dataclass
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: Int64


@dataclass
class ViewMessageRequestHeader(Header):
    offset: Int64


@dataclass
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: Int32
    begin_timestamp: Int64
    end_timestamp: Int64


@dataclass
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: Int64
    index_last_update_phyoffset: Int64


@dataclass
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str


@dataclass
class UnregisterClientRequestHeader(Header):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


@dataclass
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str = "TBW102"
    read_queue_nums: Int32 = 16
    write_queue_nums: Int32 = 16
    perm: Perm = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: Int32 | None = None
    order: bool = False


@dataclass
class DeleteTopicRequestHeader(Header):
    topic: str


@dataclass
class ResetOffsetRequestHeader(Header):
    topic: str
    group: str
    timestamp: Int64
    is_force: bool = False


@dataclass
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307): to a broker, which relays it to the client; to a client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclass
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309): ``msg_id`` names the message (the broker puts it in the
    body of the request it relays, and its own ``broker_name``)."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
