"""A real broker answers the operations requests in the shapes RocketMQ 4.9.8's Java tools
(mqadmin, Dashboard, rocketmq-exporter) parse: GET_BROKER_RUNTIME_INFO (28) with Java's keys
and value formats, GET_TOPIC_STATS_INFO (202) and GET_CONSUME_STATS (208) as fastjson's
MessageQueue-keyed maps, VIEW_BROKER_STATS_DATA (315); and its statistics count exactly what
was sent and pulled."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from apogee.admin.client import AdminClient
from apogee.cli.admin.topics import wait_for_route
from apogee.common.lenient_json import loads_keyed
from apogee.remoting.bodies.heartbeat import HeartbeatData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import UpdateConsumerOffsetRequestHeader
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.wire import pull_all, send_request, wait_dispatched

T = 5000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    base = tmp_path_factory.mktemp("ops")
    namesrv = start_namesrv(base / "ns")
    try:
        broker = start_broker(namesrv.addr, base / "store", "brokerName=broker-ops\n")
        yield namesrv, broker
        broker.close()
    finally:
        namesrv.close()


def java_queue_map(body: bytes, field: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``field`` read as fastjson reads ``Map<MessageQueue, V>``: an object whose keys are
    objects.  Standard JSON parsers refuse such text, so this walks it with the standard
    decoder one key and one value at a time, apart from Apogee's own decoder."""
    text = body.decode()
    decoder = json.JSONDecoder()
    pos = text.index(f'"{field}":') + len(field) + 3
    assert text[pos] == "{"
    pos += 1
    pairs = []
    while text[pos] != "}":
        key, pos = decoder.raw_decode(text, pos)
        assert isinstance(key, dict) and text[pos] == ":"
        value, pos = decoder.raw_decode(text, pos + 1)
        pairs.append((key, value))
        pos += text[pos] == ","
    return pairs


async def test_answers_in_rocketmqs_shapes_and_exact_counts(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    topic, group = unique("OpsTopic"), unique("OpsGroup")
    client = RemotingClient()
    try:
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, broker.addr, queues=2)
            await wait_for_route(admin, topic)
            for i in range(7):
                resp = await client.invoke(broker.addr, send_request(topic, b"x" * 10, queue_id=i % 2), T)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            await wait_dispatched(client, broker.addr, topic, 0, 4)
            await wait_dispatched(client, broker.addr, topic, 1, 3)
            pulled = await pull_all(client, broker.addr, topic, queues=2, group=group)
            assert len(pulled) == 7
            for qid, offset in ((0, 4), (1, 1)):
                header = UpdateConsumerOffsetRequestHeader(group, topic, qid, offset).encode()
                resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                                                 header), T)
                assert resp.code == ResponseCode.SUCCESS

            # 28: every value a string; Java's keys, parsed as the exporter parses them.
            info = await admin.broker_runtime_info(broker.addr)
            assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("7", "7")
            # Sizes are the stored records' bytes, as RocketMQ counts wroteBytes.
            assert info["putMessageSizeTotal"] == str(sum(m.store_size for m in pulled))
            assert info["brokerVersionDesc"] == "V4_9_8"
            for key in ("putTps", "getTransferedTps", "getTotalTps", "getFoundTps", "getMissTps"):
                assert len(info[key].split(" ")) == 3, key
            for key in ("msgPutTotalTodayMorning", "bootTimestamp", "commitLogMaxOffset", "dispatchBehindBytes",
                        "earliestMessageTimeStamp", "putMessageEntireTimeMax"):
                int(info[key])  # Long.parseLong
            assert info["putMessageDistributeTime"].startswith("[<=0ms]:")
            assert int(info["tableWriteFailures"]) == 0  # Apogee's own keys stay

            # 202: the raw body as fastjson writes TopicStatsTable; the admin client reads it.
            raw = await client.invoke(broker.addr, RemotingCommand.request(
                RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}), T)
            assert raw.body_bytes().startswith(b'{"offsetTable":{{"brokerName":"broker-ops","queueId":0,')
            java = java_queue_map(raw.body_bytes(), "offsetTable")
            assert [(k["queueId"], v["maxOffset"]) for k, v in java] == [(0, 4), (1, 3)]
            assert all(v["lastUpdateTimestamp"] > 0 for _, v in java)
            stats = await admin.topic_stats(topic)
            assert sorted((q.queue_id, o.min_offset, o.max_offset) for q, o in stats.items()) == [(0, 0, 4), (1, 0, 3)]

            # 208: ConsumeStats the same way.
            raw = await client.invoke(broker.addr, RemotingCommand.request(
                RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic}), T)
            java = java_queue_map(raw.body_bytes(), "offsetTable")
            assert [(k["queueId"], v["brokerOffset"], v["consumerOffset"]) for k, v in java] == [(0, 4, 4), (1, 3, 1)]
            assert java[1][1]["lastTimestamp"] > 0
            with pytest.raises(orjson.JSONDecodeError):  # not standard JSON: why Java's parser is needed
                orjson.loads(raw.body_bytes())
            consume = await admin.consume_stats(group, topic)
            lag = sum(w.broker_offset - w.consumer_offset for w in consume.offset_table.values())
            assert lag == 2 and consume.consume_tps >= 0.0
            resp = await client.invoke(broker.addr, RemotingCommand.request(
                RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"}), T)
            assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")
    finally:
        await client.close()


async def test_view_broker_stats_data(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    client = RemotingClient()
    try:
        resp = await client.invoke(broker.addr, send_request(unique("Stats"), b"abc"), T)
        assert resp.code == ResponseCode.SUCCESS
        ask = RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA,
                                      {"statsName": "BROKER_PUT_NUMS", "statsKey": "DefaultCluster"})
        resp = await client.invoke(broker.addr, ask, T)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        body = orjson.loads(resp.body_bytes())
        assert set(body) == {"statsMinute", "statsHour", "statsDay"}
        assert set(body["statsMinute"]) == {"sum", "tps", "avgpt"}
        missing = RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA,
                                          {"statsName": "TOPIC_PUT_NUMS", "statsKey": "NoSuchTopic"})
        resp = await client.invoke(broker.addr, missing, T)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist"
    finally:
        await client.close()


async def _call(client: RemotingClient, addr: str, code: int, ext: dict[str, str] | None = None,
                body: bytes | None = None) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), T)


async def test_admin_codes_mqadmin_and_the_dashboard_use(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    """26, 204, 300, 305, 317 and 321 answer with RocketMQ's bodies and errors."""
    _, broker = cluster
    topic, group, producer = unique("AdmTopic"), unique("AdmGroup"), unique("AdmProducer")
    client = RemotingClient()
    try:
        # 305: TopicValidator's system topics and the broker's own names.
        resp = await _call(client, broker.addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        topics = orjson.loads(resp.body_bytes())["topicList"]
        assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "broker-ops", "DefaultCluster"} <= set(topics)

        # 26: key=value lines under RocketMQ's names, and the data version header.
        resp = await _call(client, broker.addr, RequestCode.GET_BROKER_CONFIG)
        lines = resp.body_bytes().decode().splitlines()
        assert "brokerName=broker-ops" in lines and "flushDiskType=ASYNC_FLUSH" in lines
        assert "autoCreateTopicEnable=true" in lines and all("=" in line for line in lines)
        assert set(orjson.loads((resp.ext_fields or {})["version"])) == {"counter", "timestamp"}

        # 204: a producer group known from a heartbeat; an unknown one is an error.
        heartbeat = HeartbeatData("ops-client@1", [producer], []).encode()
        assert (await _call(client, broker.addr, RequestCode.HEART_BEAT, body=heartbeat)).code == ResponseCode.SUCCESS
        resp = await _call(client, broker.addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": producer})
        (conn,) = orjson.loads(resp.body_bytes())["connectionSet"]
        assert conn["clientId"] == "ops-client@1" and conn["language"] == "PYTHON"
        assert conn["clientAddr"].startswith("127.0.0.1:")
        resp = await _call(client, broker.addr, RequestCode.GET_ALL_PRODUCER_INFO)
        (info,) = orjson.loads(resp.body_bytes())["data"][producer]
        assert (info["clientId"], info["language"]) == ("ops-client@1", "PYTHON")
        assert info["remoteIP"].startswith("/127.0.0.1:") and info["lastUpdateTimestamp"] > 0
        resp = await _call(client, broker.addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "NoSuch"})
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[NoSuch] not exist")

        # 300 and 317 for a group with offsets on the topic; 321 reads the topic's ConsumeQueue.
        for _ in range(3):
            resp = await client.invoke(broker.addr, send_request(topic, b"y"), T)
            assert resp.code == ResponseCode.SUCCESS
        await wait_dispatched(client, broker.addr, topic, 0, 3)
        group_body = orjson.dumps({"groupName": group, "consumeEnable": True, "retryMaxTimes": 16})
        resp = await _call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group_body)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        header = UpdateConsumerOffsetRequestHeader(group, topic, 0, 1).encode()
        assert (await _call(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)).code == 0
        resp = await _call(client, broker.addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        assert orjson.loads(resp.body_bytes()) == {"groupList": [group]}

        resp = await _call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        body = resp.body_bytes()
        assert b'"offsetTable":{{"brokerName":"broker-ops"' in body  # fastjson's MessageQueue keys
        parsed = loads_keyed(body)
        (ours,) = [entry[group] for entry in parsed["consumeStatsList"] if group in entry]
        (stats,) = ours
        offsets = {k["queueId"]: (v["brokerOffset"], v["consumerOffset"]) for k, v in stats["offsetTable"]}
        assert offsets[0] == (3, 1) and parsed["totalDiff"] >= 2

        ask = {"topic": topic, "queueId": "0", "index": "1", "count": "5", "consumerGroup": group}
        resp = await _call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE, ask)
        cq = orjson.loads(resp.body_bytes())
        assert (cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])) == (0, 3, 2)
        assert cq["queueData"][0]["physicOffset"] < cq["queueData"][1]["physicOffset"]
        assert cq["filterData"] == f"{group}@{topic} is not online!"
        # 316 keeps every configured topic's queues; 329 deletes nothing unexpired.
        assert (await _call(client, broker.addr, RequestCode.CLEAN_UNUSED_TOPIC)).code == ResponseCode.SUCCESS
        assert (await _call(client, broker.addr, RequestCode.DELETE_EXPIRED_COMMITLOG)).code == ResponseCode.SUCCESS
        resp = await _call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE, ask)
        assert orjson.loads(resp.body_bytes())["maxQueueIndex"] == 3
        missing = dict(ask, queueId="7")
        resp = await _call(client, broker.addr, RequestCode.QUERY_CONSUME_QUEUE, missing)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"7@{topic} is not exist!")
    finally:
        await client.close()


def _apogee_admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", "admin", *args], capture_output=True, text=True, timeout=60)


async def test_broker_status_and_topic_status_commands(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    topic = unique("CliTopic")
    async with AdminClient(namesrv.addr) as admin:
        await admin.update_topic(topic, broker.addr, queues=1)
        await wait_for_route(admin, topic)
    client = RemotingClient()
    try:
        assert (await client.invoke(broker.addr, send_request(topic, b"z"), T)).code == ResponseCode.SUCCESS
        await wait_dispatched(client, broker.addr, topic, 0, 1)
    finally:
        await client.close()
    status = _apogee_admin("broker-status", "-n", namesrv.addr, "-b", broker.addr)
    assert status.returncode == 0, status.stderr
    assert "msgPutTotalTodayNow" in status.stdout and "brokerVersionDesc" in status.stdout
    stats = _apogee_admin("topic-status", "-n", namesrv.addr, "-t", topic)
    assert stats.returncode == 0, stats.stderr
    row = next(line for line in stats.stdout.splitlines() if "broker-ops" in line)
    assert [cell.strip() for cell in row.strip("│┃ ").split("│")][:4] == ["broker-ops", "0", "0", "1"]
    missing = _apogee_admin("topic-status", "-n", namesrv.addr, "-t", "NoSuchTopic_ops")
    assert missing.returncode != 0 and missing.stderr.startswith("error:")


async def test_a_deleted_topic_made_again_starts_empty(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    _, broker = cluster
    topic = unique("Reborn")
    client = RemotingClient()
    try:
        for _ in range(3):
            assert (await client.invoke(broker.addr, send_request(topic, b"old"), T)).code == ResponseCode.SUCCESS
        await wait_dispatched(client, broker.addr, topic, 0, 3)
        resp = await _call(client, broker.addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        resp = await client.invoke(broker.addr, send_request(topic, b"new"), T)
        assert resp.code == ResponseCode.SUCCESS and (resp.ext_fields or {})["queueOffset"] == "0"
        await wait_dispatched(client, broker.addr, topic, 0, 1)
        assert [m.body for m in await pull_all(client, broker.addr, topic, queues=1)] == [b"new"]
    finally:
        await client.close()


async def test_get_namesrv_config(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, _ = cluster
    client = RemotingClient()
    try:
        resp = await _call(client, namesrv.addr, RequestCode.GET_NAMESRV_CONFIG)
        assert resp.code == ResponseCode.SUCCESS
        lines = resp.body_bytes().decode().splitlines()
        assert "listenHost=127.0.0.1" in lines and "orderMessageEnable=false" in lines
        assert any(line.startswith("rocketmqHome=") for line in lines) and all("=" in line for line in lines)
    finally:
        await client.close()
