"""Clustering rebalance: three consumers share eight queues; one stops; the others take its
queues over (at once, thanks to the broker's NOTIFY_CONSUMER_IDS_CHANGED; at the latest at
the next 20 s rebalance), and across the whole run no message is lost."""

from __future__ import annotations

import asyncio
import collections
import time

from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer
from tests.integration.client.conftest import FAST, Cluster, unique, wait_until
from tests.support.waiting import holds_for

QUEUES = 8
TOTAL = 3000


def owned(consumer: PushConsumer, topic: str) -> set[int]:
    assert consumer.rebalancer is not None
    return {
        mq.queue_id for mq, pq in consumer.rebalancer.process_queues.items() if mq.topic == topic and not pq.dropped
    }


async def test_queues_move_to_the_remaining_consumers_without_loss(cluster: Cluster) -> None:
    topic = unique("T_rebal")
    group = unique("G")
    received: collections.Counter[str] = collections.Counter()
    async with Producer(unique("P"), cluster.ns, default_topic_queue_nums=QUEUES, **FAST) as producer:
        await producer.send(Message(topic, b"create"))

        def make() -> PushConsumer:
            async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
                for m in msgs:
                    received[m.msg_id] += 1

            # The default 20 s rebalance interval: the hand-off below must come from the
            # broker's notification, not from a short timer.
            c = PushConsumer(
                group,
                cluster.ns,
                listener=listener,
                poll_name_server_interval_ms=1000,
                heartbeat_broker_interval_ms=1000,
                persist_consumer_offset_interval_ms=500,
            )
            c.subscribe(topic)
            return c

        consumers = [make() for _ in range(3)]
        for c in consumers:
            await c.start()
        await wait_until(lambda: sorted(len(owned(c, topic)) for c in consumers) == [2, 3, 3], 25, "3/3/2 split")
        assert set().union(*(owned(c, topic) for c in consumers)) == set(range(QUEUES))

        sent: list[str] = []

        async def send_steadily() -> None:
            for i in range(TOTAL):
                r = await producer.send(Message(topic, b"%d" % i))
                sent.append(r.msg_id)
                if i % 100 == 0:
                    await asyncio.sleep(0.05)

        sender = asyncio.create_task(send_steadily())
        await wait_until(lambda: len(sent) > TOTAL // 3, 30, "a third sent")
        leaving = consumers.pop()
        stopped_at = time.monotonic()
        await leaving.shutdown()
        await wait_until(
            lambda: set().union(*(owned(c, topic) for c in consumers)) == set(range(QUEUES)),
            25,
            "the remaining consumers own every queue",
        )
        takeover_s = time.monotonic() - stopped_at
        await sender
        await wait_until(lambda: set(sent) <= set(received), 30, "every message consumed")
        total = sum(received.values())
        await holds_for(lambda: sum(received.values()) == total, 0.5, "no late redelivery")
        for c in consumers:
            await c.shutdown()
    missing = set(sent) - set(received)
    duplicates = sum(n - 1 for n in received.values() if n > 1)
    print(f"takeover after {takeover_s:.2f} s; {len(sent)} sent, {len(missing)} lost, {duplicates} duplicates")
    assert not missing
    assert takeover_s < 25
    assert duplicates <= TOTAL // 10
