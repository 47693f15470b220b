"""The sender against a scripted transport (no sockets): where each attempt goes, what the
retry rule makes of each answer, and that the producer and the Spark sink send through it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from apogee.client import Message, MessageQueue, Producer, SendStatus
from apogee.client.producer import sender as sender_module
from apogee.client.producer.accumulator import Batch
from apogee.client.producer.sender import BatchAnswer, Sender, SendSettings
from apogee.client.routes import TopicRoutes
from apogee.errors import (
    ApogeeError,
    MessageIllegalError,
    RemoteError,
    RequestTimeoutError,
    SystemBusyError,
    TopicNotExistError,
)
from apogee.remoting.bodies.route import BrokerData, QueueData, TopicRouteData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand

ADDRS = {"a": "127.0.0.1:1001", "b": "127.0.0.1:1002"}
Outcome = BaseException | RemotingCommand


def answer(code: int = ResponseCode.SUCCESS, ids: str = "ID") -> RemotingCommand:
    return RemotingCommand(code, flag=1, ext_fields={"msgId": ids, "queueId": "0", "queueOffset": "7"})


def refusal(error: RemoteError) -> RemotingCommand:
    return RemotingCommand(error.code, flag=1, remark="refused")


class Transport:
    """The part of ``RemotingClient`` a sender uses, answering from a script; every request
    is recorded as (address, request code)."""

    def __init__(self, *script: Outcome, open_connection: bool = False) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, int]] = []
        self.open_connection = open_connection

    def _next(self, addr: str, code: int) -> Outcome:
        self.calls.append((addr, code))
        return self.script.pop(0) if self.script else answer()

    def _answer(self, addr: str, code: int) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        outcome = self._next(addr, code)
        if isinstance(outcome, BaseException):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
        return fut

    def invoke_fields(self, addr: str, code: int, keys: Any, values: Any, body: Any, timeout_ms: int) -> Any:
        return self._answer(addr, code)

    def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> Any:
        return self._answer(addr, request.code)

    def connection_if_open(self, addr: str) -> Any:
        return _Connection(self, addr) if self.open_connection else None


class _Connection:
    def __init__(self, transport: Transport, addr: str) -> None:
        self.transport, self.addr = transport, addr

    def invoke_callback(self, request: RemotingCommand, timeout_ms: int, callback: Callable[..., None]) -> None:
        outcome = self.transport._next(self.addr, request.code)
        loop = asyncio.get_running_loop()
        if isinstance(outcome, BaseException):
            loop.call_soon(callback, None, outcome)
        else:
            loop.call_soon(callback, outcome, None)


class Routes(TopicRoutes):
    """A route cache whose NameServer knows one topic on brokers a and b; fetches counted."""

    def __init__(self, brokers: tuple[str, ...] = ("a", "b")) -> None:
        self.fetches = 0
        route = TopicRouteData(
            [QueueData(b, 1, 1, 6) for b in brokers], [BrokerData("c", b, {0: ADDRS[b]}) for b in brokers]
        )

        async def fetch(topic: str) -> TopicRouteData | None:
            self.fetches += 1
            return route if topic == "T" else None

        super().__init__(fetch, "ns")


def sender(transport: Transport, routes: TopicRoutes | None = None, **settings: Any) -> Sender:
    return Sender(routes or Routes(), transport, SendSettings("g", 3000, **settings))  # type: ignore[arg-type]


PREPARED = (b"body", 0, "k\x01v", "UNIQ", 0, None)


async def test_a_failed_attempt_goes_again_to_the_other_broker() -> None:
    t = Transport(RequestTimeoutError("late"))
    result = await sender(t).send_message("T", PREPARED, 3000, 2)
    assert result.status is SendStatus.SEND_OK and result.msg_id == "UNIQ"
    assert len(t.calls) == 2 and t.calls[0][0] != t.calls[1][0]
    assert {code for _, code in t.calls} == {RequestCode.SEND_MESSAGE_V2}


async def test_a_stale_route_is_fetched_again_before_the_next_attempt() -> None:
    routes = Routes()
    t = Transport(refusal(TopicNotExistError(17)))
    await sender(t, routes).send_message("T", PREPARED, 3000, 2)
    assert len(t.calls) == 2 and routes.fetches == 2


async def test_a_refused_message_is_not_sent_again() -> None:
    t = Transport(refusal(MessageIllegalError(13)))
    with pytest.raises(MessageIllegalError):
        await sender(t).send_message("T", PREPARED, 3000, 2)
    assert len(t.calls) == 1


async def test_the_last_error_is_raised_once_the_attempts_are_spent() -> None:
    t = Transport(*[refusal(SystemBusyError(2))] * 3)
    with pytest.raises(SystemBusyError) as info:
        await sender(t).send_message("T", PREPARED, 3000, 2)
    assert len(t.calls) == 3 and "failed after 3 attempt(s)" in str(info.value.__notes__)


async def test_a_fixed_queue_is_asked_again_after_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[tuple[bool, int]] = []

    def pause_before(same_broker: bool, made: int) -> float:
        pauses.append((same_broker, made))
        return 0.0

    monkeypatch.setattr(sender_module, "pause_before", pause_before)
    t = Transport(RequestTimeoutError("late"), RequestTimeoutError("late"))
    mq = MessageQueue("T", "b", 0)
    await sender(t).send_message("T", PREPARED, 3000, 2, queue=mq)
    assert [addr for addr, _ in t.calls] == [ADDRS["b"]] * 3
    assert pauses == [(False, 0), (True, 1), (True, 2)]


@pytest.mark.parametrize(("retry_not_ok", "calls", "status"), [(False, 1, "FLUSH_DISK_TIMEOUT"), (True, 2, "SEND_OK")])
async def test_a_stored_answer_that_is_not_ok_is_sent_again_only_when_asked(
    retry_not_ok: bool, calls: int, status: str
) -> None:
    t = Transport(answer(ResponseCode.FLUSH_DISK_TIMEOUT))
    s = sender(t, retry_another_broker_when_not_store_ok=retry_not_ok)
    result = await s.send_message("T", PREPARED, 3000, 2)
    assert len(t.calls) == calls and result.status.name == status


@pytest.mark.parametrize("open_connection", [True, False])
async def test_an_auto_batch_is_retried_by_the_same_rule(open_connection: bool) -> None:
    """First attempt in the connection's callback (open connection) or in the retry loop
    (none open yet): a timeout is retried on the other broker either way."""
    t = Transport(RequestTimeoutError("late"), answer(ids="A,B"), open_connection=open_connection)
    s = sender(t)
    await s.publish_info("T")
    batch = Batch("T", None)
    batch.uniqs = ["U1", "U2"]
    batch.wire = bytearray(b"body")  # the pool buffer its body is in
    settled: asyncio.Future[BatchAnswer | None] = asyncio.get_running_loop().create_future()
    s.send_batch_soon(
        batch, b"body", 2, lambda ans, exc: settled.set_result(ans) if exc is None else settled.set_exception(exc)
    )
    ans = await settled
    assert ans is not None and ans[0] is SendStatus.SEND_OK and ans[1] == ["A", "B"]
    assert len(t.calls) == 2 and t.calls[0][0] != t.calls[1][0]
    assert {code for _, code in t.calls} == {RequestCode.SEND_BATCH_MESSAGE}
    # The timed-out attempt may still have bytes queued on its connection: the buffer is
    # never given back to the pool.
    assert batch.wire is None


async def test_an_auto_batch_answered_at_its_first_attempt_keeps_its_buffer_for_the_pool() -> None:
    t = Transport(answer(ids="A"), open_connection=True)
    s = sender(t)
    await s.publish_info("T")
    batch = Batch("T", None)
    batch.uniqs = ["U1"]
    wire = batch.wire = bytearray(b"body")
    settled: asyncio.Future[BatchAnswer | None] = asyncio.get_running_loop().create_future()
    s.send_batch_soon(batch, memoryview(wire), 2, lambda ans, exc: settled.set_result(ans))
    assert (await settled) is not None and len(t.calls) == 1
    assert batch.wire is wire  # the producer gives it back (Accumulator.recycle)


# --- one sender for the producer and the Spark sink ------------------------------------------

ERRORS = [SystemBusyError(2), TopicNotExistError(17), RequestTimeoutError("late"), MessageIllegalError(13)]


async def producer_batch_attempts(error: ApogeeError) -> tuple[int, bool]:
    """(attempts, whether the send failed) of a producer's batch whose first attempt fails."""
    producer = Producer("g", "127.0.0.1:9876", client_ip="127.0.0.1")
    await producer.start()
    try:
        s = producer._sender
        assert isinstance(s, Sender)
        t = Transport(refusal(error) if isinstance(error, RemoteError) else error)
        s.remoting, s.routes = t, Routes()  # type: ignore[assignment]
        try:
            await producer.send_batch([Message("T", b"x")], queue=None)
        except ApogeeError:
            return len(t.calls), True
        return len(t.calls), False
    finally:
        await producer.shutdown()


async def sink_batch_attempts(error: ApogeeError) -> tuple[int, bool]:
    """The same for a batch the Spark sink sends."""
    pytest.importorskip("pyspark")
    from apogee.spark.errors import ApogeeSparkError
    from apogee.spark.options import SinkOptions
    from apogee.spark.writer import PartitionWriter, SinkColumns

    columns = SinkColumns("body", None, None, None, None, None, None, None, None)
    writer = PartitionWriter(SinkOptions("127.0.0.1:9876", "T"), columns)
    assert isinstance(writer.sender, Sender)
    t = Transport(refusal(error) if isinstance(error, RemoteError) else error)
    writer.sender.remoting, writer.sender.routes = t, Routes()  # type: ignore[assignment]
    try:
        await writer._send_batch("T", MessageQueue("T", "a", 0), b"body", ["U"], None)
    except ApogeeSparkError:
        return len(t.calls), True
    return len(t.calls), False


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
async def test_the_producer_and_the_spark_sink_retry_the_same_errors(
    error: ApogeeError, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sender_module, "pause_before", lambda same, made: 0.0)
    expected = (1, True) if error.retry.name == "RAISE" else (2, False)
    assert await producer_batch_attempts(error) == expected
    assert await sink_batch_attempts(error) == expected
