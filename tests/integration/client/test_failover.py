"""A broker that goes away: sends fail over to the other broker and consumers carry on with
the remaining queues."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer, SendStatus
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, start_broker, unique, wait_until
from tests.support.processes import start_namesrv


@pytest.fixture
def two_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("failover")
    namesrv = start_namesrv(base / "namesrv")
    a = start_broker(namesrv.addr, base / "a" / "store", name="broker-a")
    b = start_broker(namesrv.addr, base / "b" / "store", name="broker-b")
    try:
        yield Cluster(namesrv, [a, b], base)
    finally:
        a.close()
        b.close()
        namesrv.close()


async def test_sends_fail_over_and_consumers_resume_on_the_remaining_queues(two_brokers: Cluster) -> None:
    cluster = two_brokers
    topic = unique("T_failover")
    received: set[str] = set()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        received.update(m.msg_id for m in msgs)

    async with Producer(
        unique("P"), cluster.ns, retry_times_when_send_failed=3, send_latency_fault_enable=True, **FAST
    ) as producer:
        before = [await producer.send(Message(topic, b"before %d" % i)) for i in range(40)]
        assert {r.message_queue.broker_name for r in before} == {"broker-a", "broker-b"}
        consumer = PushConsumer(unique("G"), cluster.ns, listener=listener, **FAST_CONSUMER)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(received) >= 40, 20, "messages sent before the failure")
            cluster.brokers[0].kill()
            after = []
            for i in range(200):
                after.append(await producer.send(Message(topic, b"after %d" % i)))
                await asyncio.sleep(0.002)
            assert all(r.status is SendStatus.SEND_OK for r in after)
            assert {r.message_queue.broker_name for r in after[20:]} == {"broker-b"}
            await wait_until(lambda: {r.msg_id for r in after} <= received, 30, "messages sent after the failure")
            assert consumer.rebalancer is not None
            await wait_until(
                lambda: (
                    {mq.broker_name for mq in consumer.rebalancer.process_queues if mq.topic == topic} == {"broker-b"}
                ),
                30,
                "the consumer to drop broker-a's queues",
            )
