"""Producer against a real broker: every send style, ordering selectors, batches, delay,
compression, validation, hooks, backpressure and drain."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from apogee.client import (
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
    SelectByHash,
    SendContext,
    SendResult,
    SendStatus,
)
from apogee.common import constants as c
from apogee.common.message_codec import decode_records
from apogee.errors import MessageValidationError, NoRouteError
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, PullMessageRequestHeader
from tests.integration.client.conftest import FAST, Cluster, unique


async def read_all(cluster: Cluster, topic: str, expect: int, timeout_s: float = 10) -> list:
    """Every message of ``topic`` from offset 0, through a PullConsumer."""
    async with PullConsumer(unique("reader"), cluster.ns, **FAST) as consumer:
        deadline = time.monotonic() + timeout_s
        while True:
            got = []
            try:
                queues = await consumer.fetch_message_queues(topic)
            except NoRouteError:  # the broker registers a new topic with the NameServer shortly
                queues = []
            for mq in queues:
                offset = 0
                while True:
                    result = await consumer.pull(mq, "*", offset, 32)
                    if result.status is not PullStatus.FOUND:
                        break
                    got += result.messages
                    offset = result.next_begin_offset
            if len(got) >= expect or time.monotonic() > deadline:
                return got
            await asyncio.sleep(0.2)


async def test_sync_send_result_and_round_trip_of_keys_tags_properties(cluster: Cluster) -> None:
    topic = unique("T_sync")
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        msg = Message(topic, b"hello", flag=7, properties={"color": "blue"})
        msg.tags = "TagA"
        msg.keys = ["k1", "k2"]
        result = await producer.send(msg)
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id == msg.uniq_key and len(result.msg_id) == 32
        assert len(result.offset_msg_id) == 32 and result.message_queue.topic == topic
        assert result.queue_offset == 0
    (got,) = await read_all(cluster, topic, 1)
    assert got.body == b"hello" and got.flag == 7 and got.tags == "TagA" and got.keys == ["k1", "k2"]
    assert got.properties["color"] == "blue" and got.msg_id == result.msg_id
    assert got.offset_msg_id == result.offset_msg_id and got.queue_id == result.message_queue.queue_id


async def test_async_awaitable_callback_and_oneway(cluster: Cluster) -> None:
    topic = unique("T_async")
    seen: list[SendResult | None] = []
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        futures = [await producer.send_async(Message(topic, b"a%d" % i)) for i in range(300)]
        await producer.send_async(Message(topic, b"cb"), lambda r, e: seen.append(r))
        await producer.send_oneway(Message(topic, b"oneway"))
        results = await asyncio.gather(*futures)
        await producer.flush()
        assert producer.inflight == 0
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 300
    assert seen and seen[0] is not None and seen[0].status is SendStatus.SEND_OK
    by_queue: dict[int, list[int]] = {}
    for r in results:
        by_queue.setdefault(r.message_queue.queue_id, []).append(r.queue_offset)
    got = await read_all(cluster, topic, 302)
    assert sorted(m.body for m in got) == sorted([b"a%d" % i for i in range(300)] + [b"cb", b"oneway"])


async def test_large_auto_batches_from_reused_buffers_arrive_intact(cluster: Cluster) -> None:
    """Auto-batches of 128 KiB and more go out from buffers the producer reuses once the broker
    has answered: rounds of distinct 1 KiB bodies, each round's buffers carrying the next
    round's batches, every body stored as it was sent."""
    topic = unique("T_pool")
    sent: list[bytes] = []
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        for rnd in range(3):
            bodies = [(b"%d-%d-" % (rnd, i)).ljust(1024, b"abcdefgh"[rnd + i % 5:rnd + i % 5 + 1]) for i in range(400)]
            futures = [await producer.send_async(Message(topic, body)) for body in bodies]
            results = await asyncio.gather(*futures)
            assert all(r.status is SendStatus.SEND_OK for r in results)
            sent += bodies
        assert producer._acc.buffers.idle_bytes > 0  # the buffers did come back for reuse
    got = await read_all(cluster, topic, len(sent))
    assert sorted(m.body for m in got) == sorted(sent)


async def test_explicit_queue_and_hash_selector_keep_keys_together(cluster: Cluster) -> None:
    topic = unique("T_order")
    async with Producer(unique("P"), cluster.ns, default_topic_queue_nums=8, **FAST) as producer:
        first = await producer.send(Message(topic, b"x"))
        target = MessageQueue(topic, first.message_queue.broker_name, 5)
        assert (await producer.send(Message(topic, b"q5"), queue=target)).message_queue.queue_id == 5
        queue_of: dict[str, set[int]] = {}
        for i in range(80):
            key = f"order-{i % 10}"
            r = await producer.send(Message(topic, b"%d" % i), selector=SelectByHash(), arg=key)
            queue_of.setdefault(key, set()).add(r.message_queue.queue_id)
        assert all(len(q) == 1 for q in queue_of.values())
        assert len(set().union(*queue_of.values())) > 1
        async_result = await producer.send_and_wait(Message(topic, b"s"), selector=SelectByHash(), arg="order-3")
        assert {async_result.message_queue.queue_id} == queue_of["order-3"]


async def test_batch_is_split_by_size_and_results_are_per_message(cluster: Cluster) -> None:
    topic = unique("T_batch")
    async with Producer(unique("P"), cluster.ns, batch_max_bytes=2000, **FAST) as producer:
        msgs = [Message(topic, b"b" * 300, properties={"i": str(i)}) for i in range(20)]
        results = await producer.send_batch(msgs)
        assert len(results) == 20 and all(r.status is SendStatus.SEND_OK for r in results)
        assert [r.msg_id for r in results] == [m.uniq_key for m in msgs]
        with pytest.raises(MessageValidationError, match="one topic"):
            await producer.send_batch([Message(topic, b"x"), Message(topic + "x", b"y")])
        delayed = Message(topic, b"x")
        delayed.delay_time_level = 1
        with pytest.raises(MessageValidationError, match="delay"):
            await producer.send_batch([delayed])
    got = await read_all(cluster, topic, 20)
    assert sorted(int(m.properties["i"]) for m in got) == list(range(20))


async def test_delay_level_holds_the_message_back(cluster: Cluster) -> None:
    topic = unique("T_delay")
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        await producer.send(Message(topic, b"now"))
        msg = Message(topic, b"later")
        msg.delay_time_level = 1  # 1 s
        sent_at = time.time()
        await producer.send(msg)
    got = await read_all(cluster, topic, 2, timeout_s=10)
    later = [m for m in got if m.body == b"later"]
    assert later and later[0].store_timestamp / 1000 >= sent_at + 0.9


async def test_large_bodies_are_compressed_on_the_wire(cluster: Cluster) -> None:
    topic = unique("T_zip")
    body = b"compress me " * 1000
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        result = await producer.send(Message(topic, body))
        small = await producer.send(Message(topic, b"small"))
        assert small.status is SendStatus.SEND_OK
        instance = producer._instance
        assert instance is not None
        addr = instance.master_addr(result.message_queue.broker_name)
        header = PullMessageRequestHeader(
            "raw_reader", topic, result.message_queue.queue_id, result.queue_offset, 1, FLAG_SUBSCRIPTION, 0, 0, 0, "*"
        )
        for _ in range(100):  # the broker dispatches to the consume queue asynchronously
            resp = await instance.remoting.invoke(
                addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.encode()), 3000
            )
            if resp.body:
                break
            await asyncio.sleep(0.05)
        (raw,) = decode_records(resp.body_bytes(), inflate=False)
        assert raw.sys_flag & c.COMPRESSED_FLAG and zlib.decompress(raw.body) == body
    got = await read_all(cluster, topic, 2)
    assert body in {m.body for m in got}


async def test_invalid_messages_fail_before_sending(cluster: Cluster) -> None:
    async with Producer(unique("P"), cluster.ns, max_message_size=1024, **FAST) as producer:
        for bad in (Message("", b"x"), Message("T", b""), Message("T", b"x" * 2000), Message("a b", b"x")):
            with pytest.raises(MessageValidationError):
                await producer.send(bad)
            with pytest.raises(MessageValidationError):
                await producer.send_async(bad)
        assert producer.inflight == 0


async def test_refused_properties_leave_the_batch_intact(cluster: Cluster) -> None:
    """A message whose properties cannot go out is refused by send_async itself; the messages
    batched around it are sent unharmed and its in-flight slot is given back."""
    topic = unique("T_badprops")
    async with Producer(unique("P"), cluster.ns, batch_linger_ms=50, **FAST) as producer:
        first = await producer.send_async(Message(topic, b"before", properties={"k": "v"}))
        for bad in ({"k": "a\x01b"}, {"k": 1}, {"": "v"}, {"k": "v" * 40_000}):
            with pytest.raises(MessageValidationError):
                await producer.send_async(Message(topic, b"bad", properties=bad))  # type: ignore[arg-type]
        last = await producer.send_async(Message(topic, b"after", properties={"k": "\u00e9t\u00e9"}))
        results = [await first, await last]
        assert producer.inflight == 0
    got = await read_all(cluster, topic, 2)
    assert sorted((m.body, m.properties["k"]) for m in got) == [(b"after", "\u00e9t\u00e9"), (b"before", "v")]
    assert {m.msg_id for m in got} == {r.msg_id for r in results}


async def test_send_hooks_see_every_send(cluster: Cluster) -> None:
    topic = unique("T_hook")
    before: list[str] = []
    after: list[SendContext] = []

    class Hook:
        def before_send(self, ctx: SendContext) -> None:
            before.append(ctx.mode)

        def after_send(self, ctx: SendContext) -> None:
            after.append(ctx)

    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        producer.add_send_hook(Hook())
        await producer.send(Message(topic, b"1"))
        await producer.send_and_wait(Message(topic, b"2"))
        await producer.send_oneway(Message(topic, b"3"))
    assert before == ["SYNC", "ASYNC", "ONEWAY"]
    assert after[0].result is not None and after[0].exception is None and after[0].broker_addr
    assert after[1].result is not None and after[2].result is None


async def test_backpressure_bounds_inflight_and_shutdown_drains(cluster: Cluster) -> None:
    topic = unique("T_bp")
    peak = 0
    futures = []
    producer = Producer(unique("P"), cluster.ns, max_inflight_messages=50, batch_max_messages=16, **FAST)
    await producer.start()
    for i in range(1000):
        futures.append(await producer.send_async(Message(topic, b"%d" % i)))
        peak = max(peak, producer.inflight)
    await producer.shutdown()
    assert peak <= 50
    assert all(f.done() and f.exception() is None for f in futures)
    assert len({f.result().msg_id for f in futures}) == 1000


async def test_delay_messages_sent_async_travel_alone(cluster: Cluster) -> None:
    topic = unique("T_adelay")
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        msgs = [Message(topic, b"d%d" % i) for i in range(3)]
        for m in msgs:
            m.delay_time_level = 1
        results = await asyncio.gather(*[await producer.send_async(m) for m in msgs])
        assert all(r.status is SendStatus.SEND_OK for r in results)


async def test_namesrv_failover_skips_a_dead_namesrv(cluster: Cluster) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    topic = unique("T_nsfail")
    async with Producer(unique("P"), f"{dead};{cluster.ns}", **FAST) as producer:
        producer._instance._namesrv_index = 0  # type: ignore[union-attr]  # start on the dead one
        result = await producer.send(Message(topic, b"x"))
        assert result.status is SendStatus.SEND_OK


async def test_no_route_is_a_clear_error(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.integration.client.conftest import start_broker
    from tests.support.processes import start_namesrv

    base = tmp_path_factory.mktemp("noauto")
    namesrv = start_namesrv(base / "ns")
    conf = base / "noauto.conf"
    conf.write_text("autoCreateTopicEnable=false\n")
    broker = start_broker(namesrv.addr, base / "store", "-c", str(conf))
    try:
        async with Producer(unique("P"), namesrv.addr, **FAST) as producer:
            with pytest.raises(NoRouteError, match="no route for topic"):
                await producer.send(Message(unique("T_missing"), b"x"))
    finally:
        broker.close()
        namesrv.close()
