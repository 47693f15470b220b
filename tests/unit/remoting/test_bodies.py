from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from apogee.common.lenient_json import loads
from apogee.errors import HeaderError
from apogee.remoting.bodies.route import RegisterBrokerBody, TopicRouteData


def test_lenient_json_reads_fastjson_unquoted_integer_keys() -> None:
    text = b'{"offsetTable":{"T@G":{0:5,1:7}},"s":"{0:1}"}'
    assert loads(text) == {"offsetTable": {"T@G": {"0": 5, "1": 7}}, "s": "{0:1}"}


def test_route_from_a_java_namesrv_with_unquoted_keys() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
        b'"perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}'
    )
    route = TopicRouteData.decode(body)
    assert route.broker_datas[0].broker_addrs == {0: "192.168.1.10:10911"}
    assert route.queue_datas[0].read_queue_nums == 4


def test_register_body_compressed_form() -> None:
    def chunk(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    raw = (
        chunk(b'{"counter":3,"timestamp":99}')
        + struct.pack(">i", 1)
        + chunk(b"TopicA 8 8 6 SINGLE_TAG")
        + chunk(b"[]")
    )
    body = RegisterBrokerBody.decode(zlib.compress(raw, 9), compressed=True)
    assert (body.data_version.counter, body.data_version.timestamp) == (3, 99)
    assert body.topic_configs["TopicA"].read_queue_nums == 8


def test_register_body_round_trip_and_errors() -> None:
    raw = orjson.loads(RegisterBrokerBody().encode())
    assert raw == {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {"dataVersion": {"counter": 0, "timestamp": 0}, "topicConfigTable": {}},
    }
    with pytest.raises(HeaderError):
        RegisterBrokerBody.decode(b"\x00garbage", compressed=True)
    with pytest.raises(HeaderError):
        RegisterBrokerBody.decode(
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"x"}}}}', compressed=False
        )


def test_fastjson_object_keyed_maps_are_read_and_written() -> None:
    from apogee.common.lenient_json import KeyedPairs, dumps_keyed, loads_keyed
    from apogee.remoting.bodies.admin import ConsumeStats, OffsetWrapper, decode_topic_stats
    from apogee.remoting.bodies.heartbeat import QueueKey

    text = b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:' \
           b'{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":7}},"ids":{0:"a"}}'
    obj = loads_keyed(text)
    assert isinstance(obj["offsetTable"], KeyedPairs) and obj["ids"] == [(0, "a")]
    stats = ConsumeStats.decode(text)
    assert stats.consume_tps == 1.5 and stats.offset_table == {QueueKey("T", "b", 1): OffsetWrapper(9, 4, 7)}
    assert ConsumeStats.decode(stats.encode()) == stats
    assert dumps_keyed([({"a": 1}, 2)]) == b'{{"a":1}:2}'
    # The list form Apogee brokers answered before is still read.
    old = b'{"offsetTable":[{"mq":{"brokerName":"b","queueId":0,"topic":"T"},"minOffset":1,"maxOffset":3}]}'
    assert [(q.queue_id, o.max_offset) for q, o in decode_topic_stats(old).items()] == [(0, 3)]
    for bad in (b'{"a":', b'{{"a":1}}', b"[1,]", b'{"a":1} x', b"[" * 100 + b"]" * 100):
        with pytest.raises(ValueError):
            loads_keyed(bad)
