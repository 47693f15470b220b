"""The real RocketMQ C++ client (rocketmq==0.4.4) against a SYNC_MASTER Apogee broker: the
statuses RocketMQ's SendStatus has for a stored message no slave holds (issue 19, item 4).

librocketmq's SendStatus: SEND_OK 0, SEND_FLUSH_DISK_TIMEOUT 1, SEND_FLUSH_SLAVE_TIMEOUT 2,
SEND_SLAVE_NOT_AVAILABLE 3; the message id and offset still come with them.  An async send's
callback gets the status.  A sync send of librocketmq 1.2.3 treats any status but SEND_OK as
a failed attempt (``DefaultMQProducer::sendDefaultImpl``: ``continue``), so it sends the
message again, up to ``retryTimes`` -- each stored -- and then throws "No route info of this
topic": what it does against a RocketMQ SYNC_MASTER too.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from apogee.admin import AdminClient
from tests.interop.conftest import INTEROP_PYTHON, cpp, routed, sent, unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.interop]

SEND_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE = 0, 2, 3
CONF = "brokerName=cpp-sync\nbrokerRole=SYNC_MASTER\nslaveTimeout=1000\nmappedFileSizeCommitLog=1048576\n"


def linked(namesrv: ServerProcess, master: ServerProcess, count: int) -> None:
    async def check() -> bool:
        async with AdminClient(namesrv.addr) as admin:
            return (await admin.broker_runtime_info(master.addr))["haConnectionCount"] == str(count)

    asyncio.run(wait_until(check, 20, f"{count} slave(s) linked", interval_s=0.1))


def create_topic(namesrv: ServerProcess, master: ServerProcess, topic: str) -> None:
    async def create() -> None:
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, master.addr, 4)
            await wait_until(lambda: routed(admin, topic), 10, f"a route for {topic}")

    asyncio.run(create())


def stored(namesrv: ServerProcess, topic: str, at_least: int) -> int:
    """How many messages the topic's queues hold, once at least ``at_least`` (dispatch
    follows the put)."""

    async def count() -> int:
        async with AdminClient(namesrv.addr) as admin:
            got = sum(o.max_offset for o in (await admin.topic_stats(topic)).values())
        return got if got >= at_least else 0

    return asyncio.run(wait_until(count, 10, f"{at_least} messages stored", interval_s=0.05))


def statuses(namesrv: ServerProcess, topic: str, count: int, mode: str = "async") -> list[dict]:
    results = sent(cpp("produce", namesrv.addr, topic, "--count", count, "--mode", mode).wait())
    assert len(results) == count
    assert all(len(r["msg_id"]) == 32 for r in results)  # stored: the id comes back
    return results


def test_cpp_client_gets_slave_statuses_from_a_sync_master(tmp_path: Path) -> None:
    if not INTEROP_PYTHON.exists():
        pytest.fail(f"{INTEROP_PYTHON} is missing: `make test` builds it (rocketmq==0.4.4)")
    namesrv = start_namesrv(tmp_path / "namesrv")
    master = start_broker(namesrv.addr, tmp_path / "master", CONF)
    slave: ServerProcess | None = None
    topic = unique("T_sync_master")
    try:
        create_topic(namesrv, master, topic)
        assert {r["status"] for r in statuses(namesrv, topic, 3)} == {SLAVE_NOT_AVAILABLE}
        assert stored(namesrv, topic, 3) == 3
        with pytest.raises(AssertionError, match="No route info of this topic"):
            cpp("produce", namesrv.addr, topic, "--count", 1, "--mode", "sync").wait()
        assert stored(namesrv, topic, 3 + 2) > 3 + 1  # one message, stored by each attempt (answered 11)
        slave = start_broker(namesrv.addr, tmp_path / "slave", CONF.replace("SYNC_MASTER", "SLAVE") + "brokerId=1\n")
        linked(namesrv, master, 1)
        assert {r["status"] for r in statuses(namesrv, topic, 3, "sync")} == {SEND_OK}
        os.kill(slave.pid, signal.SIGSTOP)
        try:
            assert {r["status"] for r in statuses(namesrv, topic, 2)} == {FLUSH_SLAVE_TIMEOUT}
        finally:
            os.kill(slave.pid, signal.SIGCONT)
    finally:
        if slave is not None:
            slave.close()
        master.close()
        namesrv.close()
