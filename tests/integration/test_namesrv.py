"""A real ``apogee namesrv`` process, driven over TCP as brokers and clients drive it."""

from __future__ import annotations

import asyncio
import socket
import struct

import orjson
import pytest

from apogee.remoting.bodies.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigData,
    TopicRouteData,
    decode_cluster_info,
    decode_kv_table,
    decode_topic_list,
)
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.namesrv import RegisterBrokerRequestHeader
from tests.support.processes import ServerProcess
from tests.support.waiting import wait_until

TIMEOUT_MS = 3000


def register_request(
    broker_name: str = "broker-a",
    addr: str = "127.0.0.1:10911",
    topics: tuple[str, ...] = ("TopicA",),
    broker_id: int = 0,
    queues: int = 4,
) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=addr,
        cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:10912",
        broker_id=broker_id,
    )
    body = RegisterBrokerBody(
        DataVersion(timestamp=1, counter=1),
        {t: TopicConfigData(t, read_queue_nums=queues, write_queue_nums=queues) for t in topics},
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.encode(), body.encode())


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def test_registered_broker_appears_in_route_and_cluster_info(namesrv: ServerProcess) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(namesrv.addr, register_request(topics=("TopicA", "TopicB")), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
        assert decode_kv_table(resp.body_bytes()) == {}

        resp = await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
        route = TopicRouteData.decode(resp.body_bytes())
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
            ("broker-a", 4, 4, 6)
        ]
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
        assert route.broker_datas[0].cluster == "DefaultCluster"
        # Map keys must be quoted strings: standard JSON every RocketMQ client parses.
        raw = orjson.loads(resp.body_bytes())
        assert raw["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}

        resp = await client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT_MS
        )
        brokers, clusters = decode_cluster_info(resp.body_bytes())
        assert clusters == {"DefaultCluster": ["broker-a"]}
        assert brokers["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}

        resp = await client.invoke(
            namesrv.addr,
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            TIMEOUT_MS,
        )
        assert decode_topic_list(resp.body_bytes()) == ["TopicA", "TopicB"]
    finally:
        await client.close()


async def test_unknown_topic_answers_topic_not_exist(namesrv: ServerProcess) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(namesrv.addr, route_request("NoSuchTopic"), TIMEOUT_MS)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopic" in (resp.remark or "")
        assert resp.body is None
    finally:
        await client.close()


async def route_gone(client: RemotingClient, namesrv: ServerProcess) -> bool:
    resp = await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)
    return resp.code == ResponseCode.TOPIC_NOT_EXIST


async def test_silent_broker_expires(fast_expiring_namesrv: ServerProcess) -> None:
    namesrv = fast_expiring_namesrv
    client = RemotingClient()
    try:
        resp = await client.invoke(namesrv.addr, register_request(), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
        resp = await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
        # The connection stays open but no registration follows: the scan drops it.
        await wait_until(lambda: route_gone(client, namesrv), 10, "the route of the silent broker to go")
        resp = await client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT_MS
        )
        assert decode_cluster_info(resp.body_bytes()) == ({}, {})
    finally:
        await client.close()


async def test_reregistering_broker_stays(fast_expiring_namesrv: ServerProcess) -> None:
    namesrv = fast_expiring_namesrv
    client = RemotingClient()
    try:
        for _ in range(12):  # 2.4 s of registrations every 200 ms outlive the 1.5 s window
            resp = await client.invoke(namesrv.addr, register_request(), TIMEOUT_MS)
            assert resp.code == ResponseCode.SUCCESS
            await asyncio.sleep(0.2)
        resp = await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def test_unregister_removes_broker_and_its_topics(namesrv: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(namesrv.addr, register_request("broker-a", "127.0.0.1:1001"), TIMEOUT_MS)
        await client.invoke(namesrv.addr, register_request("broker-b", "127.0.0.1:1002"), TIMEOUT_MS)
        route = TopicRouteData.decode(
            (await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)).body_bytes()
        )
        assert sorted(b.broker_name for b in route.broker_datas) == ["broker-a", "broker-b"]
        unregister = RemotingCommand.request(
            RequestCode.UNREGISTER_BROKER,
            {
                "brokerName": "broker-a",
                "brokerAddr": "127.0.0.1:1001",
                "clusterName": "DefaultCluster",
                "brokerId": "0",
            },
        )
        assert (await client.invoke(namesrv.addr, unregister, TIMEOUT_MS)).code == ResponseCode.SUCCESS
        route = TopicRouteData.decode(
            (await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)).body_bytes()
        )
        assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    finally:
        await client.close()


async def test_closing_the_broker_connection_removes_it(namesrv: ServerProcess) -> None:
    broker = RemotingClient()
    client = RemotingClient()
    try:
        await broker.invoke(namesrv.addr, register_request(), TIMEOUT_MS)
        assert (await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)).code == ResponseCode.SUCCESS
        await broker.close()
        await wait_until(lambda: route_gone(client, namesrv), 5, "the route of the closed broker to go")
    finally:
        await client.close()


async def test_unknown_code_and_bad_header_get_error_responses(namesrv: ServerProcess) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(namesrv.addr, RemotingCommand.request(9999), TIMEOUT_MS)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "9999" in (resp.remark or "")
        resp = await client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), TIMEOUT_MS
        )
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "the custom field <topic> is null"
        bad = register_request()
        bad.body = b"{not json"
        resp = await client.invoke(namesrv.addr, bad, TIMEOUT_MS)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "register-broker body" in (resp.remark or "")
        # The connection is still usable after the errors.
        resp = await client.invoke(namesrv.addr, route_request("X"), TIMEOUT_MS)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await client.close()


def _raw_connect(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff\xff" + b"x" * 16,  # negative length
        struct.pack(">i", 64 * 1024 * 1024) + b"x" * 16,  # over the 16 MiB limit
        struct.pack(">ii", 12, 8) + b"{notjson",  # JSON that does not parse
        struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd",  # unknown serialize type
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # the wrong protocol altogether
    ],
)
async def test_garbage_on_one_connection_does_not_disturb_another(
    namesrv: ServerProcess, garbage: bytes
) -> None:
    client = RemotingClient()
    try:
        await client.invoke(namesrv.addr, register_request(), TIMEOUT_MS)
        sock = _raw_connect(namesrv.addr)
        try:
            sock.sendall(garbage)
            sock.settimeout(5)
            # The server closes the offending connection (EOF), it does not hang or crash.
            assert await asyncio.to_thread(sock.recv, 100) == b""
        finally:
            sock.close()
        resp = await client.invoke(namesrv.addr, route_request("TopicA"), TIMEOUT_MS)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def test_kv_config_round_trip_and_persistence(tmp_path, namesrv: ServerProcess) -> None:
    client = RemotingClient()
    try:
        put = RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
        )
        assert (await client.invoke(namesrv.addr, put, TIMEOUT_MS)).code == ResponseCode.SUCCESS
        get = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
        resp = await client.invoke(namesrv.addr, get, TIMEOUT_MS)
        assert resp.ext_fields == {"value": "broker-a:4"}
        # The registration answer carries the ORDER_TOPIC_CONFIG namespace, as in RocketMQ.
        resp = await client.invoke(namesrv.addr, register_request(), TIMEOUT_MS)
        assert decode_kv_table(resp.body_bytes()) == {"T": "broker-a:4"}
    finally:
        await client.close()
    saved = orjson.loads((tmp_path / "namesrv" / "kvConfig.json").read_bytes())
    assert saved == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}}


async def test_two_nameservers_are_independent(tmp_path) -> None:
    from tests.support.processes import start_namesrv

    a = start_namesrv(tmp_path / "a")
    b = start_namesrv(tmp_path / "b")
    client = RemotingClient()
    try:
        await client.invoke(a.addr, register_request(), TIMEOUT_MS)
        assert (await client.invoke(a.addr, route_request("TopicA"), TIMEOUT_MS)).code == ResponseCode.SUCCESS
        assert (await client.invoke(b.addr, route_request("TopicA"), TIMEOUT_MS)).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await client.close()
        a.close()
        b.close()


def test_sigterm_stops_cleanly(namesrv: ServerProcess) -> None:
    assert namesrv.stop() == 0
    assert "stopped" in namesrv.stderr()
