"""What a consumer answers about itself, in RocketMQ's shapes: ConsumerRunningInfo
(GET_CONSUMER_RUNNING_INFO, 307) and ConsumeMessageDirectlyResult (CONSUME_MESSAGE_DIRECTLY, 309).

fastjson writes a bean's fields in alphabetical order and leaves out nulls; ConsumerRunningInfo's
``mqTable`` is a ``TreeMap<MessageQueue, ProcessQueueInfo>``, written with the MessageQueue
object as the key (``encode_queue_map``), and its ``subscriptionSet`` a TreeSet ordered by
``topic@subString``.  Decoding takes what Java clients write too (the admin side reads both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from apogee.errors import HeaderError
from apogee.remoting.bodies.admin import _load, _queue_map, encode_queue_map
from apogee.remoting.bodies.heartbeat import QueueKey, SubscriptionData

# ConsumerRunningInfo's property names (Java's constants).
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"

# CMResult: how a message consumed directly ended.
CR_SUCCESS = "CR_SUCCESS"
CR_LATER = "CR_LATER"
CR_ROLLBACK = "CR_ROLLBACK"
CR_COMMIT = "CR_COMMIT"
CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass
class ProcessQueueInfo:
    """One owned queue of a push consumer (RocketMQ's ProcessQueue.fillProcessQueueInfo)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic: RocketMQ's field name
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cachedMsgCount": self.cached_msg_count,
            "cachedMsgMaxOffset": self.cached_msg_max_offset,
            "cachedMsgMinOffset": self.cached_msg_min_offset,
            "cachedMsgSizeInMiB": self.cached_msg_size_in_mib,
            "commitOffset": self.commit_offset,
            "droped": self.droped,
            "lastConsumeTimestamp": self.last_consume_timestamp,
            "lastLockTimestamp": self.last_lock_timestamp,
            "lastPullTimestamp": self.last_pull_timestamp,
            "locked": self.locked,
            "transactionMsgCount": self.transaction_msg_count,
            "transactionMsgMaxOffset": self.transaction_msg_max_offset,
            "transactionMsgMinOffset": self.transaction_msg_min_offset,
            "tryUnlockTimes": self.try_unlock_times,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ProcessQueueInfo:
        j = cls().to_json()
        values = {k: type(v)(obj.get(k, v)) for k, v in j.items()}
        return cls(
            values["commitOffset"], values["cachedMsgMinOffset"], values["cachedMsgMaxOffset"],
            values["cachedMsgCount"], values["cachedMsgSizeInMiB"], values["transactionMsgMinOffset"],
            values["transactionMsgMaxOffset"], values["transactionMsgCount"], values["locked"],
            values["tryUnlockTimes"], values["lastLockTimestamp"], values["droped"], values["lastPullTimestamp"],
            values["lastConsumeTimestamp"],
        )


@dataclass
class ConsumeStatus:
    """A group's figures on one topic in this client (RocketMQ's ConsumerStatsManager): pull
    and consume RT in ms and TPS over the last minute, failures over the last hour."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFailedMsgs": self.consume_failed_msgs,
            "consumeFailedTPS": self.consume_failed_tps,
            "consumeOKTPS": self.consume_ok_tps,
            "consumeRT": self.consume_rt,
            "pullRT": self.pull_rt,
            "pullTPS": self.pull_tps,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ConsumeStatus:
        return cls(
            float(obj.get("pullRT", 0)), float(obj.get("pullTPS", 0)), float(obj.get("consumeRT", 0)),
            float(obj.get("consumeOKTPS", 0)), float(obj.get("consumeFailedTPS", 0)),
            int(obj.get("consumeFailedMsgs", 0)),
        )


@dataclass
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[QueueKey, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def encode(self) -> bytes:
        subs = sorted(self.subscriptions, key=lambda s: f"{s.topic}@{s.sub_string}")
        parts = []
        if self.jstack is not None:
            parts.append(b'"jstack":' + orjson.dumps(self.jstack))
        parts.append(b'"mqTable":' + encode_queue_map(self.mq_table))
        parts.append(b'"properties":' + orjson.dumps(self.properties))
        parts.append(b'"statusTable":' + orjson.dumps({t: self.status_table[t].to_json()
                                                        for t in sorted(self.status_table)}))
        parts.append(b'"subscriptionSet":' + orjson.dumps([s.to_json() for s in subs]))
        return b"{" + b",".join(parts) + b"}"

    @classmethod
    def decode(cls, body: bytes) -> ConsumerRunningInfo:
        return cls.from_json(_load(body, "ConsumerRunningInfo"))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ConsumerRunningInfo:
        """From the parsed body (``loads_keyed``: ``mqTable`` as object-keyed pairs)."""
        try:
            return cls(
                properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
                subscriptions=[SubscriptionData.from_json(s) for s in obj.get("subscriptionSet") or []],
                mq_table={q: ProcessQueueInfo.from_json(v) for q, v in _queue_map(obj.get("mqTable"), "mqTable")},
                status_table={str(t): ConsumeStatus.from_json(v) for t, v in (obj.get("statusTable") or {}).items()},
                jstack=obj.get("jstack"),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise HeaderError(f"malformed ConsumerRunningInfo body: {exc!r}") from None


@dataclass
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None  # a CR_* name
    remark: str | None = None
    spent_time_mills: int = 0

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"autoCommit": self.auto_commit}
        if self.consume_result is not None:
            obj["consumeResult"] = self.consume_result
        obj["order"] = self.order
        if self.remark is not None:
            obj["remark"] = self.remark
        obj["spentTimeMills"] = self.spent_time_mills
        return orjson.dumps(obj)

    @classmethod
    def decode(cls, body: bytes) -> ConsumeMessageDirectlyResult:
        obj = _load(body, "ConsumeMessageDirectlyResult")
        return cls(bool(obj.get("order", False)), bool(obj.get("autoCommit", True)), obj.get("consumeResult"),
                   obj.get("remark"), int(obj.get("spentTimeMills", 0)))
