"""Cross-client equality: messages sent by Apogee's Python client are received by the Apache
RocketMQ C++ client (rocketmq==0.4.4) and the reverse, with identical bodies, keys, tags and
properties; including compressed bodies and batches."""

from __future__ import annotations

import asyncio
import time

import pytest

from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer, SendStatus
from apogee.common import constants as c
from tests.interop.conftest import Cluster, cpp, received, sent, unique

pytestmark = [pytest.mark.interop, pytest.mark.slow]

FAST = {
    "poll_name_server_interval_ms": 1000,
    "heartbeat_broker_interval_ms": 1000,
    "persist_consumer_offset_interval_ms": 500,
}


def apogee_message(topic: str, i: int, body_size: int = 0) -> Message:
    body = f"body-{i}".ljust(body_size, "x") if body_size else f"body-{i}"
    msg = Message(topic, body.encode(), properties={"seq": str(i), "color": "blue"})
    msg.tags = "TagA" if i % 2 else "TagB"
    msg.keys = [f"key-{i}"]
    return msg


@pytest.mark.parametrize("mode", ["sync", "async", "batch", "large"])
async def test_apogee_producer_to_cpp_consumer(cluster: Cluster, mode: str) -> None:
    topic = unique(f"X_py2cpp_{mode}")
    count = 5 if mode == "large" else 20
    size = 20_000 if mode == "large" else 0
    msgs = [apogee_message(topic, i, size) for i in range(count)]
    async with Producer(unique("PyP"), cluster.namesrv.addr, **FAST) as producer:
        if mode in ("sync", "large"):
            results = [await producer.send(m) for m in msgs]
        elif mode == "async":
            results = list(await asyncio.gather(*[await producer.send_async(m) for m in msgs]))
        else:
            results = await producer.send_batch(msgs)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    got = received(
        await asyncio.to_thread(cpp("consume", cluster.namesrv.addr, topic, unique("CppG"), "--expect", count).wait)
    )
    assert len(got) == count
    by_seq = {int(m["props"]["seq"]): m for m in got}
    assert sorted(by_seq) == list(range(count))
    for i, m in by_seq.items():
        sent_msg = msgs[i]
        assert m["body"] == sent_msg.body.decode()
        assert m["tags"] == sent_msg.tags
        assert m["keys"] == f"key-{i}"
        assert m["topic"] == topic
        assert m["props"]["color"] == "blue"
        assert m["props"]["UNIQ_KEY"] == sent_msg.uniq_key == m["id"] == results[i].msg_id


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch", "large"])
async def test_cpp_producer_to_apogee_consumer(cluster: Cluster, mode: str) -> None:
    topic = unique(f"X_cpp2py_{mode}")
    count = 5 if mode == "large" else 20
    args = [
        "--count",
        count,
        "--mode",
        "batch" if mode == "batch" else ("sync" if mode == "large" else mode),
        "--tags",
        "TagA,TagB",
        "--prop",
        "color=blue",
    ]
    if mode == "large":
        args += ["--body-size", 20_000]
    results = sent(await asyncio.to_thread(cpp("produce", cluster.namesrv.addr, topic, *args).wait))
    assert results
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        got.extend(msgs)

    consumer = PushConsumer(unique("PyG"), cluster.namesrv.addr, listener=listener, rebalance_interval_ms=1000, **FAST)
    consumer.subscribe(topic)
    async with consumer:
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    assert len(got) == count
    by_seq = {int(m.properties["seq"]): m for m in got}
    assert sorted(by_seq) == list(range(count))
    for i, m in by_seq.items():
        expected_body = f"body-{i}".ljust(20_000, "x") if mode == "large" else f"body-{i}"
        assert m.body == expected_body.encode()
        assert m.tags == ["TagA", "TagB"][i % 2]
        assert m.keys == [f"key-{i}"]
        assert m.topic == topic
        assert m.properties["color"] == "blue"
        assert m.msg_id == m.properties[c.UNIQ_KEY]
    if mode in ("sync", "large"):
        assert {r["msg_id"] for r in results} == {m.msg_id for m in got}  # the C++ result id is UNIQ_KEY
