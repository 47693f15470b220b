"""SYNC_MASTER between real broker processes on loopback ports (issue 19, item 4).

A put with WAIT=true is answered once a slave holds its bytes; with no slave it is
SLAVE_NOT_AVAILABLE at once, with a stopped slave (SIGSTOP) FLUSH_SLAVE_TIMEOUT after
``slaveTimeout``; both still carry the message's id and queue offset, and the Python
client returns them as statuses (no exception, no retry).  An ASYNC_MASTER answers PUT_OK
whatever its slave does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import orjson

from apogee.client import Message, Producer
from apogee.client.types import SendStatus
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker
from tests.support.waiting import wait_until

T = 5000
SLAVE_TIMEOUT_MS = 1000
GROUP = "mappedFileSizeCommitLog=1048576\nhaSendHeartbeatInterval=1000\n"


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), T)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    table: dict[str, str] = orjson.loads(resp.body_bytes())["table"]
    return table


async def linked(client: RemotingClient, master: ServerProcess, slaves: int) -> None:
    async def count() -> bool:
        return (await runtime(client, master.addr))["haConnectionCount"] == str(slaves)

    await wait_until(count, 20, f"{slaves} slave(s) linked to {master.addr}", interval_s=0.05)


async def timed_send(producer: Producer, topic: str, body: bytes) -> tuple[float, object]:
    began = time.monotonic()
    result = await producer.send(Message(topic, body))
    return time.monotonic() - began, result


async def test_sync_master_waits_for_a_slave_and_says_when_none_holds_the_message(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    conf = GROUP + f"brokerName=sync-a\nbrokerRole=SYNC_MASTER\nslaveTimeout={SLAVE_TIMEOUT_MS}\n"
    master = start_broker(namesrv.addr, tmp_path / "master", conf)
    slave: ServerProcess | None = None
    client = RemotingClient()
    topic = unique("SyncMaster")
    producer = Producer(unique("SyncProducer"), namesrv.addr)
    await producer.start()
    try:
        # No slave: SLAVE_NOT_AVAILABLE at once, stored, with its id and offset.
        elapsed, first = await timed_send(producer, topic, b"alone")
        assert first.status is SendStatus.SLAVE_NOT_AVAILABLE, first
        assert elapsed < 0.5 * SLAVE_TIMEOUT_MS / 1000
        assert first.offset_msg_id and first.msg_id
        queue, offset = first.message_queue, first.queue_offset

        slave = start_broker(namesrv.addr, tmp_path / "slave", conf.replace("SYNC_MASTER", "SLAVE") + "brokerId=1\n")
        await linked(client, master, 1)
        for i in range(20):
            result = await producer.send(Message(topic, b"held %d" % i), queue=queue)
            assert result.status is SendStatus.SEND_OK, result
            assert result.queue_offset == offset + 1 + i  # one attempt each: no retry stored twice
        # The answer came after the slave held the record: its log already reaches past it.
        slave_info = await runtime(client, slave.addr)
        assert int(slave_info["commitLogMaxOffset"]) > int(result.offset_msg_id[16:], 16)

        # A stopped slave: FLUSH_SLAVE_TIMEOUT after slaveTimeout, each of a burst waiting at the
        # same time (one after another would take ten timeouts; the slack is for a loaded CI).
        os.kill(slave.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            burst = await asyncio.gather(*(producer.send(Message(topic, b"late"), queue=queue) for _ in range(10)))
            elapsed = time.monotonic() - began
        finally:
            os.kill(slave.pid, signal.SIGCONT)
        assert {r.status for r in burst} == {SendStatus.FLUSH_SLAVE_TIMEOUT}, burst
        assert SLAVE_TIMEOUT_MS / 1000 <= elapsed < 1.5 * SLAVE_TIMEOUT_MS / 1000, elapsed
        assert sorted(r.queue_offset for r in burst) == list(range(offset + 21, offset + 31))
        assert all(r.offset_msg_id for r in burst)

        # The slave is back: it catches up and sends are SEND_OK again.
        async def held() -> bool:
            return (await producer.send(Message(topic, b"again"), queue=queue)).status is SendStatus.SEND_OK

        await wait_until(held, 10, "a SEND_OK once the slave runs again")
        assert "FLUSH_SLAVE_TIMEOUT" in master.stderr()
    finally:
        await producer.shutdown()
        await client.close()
        if slave is not None:
            slave.close()
        master.close()


async def test_async_master_answers_put_ok_whatever_its_slave_does(tmp_path: Path, namesrv: ServerProcess) -> None:
    conf = GROUP + f"brokerName=async-a\nslaveTimeout={SLAVE_TIMEOUT_MS}\n"
    master = start_broker(namesrv.addr, tmp_path / "master", conf)
    slave = start_broker(namesrv.addr, tmp_path / "slave", conf + "brokerRole=SLAVE\nbrokerId=1\n")
    client = RemotingClient()
    topic = unique("AsyncMaster")
    producer = Producer(unique("AsyncProducer"), namesrv.addr)
    await producer.start()
    try:
        await linked(client, master, 1)
        os.kill(slave.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            results = [await producer.send(Message(topic, b"x")) for _ in range(20)]
            elapsed = time.monotonic() - began
        finally:
            os.kill(slave.pid, signal.SIGCONT)
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        assert elapsed < SLAVE_TIMEOUT_MS / 1000  # none of them waited for the slave
        assert (await runtime(client, master.addr))["haRole"] == "ASYNC_MASTER"
    finally:
        await producer.shutdown()
        await client.close()
        slave.close()
        master.close()
