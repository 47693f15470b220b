"""Message query and rewind by time (issue 6), through AdminClient, the CLI and the client."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from apogee.admin import AdminClient
from apogee.client import ConsumeResult, Message, Producer, PushConsumer
from apogee.common.java_hash import java_string_hash
from tests.integration.test_broker import start_broker
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import holds_for, next_millisecond, now_ms, wait_until
from tests.support.wire import wait_caught_up

CONF = "mappedFileSizeCommitLog=67108864\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    base = tmp_path_factory.mktemp("query")
    namesrv = start_namesrv(base / "ns")
    broker = start_broker(namesrv.addr, base / "store", CONF)
    yield namesrv, broker
    broker.close()
    namesrv.close()


async def all_committed(admin: AdminClient, group: str, topic: str) -> bool:
    return all(p.lag == 0 for p in await admin.consumer_progress(group, topic))


def apogee_admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", "admin", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
async def test_query_by_key_among_100000_with_hash_collisions(cluster) -> None:
    namesrv, broker = cluster
    topic = "Keyed"
    # "Aa" and "BB" have the same Java hashCode, so these keys share an index slot chain
    # (and every one of 100,000 keys shares its slot with others): the broker must check
    # the stored key, not just the hash.
    assert java_string_hash(f"{topic}#order-Aa") == java_string_hash(f"{topic}#order-BB")
    async with Producer("KeyedProducer", namesrv.addr) as producer:
        for start in range(0, 100_000, 1000):
            batch = [Message(topic, f"v{i}".encode(), properties={"KEYS": f"k{i}"}) for i in range(start, start + 1000)]
            await producer.send_batch(batch)
        aa = await producer.send(Message(topic, b"the Aa one", properties={"KEYS": "order-Aa"}))
        await producer.send(Message(topic, b"the BB one", properties={"KEYS": "order-BB"}))
    await wait_caught_up(broker.addr)  # dispatch builds the index behind the sends
    async with AdminClient(namesrv.addr) as admin:
        found = await admin.query_by_key(topic, "order-Aa")
        assert [f.message.body for f in found] == [b"the Aa one"]
        found = await admin.query_by_key(topic, "k54321")
        assert [f.message.body for f in found] == [b"v54321"]
        assert await admin.query_by_key(topic, "k100001") == []
        (by_uniq,) = await admin.query_by_id(aa.msg_id, topic)
        assert by_uniq.message.body == b"the Aa one"
        (by_offset_id,) = await admin.query_by_id(aa.offset_msg_id)
        assert by_offset_id.message.body == b"the Aa one"
    result = apogee_admin("query-msg-by-key", "-n", namesrv.addr, "-t", topic, "-k", "order-BB")
    assert result.returncode == 0 and "the BB one" in result.stdout and "KEYS=order-BB" in result.stdout


async def test_query_by_key_respects_the_time_range(cluster) -> None:
    namesrv, broker = cluster
    topic = "Timed"
    marks = []
    async with Producer("TimedProducer", namesrv.addr) as producer:
        mark = now_ms()
        for phase in range(3):
            marks.append(mark := next_millisecond(mark))
            next_millisecond(mark)  # every message of the phase is stored after the mark
            for i in range(3):
                await producer.send(Message(topic, f"p{phase}-{i}".encode(), properties={"KEYS": "shared"}))
            mark = next_millisecond(now_ms())  # ... and before the next one
        marks.append(next_millisecond(mark))
    await wait_caught_up(broker.addr)
    async with AdminClient(namesrv.addr) as admin:
        middle = await admin.query_by_key(topic, "shared", begin_ms=marks[1], end_ms=marks[2])
        assert sorted(f.message.body for f in middle) == [b"p1-0", b"p1-1", b"p1-2"]
        every = await admin.query_by_key(topic, "shared")
        assert len(every) == 9
        times = [f.message.store_timestamp for f in every]
        assert times == sorted(times, reverse=True)  # newest first
        assert len(await admin.query_by_key(topic, "shared", max_num=4)) == 4
    result = apogee_admin(
        "query-msg-by-offset", "-n", namesrv.addr, "-t", topic, "-b", "broker-t", "-i", "0", "-o", "0"
    )
    assert result.returncode == 0 and "Timed" in result.stdout


async def test_rewind_re_consumes_exactly_the_later_messages_while_the_consumer_runs(cluster) -> None:
    namesrv, broker = cluster
    topic, group = "Rewind", "RewindGroup"
    received: list[bytes] = []
    arrived = asyncio.Event()

    async def listener(msgs, ctx) -> ConsumeResult:
        received.extend(m.body for m in msgs)
        arrived.set()
        return ConsumeResult.CONSUME_SUCCESS

    async def wait_for(count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while len(received) < count and time.monotonic() < deadline:
            arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), 0.5)
        assert len(received) >= count, received

    async with Producer("RewindProducer", namesrv.addr) as producer:
        for i in range(6):
            await producer.send(Message(topic, f"before-{i}".encode()))
        consumer = PushConsumer(group, namesrv.addr, listener=listener, consume_from_where="FIRST_OFFSET",
                                persist_consumer_offset_interval_ms=500)
        consumer.subscribe(topic, "*")
        async with consumer:
            await wait_for(6)
            # The reset names, per queue, the message stored nearest `middle` (RocketMQ's
            # searchOffset): the "before"s are left a second behind it (the clock polled, as
            # next_millisecond does) and the "after"s are sent right after it.
            behind = now_ms() + 1000
            await wait_until(lambda: now_ms() > behind, 5, "the clock to pass a second after the befores")
            middle = next_millisecond(now_ms())
            for i in range(4):
                await producer.send(Message(topic, f"after-{i}".encode()))
            await wait_for(10)
            async with AdminClient(namesrv.addr) as admin:
                await wait_until(lambda: all_committed(admin, group, topic), 20, "the offsets of all 10 committed")
            assert sorted(received) == sorted(
                [f"before-{i}".encode() for i in range(6)] + [f"after-{i}".encode() for i in range(4)]
            )
            result = await asyncio.to_thread(
                apogee_admin, "reset-offset-by-time", "-n", namesrv.addr, "-g", group, "-t", topic, "-s", str(middle)
            )
            assert result.returncode == 0, result.stderr
            await wait_for(14)
            await holds_for(lambda: len(received) == 14, 1.5, "nothing else arrives")
            again = received[10:]
            assert sorted(again) == [f"after-{i}".encode() for i in range(4)]
