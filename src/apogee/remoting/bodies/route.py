"""JSON bodies of route data: TopicRouteData, ClusterInfo, TopicList, KVTable, RegisterBrokerBody.

Field names and nesting follow RocketMQ's ``TopicRouteData``, ``QueueData``, ``BrokerData``,
``ClusterInfo``, ``TopicConfigSerializeWrapper`` and ``RegisterBrokerBody``.  Map keys are
always written quoted (``{"0":"ip:port"}``), which the C++, Node and Java clients all read.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from apogee.common.lenient_json import loads
from apogee.errors import HeaderError

MASTER_ID = 0


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> QueueData:
        return cls(
            broker_name=str(obj["brokerName"]),
            read_queue_nums=int(obj.get("readQueueNums", 0)),
            write_queue_nums=int(obj.get("writeQueueNums", 0)),
            perm=int(obj.get("perm", 0)),
            topic_sys_flag=int(obj.get("topicSysFlag", obj.get("topicSynFlag", 0))),
        )


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BrokerData:
        return cls(
            cluster=str(obj.get("cluster", "")),
            broker_name=str(obj["brokerName"]),
            broker_addrs={int(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()},
        )

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
            "queueDatas": [q.to_json() for q in self.queue_datas],
        }
        if self.order_topic_conf:
            obj["orderTopicConf"] = self.order_topic_conf
        return orjson.dumps(obj)

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        obj = loads(body)
        return cls(
            queue_datas=[QueueData.from_json(q) for q in obj.get("queueDatas") or []],
            broker_datas=[BrokerData.from_json(b) for b in obj.get("brokerDatas") or []],
            order_topic_conf=obj.get("orderTopicConf"),
            filter_server_table=obj.get("filterServerTable") or {},
        )


@dataclass
class TopicConfigData:
    """One entry of a broker's ``topicConfigTable`` as the NameServer needs it."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicConfigData:
        return cls(
            topic_name=str(obj["topicName"]),
            read_queue_nums=int(obj.get("readQueueNums", 16)),
            write_queue_nums=int(obj.get("writeQueueNums", 16)),
            perm=int(obj.get("perm", 6)),
            topic_filter_type=str(obj.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(obj.get("topicSysFlag", 0)),
            order=bool(obj.get("order", False)),
        )


@dataclass
class DataVersion:
    timestamp: int = 0
    counter: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> DataVersion:
        obj = obj or {}
        counter = obj.get("counter", 0)
        if isinstance(counter, dict):  # a Java AtomicLong written by an old fastjson
            counter = counter.get("value", 0)
        return cls(timestamp=int(obj.get("timestamp", 0)), counter=int(counter))


@dataclass
class RegisterBrokerBody:
    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: dict[str, TopicConfigData] = field(default_factory=dict)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "filterServerList": self.filter_server_list,
                "topicConfigSerializeWrapper": {
                    "dataVersion": self.data_version.to_json(),
                    "topicConfigTable": {
                        name: tc.to_json() for name, tc in self.topic_configs.items()
                    },
                },
            }
        )

    @classmethod
    def decode(cls, body: bytes | None, compressed: bool) -> RegisterBrokerBody:
        """Parse either form RocketMQ brokers send; raise ``HeaderError`` when malformed."""
        if not body:
            return cls()
        try:
            if compressed:
                return cls._decode_compressed(body)
            obj = loads(body)
            wrapper = obj.get("topicConfigSerializeWrapper") or {}
            table = wrapper.get("topicConfigTable") or {}
            return cls(
                data_version=DataVersion.from_json(wrapper.get("dataVersion")),
                topic_configs={
                    name: TopicConfigData.from_json({"topicName": name, **tc})
                    for name, tc in table.items()
                },
                filter_server_list=[str(s) for s in obj.get("filterServerList") or []],
            )
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error, struct.error) as exc:
            raise HeaderError(f"malformed register-broker body: {exc}") from None

    @classmethod
    def _decode_compressed(cls, body: bytes) -> RegisterBrokerBody:
        # RegisterBrokerBody.encode(true): zlib of [len+DataVersion JSON][count]
        # [len+"name read write perm filterType"]*count [len+filterServerList JSON]
        raw = zlib.decompressobj().decompress(body, 64 * 1024 * 1024)
        pos = 0

        def chunk() -> bytes:
            nonlocal pos
            (n,) = struct.unpack_from(">i", raw, pos)
            if n < 0 or pos + 4 + n > len(raw):
                raise ValueError("truncated compressed register body")
            data = raw[pos + 4 : pos + 4 + n]
            pos += 4 + n
            return data

        version = DataVersion.from_json(loads(chunk()))
        (count,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        topics: dict[str, TopicConfigData] = {}
        for _ in range(count):
            parts = chunk().decode().split(" ")
            name = parts[0]
            topics[name] = TopicConfigData(
                topic_name=name,
                read_queue_nums=int(parts[1]),
                write_queue_nums=int(parts[2]),
                perm=int(parts[3]),
                topic_filter_type=parts[4] if len(parts) > 4 else "SINGLE_TAG",
            )
        servers = loads(chunk()) if pos < len(raw) else []
        return cls(version, topics, [str(s) for s in servers or []])


def encode_cluster_info(
    broker_addr_table: dict[str, BrokerData], cluster_addr_table: dict[str, set[str]]
) -> bytes:
    return orjson.dumps(
        {
            "brokerAddrTable": {n: b.to_json() for n, b in sorted(broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(n) for c, n in sorted(cluster_addr_table.items())},
        }
    )


def decode_cluster_info(body: bytes) -> tuple[dict[str, BrokerData], dict[str, list[str]]]:
    obj = loads(body)
    brokers = {n: BrokerData.from_json(b) for n, b in (obj.get("brokerAddrTable") or {}).items()}
    clusters = {c: list(v) for c, v in (obj.get("clusterAddrTable") or {}).items()}
    return brokers, clusters


def encode_topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    obj: dict[str, Any] = {"topicList": topics}
    if broker_addr is not None:
        obj["brokerAddr"] = broker_addr
    return orjson.dumps(obj)


def decode_topic_list(body: bytes) -> list[str]:
    return [str(t) for t in loads(body).get("topicList") or []]


def encode_kv_table(table: dict[str, str]) -> bytes:
    return orjson.dumps({"table": table})


def decode_kv_table(body: bytes | None) -> dict[str, str]:
    if not body:
        return {}
    return {str(k): str(v) for k, v in (loads(body).get("table") or {}).items()}
