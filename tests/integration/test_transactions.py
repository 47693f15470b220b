"""Transactional messages end to end: Apogee's TransactionProducer against real processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.client.transaction_producer import LocalTransactionState, TransactionProducer
from apogee.common.message import Message
from apogee.common.message_codec import decode_records
from apogee.remoting.client import RemotingClient
from tests.integration.test_broker import start_broker
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import pull_request, send_request, wait_caught_up, wait_checked_past

CONF = "transactionCheckInterval=300\ntransactionTimeOut=1000\nmappedFileSizeCommitLog=67108864\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """One NameServer and broker for the module: each test has a producer group of its own
    (a check-back goes to any producer of the half's group) and topics of its own."""
    base = tmp_path_factory.mktemp("tx")
    namesrv = start_namesrv(base / "ns")
    broker = start_broker(namesrv.addr, base / "store", CONF)
    yield namesrv, broker
    broker.close()
    namesrv.close()


async def visible(broker: ServerProcess, topic: str, queues: int = 4) -> list[bytes]:
    client = RemotingClient()
    try:
        bodies = []
        for q in range(queues):
            resp = await client.invoke(broker.addr, pull_request(topic, q, 0, suspend_ms=30), 5000)
            if resp.code == 0:
                bodies += [m.body for m in decode_records(resp.body_bytes())]
        return sorted(bodies)
    finally:
        await client.close()


async def visible_is(expected: list[bytes], broker: ServerProcess, topic: str) -> bool:
    return await visible(broker, topic) == expected


class Listener:
    def __init__(self, decision: object, check: object = LocalTransactionState.COMMIT_MESSAGE) -> None:
        self.decision = decision
        self.check = check
        self.executed: list[tuple[bytes, object]] = []
        self.checked: list[str] = []

    def execute_local_transaction(self, msg: Message, arg: object) -> object:
        self.executed.append((msg.body, arg))
        return self.decision

    async def check_local_transaction(self, msg) -> object:
        self.checked.append(msg.msg_id)
        return self.check


async def make_topic(broker: ServerProcess, prefix: str) -> str:
    """A new topic holding one message, b"seed", readable (dispatched) on return."""
    topic = unique(prefix)
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request(topic, b"seed"), 5000)
    finally:
        await client.close()
    await wait_caught_up(broker.addr)  # the ConsumeQueue trails the send's answer
    return topic


async def visible_at_least(n: int, broker: ServerProcess, topic: str) -> list[bytes] | None:
    got = await visible(broker, topic)
    return got if len(got) >= n else None


async def test_commit_is_visible_once_and_rollback_never(cluster) -> None:
    namesrv, broker = cluster
    topic = await make_topic(broker, "TxOrders")
    committing = Listener(LocalTransactionState.COMMIT_MESSAGE)
    async with TransactionProducer(unique("TxGroup"), namesrv.addr, listener=committing) as producer:
        result = await producer.send_message_in_transaction(Message(topic, b"paid"), arg=42)
        assert result.local_state is LocalTransactionState.COMMIT_MESSAGE
        assert committing.executed == [(b"paid", 42)]
        producer.listener = Listener(LocalTransactionState.ROLLBACK_MESSAGE)
        await producer.send_message_in_transaction(Message(topic, b"cancelled"))
    assert await wait_until(lambda: visible_at_least(2, broker, topic), 10, "the commit") == [b"paid", b"seed"]
    # The check passes both halves as decided: nothing more appears.
    await wait_checked_past(broker.addr)
    assert await visible(broker, topic) == [b"paid", b"seed"]


async def test_unknown_then_commit_on_check(cluster) -> None:
    namesrv, broker = cluster
    topic = await make_topic(broker, "TxLater")
    listener = Listener(LocalTransactionState.UNKNOW, check=LocalTransactionState.COMMIT_MESSAGE)
    group = unique("TxGroup")
    async with TransactionProducer(group, namesrv.addr, listener=listener, heartbeat_broker_interval_ms=500) as prod:
        sent = time.monotonic()
        await prod.send_message_in_transaction(Message(topic, b"decided-by-check"))
        assert await visible(broker, topic) == [b"seed"]
        await wait_until(lambda: visible_at_least(2, broker, topic), 10, "the commit decided by the check")
        elapsed = time.monotonic() - sent
        assert await visible(broker, topic) == [b"decided-by-check", b"seed"]
        assert 0.9 <= elapsed < 5, elapsed  # after the 1 s timeout, within a few check intervals
        assert len(listener.checked) == 1


async def test_listener_exception_leaves_it_to_the_check(cluster) -> None:
    namesrv, broker = cluster
    topic = await make_topic(broker, "TxBoom")

    class Boom(Listener):
        def execute_local_transaction(self, msg, arg):
            raise RuntimeError("database down")

    listener = Boom(None, check=LocalTransactionState.ROLLBACK_MESSAGE)
    group = unique("TxGroup")
    async with TransactionProducer(group, namesrv.addr, listener=listener, heartbeat_broker_interval_ms=500) as prod:
        result = await prod.send_message_in_transaction(Message(topic, b"x"))
        assert result.local_state is LocalTransactionState.UNKNOW
        await wait_until(lambda: listener.checked, 10, "the check-back")
    assert await visible(broker, topic) == [b"seed"]


async def test_a_new_producer_answers_for_a_killed_one(cluster) -> None:
    namesrv, broker = cluster
    topic, group = await make_topic(broker, "TxOrphan"), unique("TxGroup")
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "tx_producer_proc.py"), namesrv.addr, topic, group],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"half-sent"
        proc.kill()
        proc.wait()
        listener = Listener(LocalTransactionState.COMMIT_MESSAGE)
        async with TransactionProducer(group, namesrv.addr, listener=listener, heartbeat_broker_interval_ms=300):
            await wait_until(lambda: visible_at_least(2, broker, topic), 10, "the orphan committed")
        assert await visible(broker, topic) == [b"orphan", b"seed"]
        assert len(listener.checked) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()


def test_sync_facade_commits(cluster) -> None:
    from apogee.client.sync import SyncTransactionProducer

    namesrv, broker = cluster
    topic = asyncio.run(make_topic(broker, "TxSync"))
    calls = []

    class Blocking:
        def execute_local_transaction(self, msg, arg):
            calls.append(arg)  # a plain function: runs on a worker thread
            return True

        def check_local_transaction(self, msg):
            return True

    with SyncTransactionProducer(unique("TxSyncGroup"), namesrv.addr, listener=Blocking()) as producer:
        result = producer.send_message_in_transaction(Message(topic, b"sync-commit"), arg="a")
    assert result.local_state is LocalTransactionState.COMMIT_MESSAGE and calls == ["a"]
    got = asyncio.run(wait_until(lambda: visible_at_least(2, broker, topic), 10, "the commit"))
    assert got == [b"seed", b"sync-commit"]
