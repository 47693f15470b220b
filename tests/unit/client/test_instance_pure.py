"""Route tables -> queues, and the reset-offset body, without a network."""

from __future__ import annotations

import orjson

from apogee.client.instance import parse_reset_offset_body, publish_queues, subscribe_queues
from apogee.common.message import MessageQueue
from apogee.remoting.bodies.route import BrokerData, QueueData, TopicRouteData


def route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[
            QueueData("b", 2, 2, 6),
            QueueData("a", 3, 1, 6),
            QueueData("ro", 2, 2, 4),
            QueueData("noaddr", 1, 1, 6),
        ],
        broker_datas=[
            BrokerData("c", "a", {0: "1.1.1.1:1"}),
            BrokerData("c", "b", {0: "2.2.2.2:1"}),
            BrokerData("c", "ro", {0: "3.3.3.3:1"}),
            BrokerData("c", "noaddr", {1: "4.4.4.4:1"}),
        ],
    )


def test_publish_queues_are_writable_with_a_master_in_broker_order() -> None:
    queues, order = publish_queues("T", route())
    assert not order
    assert queues == [MessageQueue("T", "a", 0), MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]


def test_order_topic_conf_wins() -> None:
    r = route()
    r.order_topic_conf = "b:2;a:1"
    queues, order = publish_queues("T", r)
    assert order and queues == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1), MessageQueue("T", "a", 0)]


def test_subscribe_queues_are_the_readable_ones() -> None:
    assert subscribe_queues("T", route()) == {MessageQueue("T", "a", i) for i in range(3)} | {
        MessageQueue("T", "b", i) for i in range(2)
    } | {MessageQueue("T", "ro", i) for i in range(2)} | {MessageQueue("T", "noaddr", 0)}


def test_reset_offset_body_in_both_shapes() -> None:
    for_c = orjson.dumps({"offsetTable": [{"brokerName": "b", "queueId": 1, "topic": "T", "offset": 5}]})
    assert parse_reset_offset_body(for_c) == {MessageQueue("T", "b", 1): 5}
    entries = orjson.dumps({"offsetTable": [{"mq": {"brokerName": "b", "queueId": 2, "topic": "T"}, "offset": 9}]})
    assert parse_reset_offset_body(entries) == {MessageQueue("T", "b", 2): 9}
