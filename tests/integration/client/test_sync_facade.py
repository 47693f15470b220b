"""The blocking facade: the same clients driven from plain threads, no event loop in sight."""

from __future__ import annotations

import threading
import time

from apogee.client import ConsumeContext, ConsumeResult, Message, MessageExt, PullStatus
from apogee.client.sync import SyncLitePullConsumer, SyncProducer, SyncPullConsumer, SyncPushConsumer
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique


def test_sync_producer_and_consumers(cluster: Cluster) -> None:
    topic = unique("T_sync_facade")
    with SyncProducer(unique("P"), cluster.ns, **FAST) as producer:
        first = producer.send(Message(topic, b"first"))
        futures = [producer.send_async(Message(topic, b"async %d" % i)) for i in range(50)]
        callbacks: list[object] = []
        producer.send_async(Message(topic, b"cb"), lambda r, e: callbacks.append(r))
        producer.send_oneway(Message(topic, b"oneway"))
        batch = producer.send_batch([Message(topic, b"batch %d" % i) for i in range(5)])
        producer.flush()
        assert all(f.result(5).msg_id for f in futures) and len(batch) == 5 and callbacks

    got: list[bytes] = []
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        if len(got) >= 58:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    push = SyncPushConsumer(unique("G"), cluster.ns, listener=listener, **FAST_CONSUMER)
    push.subscribe(topic)
    with push:
        assert done.wait(20)
    assert b"first" in got and b"cb" in got and b"oneway" in got

    lite = SyncLitePullConsumer(unique("G"), cluster.ns, **FAST_CONSUMER)
    lite.subscribe(topic)
    with lite:
        polled: list[MessageExt] = []
        deadline = time.monotonic() + 20
        while len(polled) < 58 and time.monotonic() < deadline:
            polled += lite.poll(200)
        lite.commit_sync()
        assert len(polled) == 58
        mq = next(iter(lite.assignment()))
        assert lite.committed(mq) == lite.position(mq)

    with SyncPullConsumer(unique("G"), cluster.ns, **FAST) as puller:
        mq = first.message_queue
        result = puller.pull(mq, "*", first.queue_offset, 1)
        assert result.status is PullStatus.FOUND and result.messages[0].body == b"first"
