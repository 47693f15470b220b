"""PULL_MESSAGE request and response headers (RocketMQ ``PullMessageRequestHeader``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, Int32, Int64

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL_MESSAGE = 0x10


@dataclass
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32
    queue_offset: Int64
    max_msg_nums: Int32
    sys_flag: Int32
    commit_offset: Int64
    suspend_timeout_millis: Int64
    sub_version: Int64
    subscription: str | None = None
    expression_type: str | None = None


@dataclass
class PullMessageResponseHeader(Header):
    """All four fields must be present on every status: the C++ and Node clients need them."""

    suggest_which_broker_id: Int64
    next_begin_offset: Int64
    min_offset: Int64
    max_offset: Int64
