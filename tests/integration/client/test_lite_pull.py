"""LitePullConsumer: subscribe with rebalance, assign, poll, seek, commit, pause/resume;
and the explicit PullConsumer."""

from __future__ import annotations

import asyncio
import time

import pytest

from apogee.client import LitePullConsumer, Message, MessageExt, MessageQueue, Producer, PullConsumer, PullStatus
from apogee.errors import ClientError, ClientStateError
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique


async def produce_to(cluster: Cluster, topic: str, n: int, queue_id: int | None = None) -> MessageQueue | None:
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        if queue_id is None:
            first = await producer.send(Message(topic, b"0", properties={"i": "0"}))
            mq = first.message_queue
            start = 1
        else:
            info = await producer._publish_info(topic)
            mq = MessageQueue(topic, info.queues[0].broker_name, queue_id)
            start = 0
        for i in range(start, n):
            await producer.send(Message(topic, b"%d" % i, properties={"i": str(i)}), queue=mq)
        return mq


async def poll_until(consumer: LitePullConsumer, n: int, timeout_s: float = 20) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += await consumer.poll(200)
    return got


async def test_subscribe_poll_and_auto_commit(cluster: Cluster) -> None:
    topic = unique("T_lite")
    group = unique("G")
    await produce_to(cluster, topic, 50)
    consumer = LitePullConsumer(group, cluster.ns, **FAST_CONSUMER)
    consumer.subscribe(topic)
    async with consumer:
        got = await poll_until(consumer, 50)
        assert sorted(int(m.properties["i"]) for m in got) == list(range(50))
        assert await consumer.poll(100) == []
    again = LitePullConsumer(group, cluster.ns, **FAST_CONSUMER)
    again.subscribe(topic)
    async with again:
        assert await poll_until(again, 1, timeout_s=1.5) == []  # everything was committed


async def test_assign_seek_and_manual_commit(cluster: Cluster) -> None:
    topic = unique("T_assign")
    group = unique("G")
    mq = await produce_to(cluster, topic, 30)
    assert mq is not None
    consumer = LitePullConsumer(group, cluster.ns, auto_commit=False, **FAST_CONSUMER)
    await consumer.assign([mq])
    with pytest.raises(ClientStateError):
        consumer.subscribe(topic)
    async with consumer:
        assert consumer.assignment() == {mq}
        got = await poll_until(consumer, 30)
        assert [m.queue_offset for m in got] == list(range(30))
        assert consumer.position(mq) == 30
        assert await consumer.committed(mq) in (-1, 0)  # nothing committed yet (auto_commit off)
        await consumer.seek(mq, 10)
        again = await poll_until(consumer, 20)
        assert [m.queue_offset for m in again] == list(range(10, 30))
        await consumer.commit({mq: 25})
        assert await consumer.committed(mq) == 25
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 30
        await consumer.seek_to_begin(mq)
        assert [m.queue_offset for m in await poll_until(consumer, 30)] == list(range(30))
        await consumer.seek_to_end(mq)
        assert await consumer.poll(300) == []
        with pytest.raises(ClientError):
            await consumer.seek(mq, 1000)
        with pytest.raises(ClientError):
            await consumer.seek(MessageQueue(topic, mq.broker_name, (mq.queue_id + 1) % 4), 0)


async def test_pause_and_resume(cluster: Cluster) -> None:
    topic = unique("T_pause")
    mq = await produce_to(cluster, topic, 10)
    assert mq is not None
    consumer = LitePullConsumer(unique("G"), cluster.ns, **FAST_CONSUMER)
    await consumer.assign([mq])
    async with consumer:
        consumer.pause([mq])
        assert await consumer.poll(500) == []
        consumer.resume([mq])
        assert len(await poll_until(consumer, 10)) == 10


async def test_explicit_pull_consumer(cluster: Cluster) -> None:
    topic = unique("T_pull")
    group = unique("G")
    mq = await produce_to(cluster, topic, 40)
    assert mq is not None
    async with PullConsumer(group, cluster.ns, **FAST) as consumer:
        assert mq in await consumer.fetch_message_queues(topic)
        # Dispatch to the ConsumeQueue follows the send asynchronously (RocketMQ's reput), and
        # a new topic's first file is created on the I/O thread: the max offset catches up.
        deadline = time.monotonic() + 5
        while await consumer.max_offset(mq) < 40 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert await consumer.max_offset(mq) == 40 and await consumer.min_offset(mq) == 0
        first = await consumer.pull(mq, "*", 0, 16)
        assert first.status is PullStatus.FOUND and len(first.messages) == 16 and first.next_begin_offset == 16
        rest = await consumer.pull(mq, "*", 16, 64)
        assert [m.queue_offset for m in rest.messages] == list(range(16, 40))
        empty = await consumer.pull(mq, "*", 40, 16)
        assert empty.status is PullStatus.NO_NEW_MSG
        illegal = await consumer.pull(mq, "*", 500, 16)
        assert illegal.status is PullStatus.OFFSET_ILLEGAL and illegal.max_offset == 40
        assert illegal.next_begin_offset in (illegal.min_offset, illegal.max_offset)  # Java: min when min is 0
        consumer.update_consume_offset(mq, 40)
        await consumer.commit()
        assert await consumer.fetch_consume_offset(mq) == 40

        async def late_send() -> None:
            await asyncio.sleep(0.3)
            await produce_to(cluster, topic, 1, queue_id=mq.queue_id)

        task = asyncio.create_task(late_send())
        blocked = await consumer.pull_block_if_not_found(mq, "*", 40, 16, suspend_ms=5000)
        await task
        assert blocked.status is PullStatus.FOUND and blocked.messages[0].queue_offset == 40
