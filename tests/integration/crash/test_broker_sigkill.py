"""Issue 16, finding 1, against a real broker: every message the broker acknowledged under
SYNC_FLUSH before a SIGKILL is delivered after the restart, byte for byte, to a new group.

The broker writes small CommitLog and ConsumeQueue files, so the run crosses many of them and
the restart recovers from the abort mark; eight producers keep sending (single messages and
batches) to an auto-created topic until the broker dies.  ``benchmarks/crash_soak.py`` repeats
this hundreds of times with kills at file rolls; this test is the quick regression.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from apogee.client import Message, Producer, PullConsumer, PullStatus, SendStatus
from tests.support.processes import ServerProcess

pytestmark = [pytest.mark.crash]

CONF = """flushDiskType=SYNC_FLUSH
autoCreateTopicEnable=true
mappedFileSizeCommitLog=65536
mappedFileSizeConsumeQueue=2000
maxIndexNum=2000
maxHashSlotNum=500
"""


def start_broker(namesrv: str, store: Path) -> ServerProcess:
    conf = store.parent / "broker.conf"
    conf.write_text(CONF)
    return ServerProcess(["broker", "-n", namesrv, "--listen", "127.0.0.1:0", "--store-dir", str(store),
                          "--broker-ip", "127.0.0.1", "-c", str(conf)]).start()


def body(key: str) -> bytes:
    return key.encode() + b"|" + random.Random(key).randbytes(random.Random(key).randrange(0, 400))


async def send_until_killed(producer: Producer, topic: str, worker: int, acked: list[str]) -> None:
    seq = 0
    while True:
        keys = [f"{worker}-{seq + i}" for i in range(8 if seq % 40 == 39 else 1)]
        seq += len(keys)
        msgs = [Message(topic, body(k)) for k in keys]
        try:
            results = await producer.send_batch(msgs) if len(msgs) > 1 else [await producer.send(msgs[0])]
        except Exception:
            return  # the broker is gone
        if all(r.status is SendStatus.SEND_OK for r in results):
            acked.extend(keys)


async def read_all(namesrv: str, topic: str) -> dict[str, bytes]:
    got: dict[str, bytes] = {}
    async with PullConsumer("crash_reader", namesrv) as consumer:
        for mq in await consumer.fetch_message_queues(topic):
            offset = 0
            while True:
                result = await consumer.pull(mq, "*", offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                for msg in result.messages:
                    got[msg.body.split(b"|", 1)[0].decode()] = msg.body
                offset = result.next_begin_offset
    return got


async def test_acknowledged_sends_survive_a_broker_sigkill(tmp_path: Path, namesrv: ServerProcess) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrv.addr, store)
    topic = "CrashTopic"
    acked: list[str] = []
    try:
        async with Producer("crash_producer", namesrv.addr, send_timeout_ms=3000, retry_times_when_send_failed=0) as p:
            senders = [asyncio.create_task(send_until_killed(p, topic, w, acked)) for w in range(8)]
            for _ in range(600):  # until ~1500 acks (a few seconds), polling
                if len(acked) >= 1500 or all(s.done() for s in senders):
                    break
                await asyncio.sleep(0.01)
            broker.kill()  # SIGKILL, with sends in flight
            await asyncio.gather(*senders)
        assert len(acked) >= 1500
        broker.close()
        broker = start_broker(namesrv.addr, store)
        assert "crash recovery starts at offset" in broker.stderr()  # from the abort mark, not 0
        got = await read_all(namesrv.addr, topic)
        lost = [k for k in acked if k not in got]
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost, e.g. {lost[:5]}"
        assert all(got[k] == body(k) for k in acked)
    finally:
        broker.close()
