"""Transactional messages on a real broker, driven with hand-built frames (the broker side
of issue 6; the client's TransactionProducer has tests of its own)."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest

from apogee.common.message_codec import decode_records
from apogee.common.message_id import decode_offset_msg_id
from apogee.remoting.bodies.heartbeat import HeartbeatData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from apogee.remoting.server import RequestDispatcher
from tests.integration.test_broker import SMALL_COMMITLOG, start_broker
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import pull_request, send_request, wait_caught_up, wait_checked_past

T = 5000
FAST_CHECKS = "transactionCheckInterval=300\ntransactionTimeOut=800\ntransactionCheckMax=3\n"
# Where no assertion watches the first 800 ms, halves are checked back sooner still.
FASTER_CHECKS = "transactionCheckInterval=200\ntransactionTimeOut=300\ntransactionCheckMax=3\n"


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_namesrv(tmp_path / "ns")
    yield server
    server.close()


def half_request(topic: str, body: bytes, group: str = "PG") -> RemotingCommand:
    req = send_request(topic, body, props={"TRAN_MSG": "true", "PGROUP": group}, group=group)
    req.ext_fields["f"] = "4"  # sysFlag: TRANSACTION_PREPARED_TYPE, as clients send it
    return req


def end_request(resp: RemotingCommand, decision: int, group: str = "PG", from_check: bool = False) -> RemotingCommand:
    _, _, phys = decode_offset_msg_id(resp.ext_fields["msgId"])
    header = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=int(resp.ext_fields["queueOffset"]),
        commit_log_offset=phys, commit_or_rollback=decision, msg_id=resp.ext_fields["msgId"],
        from_transaction_check=from_check,
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.encode())


async def at_least(n: int, bodies: Awaitable[list[bytes]]) -> list[bytes] | None:
    got = await bodies
    return got if len(got) >= n else None


async def visible(client: RemotingClient, addr: str, topic: str, wait_ms: int = 1500) -> list[bytes]:
    resp = await client.invoke(addr, pull_request(topic, 0, 0, suspend_ms=wait_ms), wait_ms + 3000)
    return [m.body for m in decode_records(resp.body_bytes())] if resp.code == 0 else []


async def test_commit_makes_it_visible_once_and_rollback_never(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "s")
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("Tx", b"plain"), T)  # topic exists
        committed = await client.invoke(broker.addr, half_request("Tx", b"commit-me"), T)
        rolled = await client.invoke(broker.addr, half_request("Tx", b"roll-me-back"), T)
        assert committed.code == 0 and rolled.code == 0
        assert await visible(client, broker.addr, "Tx", 500) == [b"plain"]  # halves are invisible
        assert (await client.invoke(broker.addr, end_request(committed, 8), T)).code == 0
        assert (await client.invoke(broker.addr, end_request(rolled, 12), T)).code == 0
        # A repeated decision is harmless: nothing is written twice.
        assert (await client.invoke(broker.addr, end_request(committed, 8), T)).code == 0
        await wait_caught_up(broker.addr)
        assert await visible(client, broker.addr, "Tx") == [b"plain", b"commit-me"]
        wrong = end_request(committed, 8, group="OtherGroup")
        resp = await client.invoke(broker.addr, wrong, T)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "does not own" in resp.remark
    finally:
        await client.close()
        broker.close()


class Producer:
    """A raw producer connection that answers CHECK_TRANSACTION_STATE like a client would."""

    def __init__(self, decision: int) -> None:
        self.decision = decision
        self.checks: list[CheckTransactionStateRequestHeader] = []
        dispatcher = RequestDispatcher()
        dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        self.client = RemotingClient(dispatcher=dispatcher)
        self.addr = ""

    async def join(self, addr: str, group: str = "PG") -> None:
        self.addr = addr
        body = HeartbeatData("producer-1", [group], []).encode()
        assert (
            await self.client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, body), T)
        ).code == 0

    def _on_check(self, conn, req: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.decode(req.ext_fields)
        self.checks.append(header)
        (msg,) = decode_records(req.body_bytes())
        end = EndTransactionRequestHeader(
            producer_group="PG", tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=self.decision,
            msg_id=header.msg_id or "", from_transaction_check=True,
        )
        conn.invoke_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, end.encode()))
        assert msg.topic == "TxCheck"  # the check carries the real topic


async def test_unknown_is_checked_back_and_committed(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "s", FAST_CHECKS)
    producer = Producer(decision=8)
    try:
        await producer.join(broker.addr)
        resp = await producer.client.invoke(broker.addr, half_request("TxCheck", b"decided-later"), T)
        assert resp.code == 0
        assert await visible(producer.client, broker.addr, "TxCheck", 300) == []
        assert await visible(producer.client, broker.addr, "TxCheck", 5000) == [b"decided-later"]
        assert len(producer.checks) == 1
        # A later pass finds the op: no second check, no duplicate.
        await wait_checked_past(broker.addr)
        assert len(producer.checks) == 1
        assert await visible(producer.client, broker.addr, "TxCheck", 300) == [b"decided-later"]
    finally:
        await producer.client.close()
        broker.close()


async def test_pending_half_survives_a_restart_and_is_delivered_once(tmp_path: Path, namesrv: ServerProcess) -> None:
    store = tmp_path / "s"
    conf = SMALL_COMMITLOG + "transactionCheckInterval=300\ntransactionTimeOut=1000\n"
    broker = start_broker(namesrv.addr, store, conf)
    first = Producer(decision=0)
    try:
        await first.join(broker.addr)
        decided = await first.client.invoke(broker.addr, half_request("TxCheck", b"decided-before"), T)
        pending = await first.client.invoke(broker.addr, half_request("TxCheck", b"pending"), T)
        assert decided.code == 0 and pending.code == 0
        assert (await first.client.invoke(broker.addr, end_request(decided, 8), T)).code == 0
        await first.client.close()
        broker.stop()
        broker.close()
        broker = start_broker(namesrv.addr, store, conf)
        # The original producer is gone; a new producer of the same group answers the check.
        second = Producer(decision=8)
        await second.join(broker.addr)
        got = await wait_until(
            lambda: at_least(2, visible(second.client, broker.addr, "TxCheck", 500)), 15, "the pending half committed"
        )
        assert sorted(got) == [b"decided-before", b"pending"]
        # A later check pass finds both decided: nothing more, no second check.
        await wait_checked_past(broker.addr)
        assert len(second.checks) == 1
        assert sorted(await visible(second.client, broker.addr, "TxCheck", 300)) == [b"decided-before", b"pending"]
        await second.client.close()
    finally:
        await first.client.close()
        broker.close()


async def test_undecided_half_is_discarded_after_the_check_limit(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "s", FASTER_CHECKS)
    producer = Producer(decision=0)  # always "unknown"
    try:
        await producer.join(broker.addr)
        await producer.client.invoke(broker.addr, half_request("TxCheck", b"never-decided"), T)

        async def discarded() -> RemotingCommand | None:
            resp = await producer.client.invoke(broker.addr, pull_request("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0), T)
            return resp if resp.code == 0 else None

        resp = await wait_until(discarded, 10, "the half in TRANS_CHECK_MAX_TIME_TOPIC")
        assert [m.body for m in decode_records(resp.body_bytes())] == [b"never-decided"]
        assert len(producer.checks) == 3
        assert await visible(producer.client, broker.addr, "TxCheck", 300) == []
    finally:
        await producer.client.close()
        broker.close()
