"""GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) sent to a real broker,
relayed to a running Apogee push consumer and answered in RocketMQ's shapes (decoded here as
fastjson would: maps keyed by MessageQueue objects), and RocketMQ's errors when the client is
not connected."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson

from apogee.client import ConsumeContext, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from apogee.remoting.bodies.consumer_info import ConsumerRunningInfo
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until

T = 15_000


def fastjson_object(text: str, pos: int) -> tuple[Any, int]:
    """One JSON value at ``pos`` as fastjson writes it: objects may have object keys (returned
    as a list of pairs then).  A reader of our own, apart from Apogee's decoder."""
    decoder = json.JSONDecoder()
    if text[pos] != "{":
        return decoder.raw_decode(text, pos)
    pos += 1
    pairs: list[tuple[Any, Any]] = []
    while text[pos] != "}":
        if text[pos] == "{":
            key, pos = fastjson_object(text, pos)
            key = dict(key) if isinstance(key, list) else key
        else:
            key, pos = decoder.raw_decode(text, pos)
        assert text[pos] == ":", text[pos - 20 : pos + 20]
        value, pos = fastjson_object(text, pos + 1)
        pairs.append((key, value))
        pos += text[pos] == ","
    if all(isinstance(k, str) for k, _ in pairs):
        return dict(pairs), pos + 1
    return pairs, pos + 1


async def _relay(client: RemotingClient, addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext), T)


async def test_running_info_relayed_to_a_push_consumer(cluster: Cluster) -> None:
    topic, group = unique("T_info"), unique("G_info")
    broker = cluster.brokers[0]
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        for i in range(10):
            await producer.send(Message(topic, b"m%d" % i))
    seen: list[MessageExt] = []
    consumer = PushConsumer(group, cluster.ns, listener=lambda msgs, ctx: seen.extend(msgs), **FAST_CONSUMER)
    consumer.subscribe(topic)
    client = RemotingClient()
    try:
        async with consumer:
            await wait_until(lambda: len(seen) >= 10, 20, "10 messages consumed")
            resp = await _relay(client, broker.addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                {"consumerGroup": group, "clientId": consumer.client_id, "jstackEnable": "true"})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            text = resp.body_bytes().decode()
            info, end = fastjson_object(text, 0)
            assert end == len(text)
            assert list(info) == ["jstack", "mqTable", "properties", "statusTable", "subscriptionSet"]
            props = info["properties"]
            assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
            assert props["PROP_NAMESERVER_ADDR"] == f"{cluster.ns};" and props["consumerGroup"] == group
            assert int(props["PROP_THREADPOOL_CORE_SIZE"]) > 0 and props["PROP_CLIENT_VERSION"] == "V4_9_8"
            assert 0 < int(props["PROP_CONSUMER_START_TIMESTAMP"]) <= consumer.start_ms + 1
            assert props["messageModel"] == "CLUSTERING" and props["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
            assert {s["topic"] for s in info["subscriptionSet"]} == {topic, f"%RETRY%{group}"}
            sub = next(s for s in info["subscriptionSet"] if s["topic"] == topic)
            assert sub["subString"] == "*" and sub["expressionType"] == "TAG"
            queues = {(k["topic"], k["queueId"]): v for k, v in info["mqTable"]}  # object keys, as fastjson's
            assert {t for t, _ in queues} == {topic, f"%RETRY%{group}"}
            committed = sum(v["commitOffset"] for (t, _), v in queues.items() if t == topic)
            assert committed == 10
            assert all(set(v) >= {"cachedMsgCount", "droped", "lastPullTimestamp", "locked", "tryUnlockTimes"}
                       for v in queues.values())
            status = info["statusTable"][topic]
            assert set(status) == {"consumeFailedMsgs", "consumeFailedTPS", "consumeOKTPS", "consumeRT",
                                   "pullRT", "pullTPS"}
            assert "Thread" in info["jstack"] or "MainThread" in info["jstack"]
            decoded = ConsumerRunningInfo.decode(resp.body_bytes())  # Apogee's own decoder agrees
            assert {q.topic for q in decoded.mq_table} == {topic, f"%RETRY%{group}"}

            for code, ext in (
                (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": group, "clientId": "nobody@1"}),
                (RequestCode.CONSUME_MESSAGE_DIRECTLY,
                 {"consumerGroup": unique("G_none"), "clientId": consumer.client_id, "msgId": "0" * 32}),
            ):
                resp = await _relay(client, broker.addr, code, ext)
                assert resp.code == ResponseCode.SYSTEM_ERROR
                assert resp.remark == f"The Consumer <{ext['consumerGroup']}> <{ext['clientId']}> not online"
    finally:
        await client.close()


async def test_consume_message_directly_relayed_to_a_push_consumer(cluster: Cluster) -> None:
    topic, group = unique("T_direct"), unique("G_direct")
    broker = cluster.brokers[0]
    normal: list[bytes] = []
    direct: list[tuple[bytes, str]] = []
    redeliver = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        body = msgs[0].body
        if not redeliver.is_set():
            normal.append(body)
            return ConsumeResult.CONSUME_SUCCESS
        direct.append((body, ctx.message_queue.broker_name))
        if body == b"boom":
            raise RuntimeError("boom in the listener")
        return ConsumeResult.RECONSUME_LATER if body == b"later" else ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.ns, listener=listener, **FAST_CONSUMER)
    consumer.subscribe(topic)
    client = RemotingClient()
    try:
        async with Producer(unique("P"), cluster.ns, **FAST) as producer:
            sent = {body: await producer.send(Message(topic, body)) for body in (b"ok", b"later", b"boom")}
        async with consumer:
            await wait_until(lambda: len(normal) == 3, 20, "3 messages consumed")
            redeliver.set()
            answers = {}
            for body, result in sent.items():
                resp = await _relay(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, {
                    "consumerGroup": group, "clientId": consumer.client_id, "msgId": result.offset_msg_id})
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                answers[body] = orjson.loads(resp.body_bytes())
            bad = await _relay(client, broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, {
                "consumerGroup": group, "clientId": consumer.client_id, "msgId": "not-an-id"})
            assert bad.code == ResponseCode.SYSTEM_ERROR and "not-an-id" in (bad.remark or "")
        broker_name = sent[b"ok"].message_queue.broker_name
        assert sorted(direct) == sorted((b, broker_name) for b in (b"ok", b"later", b"boom"))
        assert [answers[b]["consumeResult"] for b in (b"ok", b"later", b"boom")] == [
            "CR_SUCCESS", "CR_LATER", "CR_THROW_EXCEPTION"]
        assert "boom in the listener" in answers[b"boom"]["remark"] and "remark" not in answers[b"ok"]
        for answer in answers.values():
            assert answer["order"] is False and answer["autoCommit"] is True and answer["spentTimeMills"] >= 0
            assert list(answer) == sorted(answer)  # fastjson's field order
        assert sorted(normal) == [b"boom", b"later", b"ok"]  # nothing was redelivered by the direct calls
    finally:
        await client.close()
