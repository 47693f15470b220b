"""HeartbeatData (HEART_BEAT body) and the small consumer bodies around it.

Clients differ (reference section 4.2): C++ writes the enums as integers, omits empty
arrays and writes ``subVersion`` as a string; Node and Java write enum names.  The parser
accepts all of them and fails with ``HeaderError`` on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from apogee.common.lenient_json import dumps_keyed, loads
from apogee.errors import HeaderError

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")  # PULL, PUSH
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


def _enum(value: Any, names: tuple[str, ...], what: str) -> str:
    if isinstance(value, str):
        if value in names:
            return value
        if value.isdigit() and int(value) < len(names):
            return names[int(value)]
    elif type(value) is int and 0 <= value < len(names):
        return names[value]
    raise HeaderError(f"heartbeat {what} {value!r} is not one of {', '.join(names)}")


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": self.code_set,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionData:
        try:
            return cls(
                topic=str(obj["topic"]),
                sub_string=str(obj.get("subString") or "*"),
                tags_set=[str(t) for t in obj.get("tagsSet") or []],
                code_set=[int(c) for c in obj.get("codeSet") or []],
                sub_version=int(obj.get("subVersion") or 0),
                expression_type=str(obj.get("expressionType") or "TAG"),
                class_filter_mode=bool(obj.get("classFilterMode", False)),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise HeaderError(f"malformed subscription in heartbeat: {exc}") from None


@dataclass
class ConsumerData:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "groupName": self.group_name,
            "messageModel": self.message_model,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass
class HeartbeatData:
    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [c.to_json() for c in self.consumers],
                "producerDataSet": [{"groupName": g} for g in self.producer_groups],
            }
        )

    @classmethod
    def decode(cls, body: bytes | None) -> HeartbeatData:
        if not body:
            raise HeaderError("heartbeat without a body")
        try:
            obj = loads(body.rstrip(b"\x00"))
        except ValueError as exc:
            raise HeaderError(f"heartbeat body is not JSON: {exc}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("clientID"), str):
            raise HeaderError("heartbeat body lacks clientID")
        try:
            producers = [str(p["groupName"]) for p in obj.get("producerDataSet") or []]
            consumers = [
                ConsumerData(
                    group_name=str(c["groupName"]),
                    consume_type=_enum(c.get("consumeType", 1), CONSUME_TYPES, "consumeType"),
                    message_model=_enum(c.get("messageModel", 1), MESSAGE_MODELS, "messageModel"),
                    consume_from_where=_enum(
                        c.get("consumeFromWhere", 0), CONSUME_FROM_WHERE, "consumeFromWhere"
                    ),
                    subscriptions=[
                        SubscriptionData.from_json(s) for s in c.get("subscriptionDataSet") or []
                    ],
                    unit_mode=bool(c.get("unitMode", False)),
                )
                for c in obj.get("consumerDataSet") or []
            ]
        except (KeyError, TypeError, AttributeError) as exc:
            raise HeaderError(f"malformed heartbeat body: {exc!r}") from None
        return cls(obj["clientID"], producers, consumers)


def encode_consumer_id_list(ids: list[str]) -> bytes:
    return orjson.dumps({"consumerIdList": ids})


def decode_consumer_id_list(body: bytes) -> list[str]:
    return [str(i) for i in loads(body.rstrip(b"\x00")).get("consumerIdList") or []]


@dataclass(frozen=True)
class QueueKey:
    """MessageQueue as it appears in JSON bodies (lock requests, offset tables)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> QueueKey:
        try:
            return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise HeaderError(f"malformed message queue {obj!r}: {exc!r}") from None


@dataclass
class LockBatchRequest:
    consumer_group: str
    client_id: str
    mq_set: list[QueueKey]

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "clientId": self.client_id,
                "consumerGroup": self.consumer_group,
                "mqSet": [q.to_json() for q in self.mq_set],
            }
        )

    @classmethod
    def decode(cls, body: bytes | None) -> LockBatchRequest:
        try:
            obj = loads((body or b"").rstrip(b"\x00"))
            return cls(
                str(obj["consumerGroup"]),
                str(obj["clientId"]),
                [QueueKey.from_json(q) for q in obj.get("mqSet") or []],
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HeaderError(f"malformed lock request body: {exc!r}") from None


def encode_lock_ok(mqs: list[QueueKey]) -> bytes:
    return orjson.dumps({"lockOKMQSet": [q.to_json() for q in mqs]})


def decode_lock_ok(body: bytes | None) -> list[QueueKey]:
    if not body:
        return []
    return [QueueKey.from_json(q) for q in loads(body).get("lockOKMQSet") or []]


def encode_reset_offset_body(offsets: dict[QueueKey, int], *, java: bool) -> bytes:
    """ResetOffsetBody for RESET_CONSUMER_CLIENT_OFFSET and the admin answer.

    Java clients read fastjson's map with MessageQueue *objects* as keys (not standard JSON);
    every other client (C++ 1.2.3's ResetOffsetBodyForC, Apogee's own) reads a list.
    """
    if java:
        ordered = sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].queue_id))
        return b'{"offsetTable":' + dumps_keyed([(q.to_json(), off) for q, off in ordered]) + b"}"
    return orjson.dumps(
        {
            "offsetTable": [
                {**q.to_json(), "offset": off}
                for q, off in sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].queue_id))
            ]
        }
    )


def decode_reset_offset_body(body: bytes) -> dict[QueueKey, int]:
    """Read the list form written by ``encode_reset_offset_body(java=False)``."""
    table = loads(body).get("offsetTable") or []
    if not isinstance(table, list):
        raise HeaderError("offsetTable is not a list")
    return {QueueKey.from_json(item): int(item["offset"]) for item in table}
