from __future__ import annotations

import pytest

from apogee.broker.clients import ClientChannel, ClientManager
from apogee.errors import HeaderError
from apogee.remoting.bodies.heartbeat import HeartbeatData


def cpp_heartbeat(client_id: str) -> bytes:
    # What the C++ client sends: enum ordinals, string subVersion, no empty arrays.
    return (
        '{"clientID":"' + client_id + '","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
        '"groupName":"G","messageModel":1,"subscriptionDataSet":[{"codeSet":[2598919],"subString":"TagA",'
        '"subVersion":"1700000000000","tagsSet":["TagA"],"topic":"T"}]}]}'
    ).encode()


def test_heartbeat_of_the_cpp_client_parses() -> None:
    hb = HeartbeatData.decode(cpp_heartbeat("123-10.0.0.5@DEFAULT"))
    (consumer,) = hb.consumers
    assert consumer.consume_type == "CONSUME_PASSIVELY" and consumer.message_model == "CLUSTERING"
    assert consumer.subscriptions[0].sub_version == 1700000000000
    assert consumer.subscriptions[0].code_set == [2598919]


def test_heartbeat_with_names_and_bad_enum() -> None:
    hb = HeartbeatData.decode(
        b'{"clientID":"x","consumerDataSet":[{"groupName":"G","messageModel":"BROADCASTING"}],'
        b'"producerDataSet":[{"groupName":"P"}]}'
    )
    assert hb.consumers[0].message_model == "BROADCASTING" and hb.producer_groups == ["P"]
    with pytest.raises(HeaderError, match="messageModel"):
        HeartbeatData.decode(b'{"clientID":"x","consumerDataSet":[{"groupName":"G","messageModel":7}]}')
    with pytest.raises(HeaderError):
        HeartbeatData.decode(b"not json")


def test_membership_changes_are_reported() -> None:
    clients = ClientManager()
    a, b = object(), object()
    (data,) = HeartbeatData.decode(cpp_heartbeat("a")).consumers
    assert clients.register_consumer(data, ClientChannel(a, "a", 1, 63, 0)) is True
    assert clients.register_consumer(data, ClientChannel(a, "a", 1, 63, 1000)) is False
    assert clients.register_consumer(data, ClientChannel(b, "b", 1, 63, 1000)) is True
    assert clients.consumer_group("G").client_ids() == ["a", "b"]
    assert clients.expired_connections(now_ms=121_001, timeout_ms=120_000) == [a, b]
    assert clients.remove_connection(a) == ["G"]
    assert clients.consumer_group("G").client_ids() == ["b"]
    assert clients.subscription("G", "T").sub_string == "TagA"


def test_a_producer_client_is_found_by_its_id_while_it_holds_a_producer_group() -> None:
    clients = ClientManager()
    a, a2, b = object(), object(), object()
    clients.register_producer("P", ClientChannel(a, "client-a", 0, 0, 0))
    clients.register_producer("INNER", ClientChannel(a, "client-a", 0, 0, 0))
    clients.register_producer("P", ClientChannel(b, "client-b", 0, 0, 0))
    assert clients.find_producer_channel("client-a").conn is a  # type: ignore[union-attr]
    assert clients.find_producer_channel("nobody") is None
    clients.unregister_producer("P", a)  # still a producer of INNER
    assert clients.find_producer_channel("client-a").conn is a  # type: ignore[union-attr]
    clients.register_producer("P", ClientChannel(a2, "client-a", 0, 0, 0))  # reconnected
    clients.remove_connection(a)  # the old connection going does not forget the new one
    assert clients.find_producer_channel("client-a").conn is a2  # type: ignore[union-attr]
    clients.remove_connection(a2)
    assert clients.find_producer_channel("client-a") is None
    assert clients.find_producer_channel("client-b").conn is b  # type: ignore[union-attr]
