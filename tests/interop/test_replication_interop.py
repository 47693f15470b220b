"""Replication under both clients (issue 19): a master and two slaves, 200,000 messages sent
half by Apogee's Python client and half by the RocketMQ C++ client; every slave's CommitLog
files end byte-identical to the master's and its ConsumeQueues equal, the second slave
started only after the first 100,000 messages."""

from __future__ import annotations

import asyncio
from pathlib import Path

from apogee.admin import AdminClient
from apogee.client import Message, Producer, SendStatus
from apogee.remoting.client import RemotingClient
from tests.integration.test_replication import assert_replicas, runtime, wait_in_step
from tests.interop.conftest import cpp, routed
from tests.support.names import unique
from tests.support.processes import start_broker, start_namesrv
from tests.support.waiting import wait_until

# The first 100,000 records (~21 MB) fit in the first 32 MiB file, so the late slave (an empty
# slave starts at the master's last file, as in RocketMQ) holds every byte; the rest rolls over.
FILE_SIZE = 32 << 20
GROUP = f"brokerName=ha-interop\nmappedFileSizeCommitLog={FILE_SIZE}\nhaSendHeartbeatInterval=1000\n"
HALF = 50_000  # per client and phase: 4 x 50,000 = 200,000
BATCH = 1000


async def send_python(producer: Producer, topic: str, first: int) -> None:
    for start in range(first, first + HALF, BATCH):
        msgs = [
            Message(topic, b"py-%d" % i, properties={"TAGS": "TagP", "KEYS": f"py{i}", "seq": str(i)})
            for i in range(start, start + BATCH)
        ]
        results = await producer.send_batch(msgs)
        assert all(r.status is SendStatus.SEND_OK for r in results)


async def send_both(ns: str, producer: Producer, topic: str, first: int, warm: str) -> None:
    # --warmup-topic: the C++ client's first request to a new broker can fail at once (its
    # heartbeat thread connecting at the same moment); one message to another topic first.
    run = cpp("produce", ns, topic, "--count", HALF, "--mode", "batch", "--batch-size", BATCH,
              "--keys-prefix", f"cpp{first}-", "--tags", "TagC", "--warmup-topic", warm)
    await send_python(producer, topic, first)
    events = await asyncio.to_thread(run.wait, 120)
    sent = [e for e in events if e["event"] == "sent"]
    assert sum(e["count"] for e in sent) == HALF and all(e["status"] == 0 for e in sent), events[-3:]


async def test_two_slaves_hold_what_both_clients_sent_byte_for_byte(tmp_path: Path) -> None:
    namesrv = start_namesrv(tmp_path / "namesrv")
    master = start_broker(namesrv.addr, tmp_path / "master", GROUP)
    early = start_broker(namesrv.addr, tmp_path / "slave1", GROUP + "brokerRole=SLAVE\nbrokerId=1\n")
    late = None
    client = RemotingClient()
    topic, warm = unique("HaInterop"), unique("HaWarm")
    try:
        async with AdminClient(namesrv.addr) as admin:
            for name, queues in ((topic, 4), (warm, 1)):
                await admin.update_topic(name, master.addr, queues)
                await wait_until(lambda name=name: routed(admin, name), 10, f"a route for {name}")
        async with Producer(unique("P"), namesrv.addr) as producer:
            await send_both(namesrv.addr, producer, topic, 0, warm)
            late = start_broker(namesrv.addr, tmp_path / "slave2", GROUP + "brokerRole=SLAVE\nbrokerId=2\n")
            await send_both(namesrv.addr, producer, topic, HALF, warm)
        for slave in (early, late):
            await wait_in_step(client, master, slave)
        assert int((await runtime(client, master.addr))["commitLogMaxOffset"]) > FILE_SIZE  # the log rolled
        master_log, master_cq = assert_replicas(tmp_path, topic, ("slave1", "slave2"))
        assert len(master_log) >= 2 and len(master_cq) == 4
        # Every message is in some queue: 200,000 entries of 20 bytes.
        entries = sum(len(data.rstrip(b"\0")) for data in master_cq.values())
        assert 4 * HALF * 20 - 20 * 4 <= entries <= 4 * HALF * 20
    finally:
        await client.close()
        for server in (late, early, master, namesrv):
            if server is not None:
                server.close()
