"""EndTransactionProcessor and the transaction service behind it: END_TRANSACTION commits or
rolls back a half message once, refuses what does not match, and the check-back asks a live
producer about an old undecided half and discards it after the last check."""

from __future__ import annotations

import asyncio
import time

from apogee.broker.clients import ClientChannel
from apogee.broker.processors.end_transaction import EndTransactionProcessor
from apogee.broker.transaction import TransactionService
from apogee.common import constants as c
from apogee.common.message import MessageExt
from apogee.common.message_codec import decode_record, properties_to_string
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import EndTransactionRequestHeader, SendMessageRequestHeader
from apogee.remoting.server import FieldsAnswer
from tests.unit.broker.harness import Tables, answered, call, connection, sent
from tests.unit.broker.processors.test_send import processor as send_processor


def service(t: Tables) -> TransactionService:
    return TransactionService(t.config, t.store, t.offsets, t.clients, t.address, t.max_delay_level)


def processor(t: Tables, transactions: TransactionService | None = None) -> EndTransactionProcessor:
    return EndTransactionProcessor(config=t.config, transactions=transactions or service(t))


async def half_message(t: Tables, body: bytes = b"tx", props: dict[str, str] | None = None) -> MessageExt:
    """A half message sent by producer group ``pg`` for topic T queue 1, as stored."""
    t.topics.put(TopicConfigData("T", 2, 2))
    properties = {"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": f"U{body.decode()}", **(props or {})}
    header = SendMessageRequestHeader(
        producer_group="pg", topic="T", default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
        sys_flag=c.TRANSACTION_PREPARED_TYPE, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(properties),
    )
    answer = await call(send_processor(t).send, connection(), RemotingCommand.request(
        RequestCode.SEND_MESSAGE, header.encode(), body))
    assert isinstance(answer, FieldsAnswer) and answer.code == ResponseCode.SUCCESS
    return (await t.messages(c.RMQ_SYS_TRANS_HALF_TOPIC, 0))[-1]


def end(half: MessageExt, kind: int, *, group: str = "pg", queue_offset: int | None = None,
        oneway: bool = False) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=half.queue_offset if queue_offset is None else queue_offset,
        commit_log_offset=half.commit_log_offset, commit_or_rollback=kind, msg_id=half.msg_id,
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.encode(), oneway=oneway)


async def test_a_commit_puts_the_message_in_its_topic_once(tables: Tables) -> None:
    half = await half_message(tables)
    ender = processor(tables)
    for _ in range(2):  # a repeated answer commits nothing twice
        answer = await answered(ender.end_transaction, connection(), end(half, c.TRANSACTION_COMMIT_TYPE))
        assert answer.code == ResponseCode.SUCCESS
    [committed] = await tables.messages("T", 1)
    assert committed.body == b"tx" and committed.prepared_transaction_offset == half.commit_log_offset
    assert committed.properties == half.properties == {  # what the half held, as RocketMQ
        "TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "Utx", "CLUSTER": "UnitCluster", "REAL_TOPIC": "T",
        "REAL_QID": "1"}
    assert c.transaction_type(committed.sys_flag) == c.TRANSACTION_COMMIT_TYPE
    assert len(await tables.messages(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 1


async def test_a_rollback_writes_only_the_op(tables: Tables) -> None:
    half = await half_message(tables)
    answer = await answered(processor(tables).end_transaction, connection(), end(half, c.TRANSACTION_ROLLBACK_TYPE))
    assert answer.code == ResponseCode.SUCCESS
    assert await tables.messages("T", 1) == []
    [op] = await tables.messages(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
    assert op.body == str(half.queue_offset).encode()


async def test_an_unknown_state_is_not_answered_and_decides_nothing(tables: Tables) -> None:
    half = await half_message(tables)
    assert await call(processor(tables).end_transaction, connection(), end(half, c.TRANSACTION_NOT_TYPE)) is None
    assert await tables.messages(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == []


async def test_end_transaction_refusals_decide_nothing(tables: Tables) -> None:
    half = await half_message(tables)
    ender = processor(tables)
    cases = [
        (end(half, c.TRANSACTION_PREPARED_TYPE), ResponseCode.SYSTEM_ERROR, "is not 0, 8 or 12"),
        (end(half, c.TRANSACTION_COMMIT_TYPE, group="other"), ResponseCode.SYSTEM_ERROR, "does not own"),
        (end(half, c.TRANSACTION_COMMIT_TYPE, queue_offset=half.queue_offset + 1), ResponseCode.SYSTEM_ERROR,
         "does not match"),
    ]
    for req, code, remark in cases:
        answer = await answered(ender.end_transaction, connection(), req)
        assert answer.code == code and remark in (answer.remark or ""), answer.remark
    inside = MessageExt(topic="T", queue_offset=half.queue_offset, commit_log_offset=half.commit_log_offset + 8)
    answer = await answered(ender.end_transaction, connection(), end(inside, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.SYSTEM_ERROR and "no half message" in (answer.remark or "")
    tables.config.reject_transaction_message = True
    answer = await answered(ender.end_transaction, connection(), end(half, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert await tables.messages("T", 1) == [] and await tables.messages(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == []


# --- check-back ---------------------------------------------------------------------------------


def producer(t: Tables) -> object:
    conn = connection()
    t.clients.register_producer("pg", ClientChannel(conn, "p1", 0, 0, 0))
    return conn


async def test_an_old_undecided_half_is_checked_back_with_its_check_count(tables: Tables) -> None:
    half = await half_message(tables)
    transactions = service(tables)
    later = half.store_timestamp + tables.config.transaction_time_out_ms + 1
    assert transactions.check_once(half.store_timestamp) == 0  # too young
    assert transactions.check_once(later) == 0  # no producer of its group is connected
    conn = producer(tables)
    assert transactions.check_once(later) == 1
    await asyncio.sleep(0)
    [check] = sent(conn)  # type: ignore[arg-type]
    assert check.code == RequestCode.CHECK_TRANSACTION_STATE
    copy = (await tables.messages(c.RMQ_SYS_TRANS_HALF_TOPIC, 0))[-1]
    assert copy.queue_offset == half.queue_offset + 1 and copy.properties[c.TRANSACTION_CHECK_TIMES] == "1"
    fields = check.ext_fields or {}
    assert int(fields["tranStateTableOffset"]) == copy.queue_offset
    assert int(fields["commitLogOffset"]) == copy.commit_log_offset
    checked = decode_record(check.body_bytes())
    assert checked.topic == "T" and checked.queue_id == 1  # the producer sees the real destination
    answer = await answered(processor(tables, transactions).end_transaction, connection(),
                            end(copy, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.SUCCESS
    [committed] = await tables.messages("T", 1)
    assert committed.body == b"tx" and committed.properties == copy.properties
    assert committed.properties[c.TRANSACTION_CHECK_TIMES] == "1" and committed.properties[c.TRAN_MSG] == "true"
    assert transactions.check_once(later + 10_000) == 0  # decided: never checked again


async def test_a_half_checked_the_max_times_is_discarded(tables: Tables) -> None:
    tables.config.transaction_check_max = 1
    half = await half_message(tables)
    transactions = service(tables)
    producer(tables)
    later = half.store_timestamp + tables.config.transaction_time_out_ms + 1
    assert transactions.check_once(later) == 1
    await tables.store.wait_dispatched()  # the copy it put back is in the half queue
    assert transactions.check_once(later + 10_000) == 0
    [discarded] = await tables.messages(c.TRANS_CHECK_MAX_TIME_TOPIC, 0)
    assert discarded.body == b"tx" and discarded.properties[c.TRANSACTION_CHECK_TIMES] == "1"
    await tables.store.wait_dispatched()
    assert transactions.check_once(later + 20_000) == 0 and await tables.messages("T", 1) == []


async def test_a_half_checked_back_is_decided_by_its_copy_only(tables: Tables) -> None:
    """The producer's commit of the original arrives after the check put a copy back (a slow
    producer, or one that died after its commit was sent): the copy is the transaction's one
    undecided half, and answering its check must not deliver the message a second time."""
    half = await half_message(tables)
    transactions = service(tables)
    ender = processor(tables, transactions)
    producer(tables)
    later = half.store_timestamp + tables.config.transaction_time_out_ms + 1
    assert transactions.check_once(later) == 1
    copy = (await tables.messages(c.RMQ_SYS_TRANS_HALF_TOPIC, 0))[-1]
    assert copy.queue_offset == half.queue_offset + 1
    for kind in (c.TRANSACTION_COMMIT_TYPE, c.TRANSACTION_ROLLBACK_TYPE):
        answer = await answered(ender.end_transaction, connection(), end(half, kind))
        assert answer.code == ResponseCode.SYSTEM_ERROR and "checked back" in (answer.remark or ""), answer.remark
    assert await tables.messages("T", 1) == [] and await tables.messages(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == []
    answer = await answered(ender.end_transaction, connection(), end(copy, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.SUCCESS
    [committed] = await tables.messages("T", 1)
    assert committed.body == b"tx" and committed.properties[c.TRANSACTION_CHECK_TIMES] == "1"


async def test_a_decided_half_the_check_passed_is_not_committed_again(tables: Tables) -> None:
    half = await half_message(tables)
    transactions = service(tables)
    ender = processor(tables, transactions)
    producer(tables)
    answer = await answered(ender.end_transaction, connection(), end(half, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.SUCCESS
    await tables.store.wait_dispatched()
    assert transactions.check_once(half.store_timestamp + tables.config.transaction_time_out_ms + 1) == 0
    assert transactions.half_progress == half.queue_offset + 1  # the check passed it
    answer = await answered(ender.end_transaction, connection(), end(half, c.TRANSACTION_COMMIT_TYPE))
    assert answer.code == ResponseCode.SYSTEM_ERROR and "already decided" in (answer.remark or "")
    assert len(await tables.messages("T", 1)) == 1
