"""PULL_MESSAGE request and response headers (RocketMQ ``PullMessageRequestHeader``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL_MESSAGE = 0x10


@dataclass
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None


@dataclass
class PullMessageResponseHeader(Header):
    """All four fields must be present on every status: the C++ and Node clients need them."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
