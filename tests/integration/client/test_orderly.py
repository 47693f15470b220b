"""Ordered messages: 10,000 messages for 50 keys sent through the hash selector, consumed by
four orderly consumers, one of which restarts midway; every key's messages arrive in the
order they were sent."""

from __future__ import annotations

import asyncio
import collections

from apogee.client import ConsumeContext, ConsumeResult, Message, MessageExt, Producer, PushConsumer, SelectByHash
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until
from tests.support.waiting import holds_for

KEYS = 50
PER_KEY = 200


async def test_per_key_order_survives_a_consumer_restart(cluster: Cluster) -> None:
    topic = unique("T_orderly")
    group = unique("G")
    log: list[tuple[str, int]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            log.append((m.properties["key"], int(m.properties["seq"])))
        return ConsumeResult.CONSUME_SUCCESS

    def make() -> PushConsumer:
        c = PushConsumer(
            group, cluster.ns, listener=listener, orderly=True, consume_message_batch_max_size=8, **FAST_CONSUMER
        )
        c.subscribe(topic)
        return c

    async with Producer(unique("P"), cluster.ns, default_topic_queue_nums=8, **FAST) as producer:
        await producer.send(Message(topic, b"create", properties={"key": "none", "seq": "-1"}))
        consumers = [make() for _ in range(4)]
        for c in consumers:
            await c.start()
        selector = SelectByHash()

        async def send_keys(keys: range) -> None:
            for seq in range(PER_KEY):
                for k in keys:
                    key = f"key-{k}"
                    msg = Message(topic, b"%d" % seq, properties={"key": key, "seq": str(seq)})
                    await producer.send(msg, selector=selector, arg=key)

        senders = [asyncio.create_task(send_keys(range(i, KEYS, 5))) for i in range(5)]
        await wait_until(lambda: len(log) > KEYS * PER_KEY // 3, 60, "a third consumed")
        restarted = consumers.pop()
        await restarted.shutdown()
        replacement = make()
        await replacement.start()
        consumers.append(replacement)
        await asyncio.gather(*senders)
        await wait_until(lambda: len([e for e in log if e[0] != "none"]) >= KEYS * PER_KEY, 90, "all consumed")
        logged = len(log)
        await holds_for(lambda: len(log) == logged, 0.5, "no late redelivery")
        for c in consumers:
            await c.shutdown()
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for key, seq in log:
        if key != "none":
            per_key[key].append(seq)
    assert len(per_key) == KEYS
    for key, seqs in per_key.items():
        assert seqs == list(range(PER_KEY)), f"{key}: out of order or duplicated: {seqs[:50]}..."
