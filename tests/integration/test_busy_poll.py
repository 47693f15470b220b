"""Busy polling on real processes (docs/performance.md, "Busy polling"): a SYNC_MASTER, its
slave and a producer that all poll after traffic still store and replicate every message,
and once the traffic stops both brokers go back to sleep instead of spinning."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from apogee.client import Message, Producer
from apogee.client.types import SendStatus
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import RemotingConfig
from tests.integration.test_sync_master import GROUP, linked, runtime
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker
from tests.support.waiting import wait_until

WINDOW_US = 500


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def asleep(pid: int) -> bool:
    """Less than a fifth of a core over the next 0.25 s: a loop polling without end takes a
    whole one (it gives its core away on each turn, but nothing else here wants it)."""
    before, began = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(0.25)
    return (cpu_seconds(pid) - before) / (time.monotonic() - began) < 0.2


async def test_polling_brokers_and_client_replicate_every_send_then_go_back_to_sleep(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    conf = GROUP + f"brokerName=busy-a\nbrokerRole=SYNC_MASTER\nbusyPollUs={WINDOW_US}\n"
    master = start_broker(namesrv.addr, tmp_path / "master", conf)
    # The slave's from the command line, the master's from broker.conf: both ways set it.
    slave_conf = GROUP + "brokerName=busy-a\nbrokerRole=SLAVE\nbrokerId=1\n"
    slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf, "--busy-poll-us", str(WINDOW_US))
    client = RemotingClient()
    producer = Producer(unique("BusyProducer"), namesrv.addr, remoting=RemotingConfig(busy_poll_us=WINDOW_US))
    topic = unique("BusyPoll")
    await producer.start()
    try:
        await linked(client, master, 1)
        results = [await producer.send(Message(topic, b"polled %d" % i)) for i in range(200)]
        assert {r.status for r in results} == {SendStatus.SEND_OK}  # each one held by the slave
        assert len({(r.message_queue, r.queue_offset) for r in results}) == 200
        slave_info = await runtime(client, slave.addr)
        assert int(slave_info["commitLogMaxOffset"]) == int((await runtime(client, master.addr))["commitLogMaxOffset"])

        for proc in (master, slave):
            await wait_until(lambda pid=proc.pid: asleep(pid), 15, f"broker {proc.pid} idle after the traffic")
    finally:
        await producer.shutdown()
        await client.close()
        slave.close()
        master.close()
