"""Admin answer bodies in RocketMQ's shapes: TopicStatsTable (GET_TOPIC_STATS_INFO, 202),
ConsumeStats (GET_CONSUME_STATS, 208), BrokerStatsData (VIEW_BROKER_STATS_DATA, 315) and the
runtime-info table (GET_BROKER_RUNTIME_INFO, 28).

202 and 208 hold ``Map<MessageQueue, ...>``, which fastjson writes with the MessageQueue
object as the key; Java's tools parse only that, so it is what we write.  Decoding also takes
the list form (``[{"mq": {...}, ...}]``) Apogee brokers answered before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from apogee.common.lenient_json import KeyedPairs, dumps_keyed, loads_keyed
from apogee.errors import HeaderError
from apogee.remoting.bodies.heartbeat import QueueKey


@dataclass(frozen=True)
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, int]:  # fastjson's field order: alphabetical
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicOffset:
        return cls(int(obj.get("minOffset", 0)), int(obj.get("maxOffset", 0)), int(obj.get("lastUpdateTimestamp", 0)))


@dataclass(frozen=True)
class OffsetWrapper:
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    def to_json(self) -> dict[str, int]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> OffsetWrapper:
        return cls(int(obj.get("brokerOffset", 0)), int(obj.get("consumerOffset", 0)), int(obj.get("lastTimestamp", 0)))


def _sorted(table: dict[QueueKey, Any]) -> list[tuple[QueueKey, Any]]:
    return sorted(table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id))


def encode_queue_map(table: dict[QueueKey, Any]) -> bytes:
    """``Map<MessageQueue, V>`` as fastjson writes it; values have ``to_json``."""
    return dumps_keyed([(q.to_json(), v.to_json()) for q, v in _sorted(table)])


def _queue_map(raw: Any, what: str) -> list[tuple[QueueKey, dict[str, Any]]]:
    """Either form of a MessageQueue-keyed table, as (queue, value object) pairs."""
    if isinstance(raw, KeyedPairs):
        return [(QueueKey.from_json(k), v) for k, v in raw if isinstance(k, dict) and isinstance(v, dict)]
    if isinstance(raw, list):  # Apogee's earlier list form
        return [(QueueKey.from_json(item["mq"]), item) for item in raw if isinstance(item, dict)]
    if raw is None or raw == {}:
        return []
    raise HeaderError(f"{what} is neither an object-keyed map nor a list")


def _load(body: bytes, what: str) -> dict[str, Any]:
    try:
        obj = loads_keyed(body.rstrip(b"\x00"))
    except ValueError as exc:
        raise HeaderError(f"malformed {what} body: {exc}") from None
    if not isinstance(obj, dict):
        raise HeaderError(f"malformed {what} body: not an object")
    return obj


def encode_topic_stats(table: dict[QueueKey, TopicOffset]) -> bytes:
    return b'{"offsetTable":' + encode_queue_map(table) + b"}"


def decode_topic_stats(body: bytes) -> dict[QueueKey, TopicOffset]:
    obj = _load(body, "TopicStatsTable")
    return {q: TopicOffset.from_json(v) for q, v in _queue_map(obj.get("offsetTable"), "offsetTable")}


@dataclass
class ConsumeStats:
    offset_table: dict[QueueKey, OffsetWrapper]
    consume_tps: float

    def encode(self) -> bytes:
        tps = orjson.dumps(float(self.consume_tps))
        return b'{"consumeTps":' + tps + b',"offsetTable":' + encode_queue_map(self.offset_table) + b"}"

    @classmethod
    def decode(cls, body: bytes) -> ConsumeStats:
        return cls.from_json(_load(body, "ConsumeStats"))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ConsumeStats:
        table = {q: OffsetWrapper.from_json(v) for q, v in _queue_map(obj.get("offsetTable"), "offsetTable")}
        return cls(table, float(obj.get("consumeTps") or 0.0))


def encode_broker_consume_stats(groups: list[dict[str, list[ConsumeStats]]], total_diff: int) -> bytes:
    """ConsumeStatsList (GET_BROKER_CONSUME_STATS): ``consumeStatsList`` is a list of
    ``{group: [ConsumeStats, ...]}``; brokerAddr is filled by the tool."""
    parts = []
    for entry in groups:
        ((group, stats),) = entry.items()
        parts.append(b"{" + orjson.dumps(group) + b":[" + b",".join(s.encode() for s in stats) + b"]}")
    return b'{"consumeStatsList":[' + b",".join(parts) + b'],"totalDiff":' + str(total_diff).encode() + b"}"


def decode_broker_consume_stats(body: bytes) -> tuple[list[tuple[str, ConsumeStats]], int]:
    """ConsumeStatsList as (group, ConsumeStats of one topic) pairs, and ``totalDiff``."""
    obj = _load(body, "ConsumeStatsList")
    pairs: list[tuple[str, ConsumeStats]] = []
    for entry in obj.get("consumeStatsList") or []:
        for group, stats_list in (entry.items() if isinstance(entry, dict) else []):
            pairs.extend((str(group), ConsumeStats.from_json(s)) for s in stats_list or [] if isinstance(s, dict))
    return pairs, int(obj.get("totalDiff") or 0)


def encode_runtime_info(table: dict[str, str]) -> bytes:
    """KVTable: ``{"table": {key: value}}``, every value a string as Java's tools expect."""
    return orjson.dumps({"table": table})


def decode_runtime_info(body: bytes) -> dict[str, str]:
    table = _load(body, "KVTable").get("table") or {}
    if not isinstance(table, dict):
        raise HeaderError("KVTable.table is not an object")
    return {str(k): str(v) for k, v in table.items()}
