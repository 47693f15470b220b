"""Push consumers against a real broker: listeners, tags, retry and DLQ, start positions,
graceful shutdown."""

from __future__ import annotations

import asyncio
import threading

from apogee.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from apogee.common import constants as c
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until
from tests.support.waiting import holds_for, next_millisecond, now_ms
from tests.support.wire import wait_cluster_caught_up


async def produce(cluster: Cluster, topic: str, n: int, tags: list[str] | None = None, start: int = 0) -> None:
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        futures = []
        for i in range(start, start + n):
            msg = Message(topic, b"m%d" % i, properties={"i": str(i)})
            if tags:
                msg.tags = tags[i % len(tags)]
            futures.append(await producer.send_async(msg))
        await asyncio.gather(*futures)


async def test_sync_listener_on_worker_threads_receives_everything(cluster: Cluster) -> None:
    topic = unique("T_push")
    await produce(cluster, topic, 200)
    got: list[int] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        with lock:
            got.extend(int(m.properties["i"]) for m in msgs)
            threads.add(threading.current_thread().name)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        unique("G"), cluster.ns, listener=listener, consume_message_batch_max_size=4, **FAST_CONSUMER
    )
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(lambda: len(got) >= 200, 20, "200 messages")
    assert sorted(got) == list(range(200))
    assert all(name.startswith("apogee-consume") for name in threads)


async def test_async_listener_and_tag_expression(cluster: Cluster) -> None:
    topic = unique("T_tags")
    await produce(cluster, topic, 90, tags=["TagA", "TagB", "TagC"])
    got: list[MessageExt] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        got.extend(msgs)

    consumer = PushConsumer(unique("G"), cluster.ns, listener=listener, **FAST_CONSUMER)
    consumer.subscribe(topic, "TagA || TagB")
    async with consumer:
        await wait_until(lambda: len(got) >= 60, 20, "60 tagged messages")
        await holds_for(lambda: len(got) == 60, 0.5, "no other tag, no duplicate")
    assert len(got) == 60 and {m.tags for m in got} == {"TagA", "TagB"}


async def test_reconsume_later_goes_through_the_retry_topic_then_the_dlq(cluster: Cluster) -> None:
    topic = unique("T_retry")
    group = unique("G")
    await produce(cluster, topic, 3)
    deliveries: dict[int, list[int]] = {}
    topics_seen: set[str] = set()

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        ctx.delay_level_when_next_consume = 1  # retry after 1 s instead of 10 s
        for m in msgs:
            i = int(m.properties["i"])
            deliveries.setdefault(i, []).append(m.reconsume_times)
            topics_seen.add(m.topic)
        if int(msgs[0].properties["i"]) == 0:
            return ConsumeResult.CONSUME_SUCCESS
        if int(msgs[0].properties["i"]) == 1 and msgs[0].reconsume_times >= 1:
            return ConsumeResult.CONSUME_SUCCESS
        raise RuntimeError("always fails")  # message 2: to the DLQ after max_reconsume_times

    consumer = PushConsumer(group, cluster.ns, listener=listener, max_reconsume_times=2, **FAST_CONSUMER)
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(lambda: len(deliveries.get(2, [])) >= 3 and len(deliveries.get(1, [])) >= 2, 30, "retries")
        counts = {i: len(d) for i, d in deliveries.items()}
        await holds_for(lambda: {i: len(d) for i, d in deliveries.items()} == counts, 1.5, "no further delivery")
    assert deliveries[0] == [0]
    assert deliveries[1] == [0, 1]
    assert deliveries[2] == [0, 1, 2]  # then the broker moved it to the DLQ
    assert topics_seen == {topic}  # retry messages are shown with their original topic
    async with PullConsumer(unique("dlq_reader"), cluster.ns, **FAST) as reader:
        dlq = c.dlq_topic(group)

        async def dead_letters() -> list[MessageExt]:
            found: list[MessageExt] = []
            try:
                for mq in await reader.fetch_message_queues(dlq):
                    result = await reader.pull(mq, "*", 0, 32)
                    if result.status is PullStatus.FOUND:
                        found += result.messages
            except Exception:
                return []  # no route for the DLQ topic yet
            return found

        found = await wait_until(dead_letters, 10, f"a message in {dlq}", interval_s=0.3)
        assert [m.properties["i"] for m in found] == ["2"]
        assert found[0].properties[c.PROPERTY_RETRY_TOPIC] == topic


async def test_graceful_shutdown_commits_so_a_restart_redelivers_nothing(cluster: Cluster) -> None:
    topic = unique("T_restart")
    group = unique("G")
    await produce(cluster, topic, 100)
    got: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        got.extend(int(m.properties["i"]) for m in msgs)

    first = PushConsumer(group, cluster.ns, listener=listener, **FAST_CONSUMER)
    first.subscribe(topic)
    async with first:
        await wait_until(lambda: len(got) >= 100, 20, "first 100")
    await produce(cluster, topic, 50, start=100)
    second = PushConsumer(group, cluster.ns, listener=listener, **FAST_CONSUMER)
    second.subscribe(topic)
    async with second:
        await wait_until(lambda: len(got) >= 150, 20, "next 50")
        await holds_for(lambda: len(got) == 150, 0.5, "no duplicate")
    assert sorted(got) == list(range(150))  # no duplicates across the restart


async def test_consume_from_where_for_new_groups(cluster: Cluster) -> None:
    topic = unique("T_where")
    await produce(cluster, topic, 10)
    # A young queue (its first message still at offset 0) is read from the start even with
    # LAST_OFFSET, as RocketMQ brokers do; FIRST_OFFSET and TIMESTAMP also see everything here.
    for where in (ConsumeFromWhere.FIRST_OFFSET, ConsumeFromWhere.TIMESTAMP, ConsumeFromWhere.LAST_OFFSET):
        got: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext, got: list[int] = got) -> None:
            got.extend(int(m.properties["i"]) for m in msgs)

        consumer = PushConsumer(unique("G"), cluster.ns, listener=listener, consume_from_where=where, **FAST_CONSUMER)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda got=got: len(got) >= 10, 20, f"10 messages from {where}")
        assert sorted(got) == list(range(10))


async def test_broker_timestamp_start_skips_older_messages(cluster: Cluster) -> None:
    topic = unique("T_ts")
    await produce(cluster, topic, 10)
    cut = next_millisecond(now_ms())  # after the 10 were stored
    next_millisecond(cut)  # the 5 are stored after it
    await produce(cluster, topic, 5, start=10)
    await wait_cluster_caught_up(cluster.ns)  # the ConsumeQueue trails the send's answer
    async with PullConsumer(unique("G"), cluster.ns, **FAST) as consumer:
        newer = 0
        for mq in await consumer.fetch_message_queues(topic):
            offset = await consumer.search_offset(mq, cut, "LOWER")  # the first stored at or after
            result = await consumer.pull(mq, "*", offset, 32)
            if result.status is PullStatus.FOUND:
                assert all(int(m.properties["i"]) >= 10 for m in result.messages)
                newer += len(result.messages)
        assert newer == 5
