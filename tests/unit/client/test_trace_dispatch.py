"""What the trace hooks write and how the dispatcher sends it (apogee.client.trace), with a
stand-in for the dispatcher's own producer (no sockets here; the real one is exercised by
tests/integration/client/test_trace.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from apogee.client.config import ConsumerConfig
from apogee.client.consumer.hooks import EXCEPTION, FAILED, SUCCESS, TIME_OUT, ConsumeHooks, return_type
from apogee.client.producer.hooks import EndTransactionContext, SendContext
from apogee.client.trace.dispatcher import TraceDispatcher, trace_producer_config
from apogee.client.trace.hooks import ConsumeTraceHook, EndTransactionTraceHook, SendTraceHook, message_type
from apogee.client.trace.records import (
    EndTransactionRecord,
    MessageType,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    decode_body,
)
from apogee.client.types import ConsumeResult, SendResult, SendStatus
from apogee.common.message import Message, MessageExt, MessageQueue
from tests.support.waiting import wait_until

MQ = MessageQueue("Orders", "broker-a", 1)


class StandInProducer:
    """Takes the dispatcher's trace messages and answers each at once."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.running = False

    async def start(self) -> None:
        self.running = True

    async def shutdown(self, timeout_ms: int | None = None) -> None:
        self.running = False

    async def send_async(self, msg: Message, callback: Any = None) -> None:
        self.sent.append(msg)
        callback(None, None)


def records_sent(producer: StandInProducer) -> list:
    return [r for m in producer.sent for r in decode_body(m.body).records]


async def started(**kwargs: Any) -> tuple[TraceDispatcher, StandInProducer]:
    producer = StandInProducer()
    dispatcher = TraceDispatcher(producer, **kwargs)  # type: ignore[arg-type]
    await dispatcher.start()
    return dispatcher, producer


def send_context(msg: Message, result: SendResult | None) -> SendContext:
    return SendContext("PG", msg, "SYNC", MQ, "127.0.0.1:10911", result, None, 2.5)


def result(**kw: Any) -> SendResult:
    fields: dict[str, Any] = {"status": SendStatus.SEND_OK, "msg_id": "UNIQ1", "offset_msg_id": "OFF1",
                              "message_queue": MQ, "queue_offset": 7, "region_id": "", "trace_on": True}
    return SendResult(**{**fields, **kw})


async def test_a_pub_record_per_stored_message() -> None:
    dispatcher, producer = await started()
    hook = SendTraceHook(dispatcher)
    msg = Message("Orders", b"12345", properties={"TAGS": "TagA", "KEYS": "k1 k2"})
    hook.after_send(send_context(msg, result()))
    hook.after_send(send_context(msg, None))  # failed or oneway: nothing
    hook.after_send(send_context(msg, result(trace_on=False)))  # the broker says no traces
    hook.after_send(send_context(Message("RMQ_SYS_TRACE_TOPIC", b"x"), result()))  # traces are not traced
    hook.after_send(send_context(msg, result(status=SendStatus.FLUSH_DISK_TIMEOUT, region_id="Hangzhou")))
    await dispatcher.close()
    first, second = records_sent(producer)
    assert isinstance(first, PubRecord)
    assert (first.group, first.topic, first.msg_id, first.offset_msg_id) == ("PG", "Orders", "UNIQ1", "OFF1")
    assert (first.tags, first.keys, first.store_host, first.body_length) == ("TagA", "k1 k2", "127.0.0.1:10911", 5)
    assert (first.region_id, first.cost_ms, first.msg_type, first.success) == ("DefaultRegion", 2, 0, True)
    assert (second.region_id, second.success) == ("Hangzhou", False)
    assert producer.sent[0].properties["KEYS"] == "UNIQ1 k1 k2"
    assert not producer.running


def test_message_types_follow_the_java_producer() -> None:
    assert message_type({}) is MessageType.NORMAL
    assert message_type({"TRAN_MSG": "true"}) is MessageType.TRANS_HALF
    assert message_type({"DELAY": "3"}) is MessageType.DELAY
    assert message_type({"__STARTDELIVERTIME": "1", "TRAN_MSG": "true"}) is MessageType.DELAY


def consumed(msg_id: str, **props: str) -> MessageExt:
    msg = MessageExt("Orders", b"x", properties=dict(props))
    msg.msg_id, msg.reconsume_times = msg_id, 2
    return msg


async def test_sub_records_around_a_listener_call() -> None:
    dispatcher, producer = await started()
    hooks = ConsumeHooks("CG", 15 * 60_000)
    hooks.hooks.append(ConsumeTraceHook(dispatcher))
    msgs = [consumed("A", KEYS="ka", MSG_REGION="R1"), consumed("B", TRACE_ON="false"), consumed("C")]
    hooks.after(hooks.before(msgs, MQ), None)  # the listener raised
    await dispatcher.close()
    before_a, before_c, after_a, after_c = records_sent(producer)
    assert isinstance(before_a, SubBeforeRecord) and isinstance(after_c, SubAfterRecord)
    assert (before_a.group, before_a.msg_id, before_a.retry_times, before_a.keys) == ("CG", "A", 2, "ka")
    assert (before_a.region_id, before_c.region_id, before_c.msg_id) == ("R1", None, "C")
    assert before_a.request_id == before_c.request_id == after_a.request_id == after_c.request_id
    assert (after_a.msg_id, after_a.success, after_a.context_code, after_a.group) == ("A", False, 2, "CG")
    assert after_a.timestamp_ms >= before_a.timestamp_ms


def test_return_types_as_rocketmq_classifies_a_call() -> None:
    assert return_type(None, 1, 1000) == EXCEPTION
    assert return_type(ConsumeResult.CONSUME_SUCCESS, 1000, 1000) == TIME_OUT
    assert return_type(ConsumeResult.RECONSUME_LATER, 1, 1000) == FAILED
    assert return_type(ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT, 1, 1000) == FAILED
    assert return_type(ConsumeResult.CONSUME_SUCCESS, 1, 1000) == SUCCESS


def test_a_raising_consume_hook_does_not_stop_the_others() -> None:
    seen: list[str] = []

    class Broken:
        def before_consume(self, ctx: Any) -> None:
            raise RuntimeError("broken hook")

        def after_consume(self, ctx: Any) -> None:
            raise RuntimeError("broken hook")

    class Recorder:
        def before_consume(self, ctx: Any) -> None:
            seen.append("before")

        def after_consume(self, ctx: Any) -> None:
            seen.append(ctx.return_type)

    hooks = ConsumeHooks("CG", 1000)
    hooks.hooks.extend([Broken(), Recorder()])
    hooks.after(hooks.before([consumed("A")], MQ), ConsumeResult.CONSUME_SUCCESS)
    assert seen == ["before", SUCCESS]


async def test_end_transaction_records() -> None:
    dispatcher, producer = await started()
    msg = Message("Orders", b"x", properties={"TAGS": "T"})
    EndTransactionTraceHook(dispatcher).end_transaction(
        EndTransactionContext("PG", msg, "UNIQ1", "UNIQ1", "127.0.0.1:10911", "UNKNOW", True)
    )
    await dispatcher.close()
    (end,) = records_sent(producer)
    assert isinstance(end, EndTransactionRecord)
    assert (end.msg_type, end.transaction_state, end.from_check, end.region_id) == (2, "UNKNOW", True, "DefaultRegion")


async def test_a_full_queue_drops_and_counts_never_waits() -> None:
    dispatcher, producer = await started(capacity=5, drain_at=100, linger_s=60)
    record = SubBeforeRecord(1, None, "CG", "R", "ID", 0, None)
    assert [dispatcher.append(record) for _ in range(8)] == [True] * 5 + [False] * 3
    assert dispatcher.dropped == 3 and producer.sent == []
    await dispatcher.close()  # closing sends what is queued, without waiting for the linger
    assert len(records_sent(producer)) == 5
    assert dispatcher.append(record) is False and dispatcher.dropped == 4


async def test_records_go_once_enough_are_queued_or_the_linger_passed() -> None:
    dispatcher, producer = await started(drain_at=3, linger_s=0.05)
    record = SubBeforeRecord(1, None, "CG", "R", "ID", 0, None)
    dispatcher.append(record)
    dispatcher.append(record)
    await asyncio.sleep(0)
    assert producer.sent == []  # two wait for company
    dispatcher.append(record)
    await wait_until(lambda: len(records_sent(producer)) == 3, 5, "a drain at three records")
    assert len(producer.sent) == 1
    dispatcher.append(record)
    await wait_until(lambda: len(records_sent(producer)) == 4, 5, "the linger's drain")
    await dispatcher.close()


def test_the_trace_producer_copies_the_client_and_never_traces_itself() -> None:
    host = ConsumerConfig(namesrv_addr="127.0.0.1:9876", enable_msg_trace=True, custom_trace_topic="Mine",
                          poll_name_server_interval_ms=1000)
    config = trace_producer_config(host, "CG", "CONSUME")
    assert config.group.startswith("_INNER_TRACE_PRODUCER-CG-CONSUME-")
    assert config.instance_name == "PID_CLIENT_INNER_TRACE_PRODUCER_127.0.0.1:9876"
    assert (config.enable_msg_trace, config.custom_trace_topic) == (False, "")
    assert config.poll_name_server_interval_ms == 1000
    assert (config.send_timeout_ms, config.max_message_size) == (5000, 128_000)
