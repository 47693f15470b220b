"""Headers of consumer management, offsets and queries (RocketMQ ``header/*``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, wire


@dataclass
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int


@dataclass
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass
class OffsetResponseHeader(Header):
    """QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int


@dataclass
class TopicQueueRequestHeader(Header):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str
    queue_id: int


@dataclass
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    timestamp: int


@dataclass
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: int


@dataclass
class ViewMessageRequestHeader(Header):
    offset: int


@dataclass
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


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
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int | None = None
    order: bool = False


@dataclass
class DeleteTopicRequestHeader(Header):
    topic: str


@dataclass
class ResetOffsetRequestHeader(Header):
    topic: str
    group: str
    timestamp: int
    is_force: bool = False
