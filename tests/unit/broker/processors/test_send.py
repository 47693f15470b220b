"""SendProcessor: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK
against a real store; what is stored where, and every refusal changes nothing.

(The refusals of a single send are fed to both the full and the C path in
``tests/unit/broker/test_send_parity.py``.)
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import pytest

from apogee.broker.processors.send import SendProcessor
from apogee.broker.subscriptions import SubscriptionGroupConfig
from apogee.common import constants as c
from apogee.common.message_codec import encode_batch, properties_to_string
from apogee.common.message_id import create_offset_msg_id
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from apogee.remoting.server import Deferred, FieldsAnswer, RequestDispatcher
from apogee.store import FlushDiskType
from tests.support.wire import send_request
from tests.unit.broker.harness import Tables, answered, call, connection


def processor(t: Tables) -> SendProcessor:
    return SendProcessor(
        config=t.config, store_config=t.store_config, store=t.store, topics=t.topics,
        subscriptions=t.subscriptions, table_writer=t.table_writer, address=t.address,
        max_delay_level=t.max_delay_level, topics_changed=t.topics_changed, stats=t.stats,
    )


def v1_send(topic: str, body: bytes = b"v1", *, props: dict[str, str] | None = None, queue_id: int = 0,
            sys_flag: int = 0, batch: bool = False, reconsume_times: int = 0) -> RemotingCommand:
    """SEND_MESSAGE, or SEND_BATCH_MESSAGE (which travels with the V2 header)."""
    values = {
        "producer_group": "pg", "topic": topic, "default_topic": "TBW102", "default_topic_queue_nums": 4,
        "queue_id": queue_id, "sys_flag": sys_flag, "born_timestamp": int(time.time() * 1000), "flag": 7,
        "properties": properties_to_string(props or {"WAIT": "true"}), "reconsume_times": reconsume_times,
    }
    if batch:
        return RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, SendMessageRequestHeaderV2(**values, batch=True).encode(), body  # type: ignore[arg-type]
        )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, SendMessageRequestHeader(**values).encode(), body)  # type: ignore[arg-type]


def fields(answer: object) -> dict[str, str]:
    """A send's answer fields, whichever shape it took (the C path answers a FieldsAnswer)."""
    if isinstance(answer, RemotingCommand):
        assert answer.code == ResponseCode.SUCCESS, answer
        return {k: str(v) for k, v in (answer.ext_fields or {}).items()}
    assert isinstance(answer, FieldsAnswer), answer
    assert answer.code == ResponseCode.SUCCESS
    return {k: str(v) for k, v in zip(answer.keys, answer.values, strict=True)}


def registered(sender: SendProcessor, code: int) -> Any:
    """The handler a broker's dispatcher runs for ``code`` (the C fast path when it is built,
    the full path under APOGEE_NO_EXTENSIONS=1)."""
    dispatcher = RequestDispatcher()
    sender.register_with(dispatcher)
    return dispatcher._processors[code]


def stored_state(t: Tables) -> tuple[object, ...]:
    return dict(t.topics.table), dict(t.subscriptions.table), t.store.max_phy_offset


# --- single sends -------------------------------------------------------------------------------


async def test_send_v1_stores_the_message_without_wait_and_with_the_cluster(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    sender = processor(tables)
    req = v1_send("T", props={"KEYS": "k", "WAIT": "true"}, queue_id=2)
    answer = fields(await call(sender.send, connection(), req))
    assert answer["queueId"] == "2" and answer["queueOffset"] == "0"
    [msg] = await tables.messages("T", 2)
    assert msg.body == b"v1" and msg.flag == 7 and msg.born_host == ("127.0.0.1", 5555)
    assert msg.properties == {"KEYS": "k", "CLUSTER": "UnitCluster"}
    assert msg.store_host == tables.address.store_host
    assert answer["msgId"] == create_offset_msg_id("127.0.0.1", 10911, msg.commit_log_offset)


async def test_send_v2_takes_the_same_path_and_answers_every_field(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    sender = processor(tables)
    handler = registered(sender, RequestCode.SEND_MESSAGE_V2)
    answer = fields(await call(handler, connection(), send_request("T", b"v2", queue_id=1, tags="A")))
    assert set(answer) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    [msg] = await tables.messages("T", 1)
    assert msg.properties == {"TAGS": "A", "CLUSTER": "UnitCluster"}


async def test_a_send_to_a_new_topic_creates_it_from_the_template_and_says_so(tables: Tables) -> None:
    sender = processor(tables)
    fields(await call(sender.send, connection(), v1_send("Fresh", queue_id=-1)))
    config = tables.topics.get("Fresh")
    assert config is not None and config.write_queue_nums == 4
    assert tables.topic_changes  # the NameServers are told
    assert [len(await tables.messages("Fresh", q)) for q in range(4)].count(1) == 1


@pytest.mark.parametrize("tables", [FlushDiskType.SYNC_FLUSH], indirect=True)
async def test_under_sync_flush_the_answer_waits_for_the_disk(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    answer = processor(tables).send(connection(), v1_send("T"))
    assert isinstance(answer, Deferred) and not answer.future.done()  # answered once the disk has it
    fields(answer.answer(await answer.future))


@pytest.mark.parametrize(("topic", "code", "remark"), [
    ("Missing", ResponseCode.TOPIC_NOT_EXIST, "not exist"),
    ("Bad Name", ResponseCode.SYSTEM_ERROR, "characters"),
    (c.SCHEDULE_TOPIC, ResponseCode.NO_PERMISSION, "forbidden"),
], ids=["missing", "bad name", "system topic"])
async def test_send_v1_refusals_change_nothing(tables: Tables, topic: str, code: int, remark: str) -> None:
    tables.topics.delete("TBW102")  # no auto-creation
    before = stored_state(tables)
    answer = await answered(processor(tables).send, connection(), v1_send(topic))
    assert answer.code == code and remark in (answer.remark or "")
    assert stored_state(tables) == before and not tables.topic_changes


async def test_a_delayed_send_waits_in_the_schedule_topic(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    sender = processor(tables)
    fields(await call(sender.send, connection(), v1_send("T", props={"DELAY": "2", "WAIT": "true"}, queue_id=3)))
    fields(await call(sender.send, connection(), v1_send("T", props={"DELAY": "99"}, queue_id=1)))
    [two] = await tables.messages(c.SCHEDULE_TOPIC, 1)
    assert two.properties == {"DELAY": "2", "WAIT": "true", "CLUSTER": "UnitCluster", "REAL_TOPIC": "T",
                              "REAL_QID": "3"}
    [highest] = await tables.messages(c.SCHEDULE_TOPIC, tables.max_delay_level - 1)  # above the highest: the highest
    assert highest.properties["DELAY"] == str(tables.max_delay_level) and highest.properties["REAL_QID"] == "1"
    assert await tables.messages("T", 3) == []


async def test_a_transaction_message_is_stored_as_a_half_message(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    props = {"TRAN_MSG": "true", "PGROUP": "pg", "WAIT": "true"}
    fields(await call(processor(tables).send, connection(), v1_send("T", props=props, queue_id=2,
                                                                    sys_flag=c.TRANSACTION_PREPARED_TYPE)))
    [half] = await tables.messages(c.RMQ_SYS_TRANS_HALF_TOPIC, 0)
    assert half.properties == {**props, "CLUSTER": "UnitCluster", "REAL_TOPIC": "T", "REAL_QID": "2"}  # WAIT kept
    assert c.transaction_type(half.sys_flag) == c.TRANSACTION_NOT_TYPE
    assert await tables.messages("T", 2) == []


async def test_a_broker_that_rejects_transactions_refuses_a_half_message(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    tables.config.reject_transaction_message = True
    before = stored_state(tables)
    answer = await answered(processor(tables).send, connection(), v1_send("T", props={"TRAN_MSG": "true"}))
    assert answer.code == ResponseCode.NO_PERMISSION and stored_state(tables) == before


async def test_a_send_to_a_retry_topic_at_the_max_reconsume_times_goes_to_the_dlq(tables: Tables) -> None:
    """RocketMQ's ``reconsumeTimes >= maxReconsumeTimes``: the client counted this attempt."""
    tables.subscriptions.put(SubscriptionGroupConfig("G", retry_max_times=2))
    sender = processor(tables)
    fields(await call(sender.send, connection(), v1_send("%RETRY%G", b"again", reconsume_times=1)))
    fields(await call(sender.send, connection(), v1_send("%RETRY%G", b"dead", reconsume_times=2)))
    assert [m.body for m in await tables.messages("%RETRY%G", 0)] == [b"again"]
    assert [m.body for m in await tables.messages("%DLQ%G", 0)] == [b"dead"]


async def test_a_send_to_the_retry_topic_of_a_missing_group_is_refused(tables: Tables) -> None:
    tables.subscriptions.auto_create = False
    before = stored_state(tables)
    answer = await answered(processor(tables).send, connection(), v1_send("%RETRY%Nobody"))
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and stored_state(tables) == before


# --- batches ------------------------------------------------------------------------------------


async def test_a_batch_is_stored_as_consecutive_messages(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    body = encode_batch([(0, f"m{i}".encode(), {"KEYS": f"k{i}"}) for i in range(3)])
    answer = fields(await call(processor(tables).send, connection(), v1_send("T", body, queue_id=1, batch=True)))
    assert answer["queueOffset"] == "0"
    messages = await tables.messages("T", 1)
    assert [(m.body, m.queue_offset, m.properties["KEYS"]) for m in messages] == [
        (b"m0", 0, "k0"), (b"m1", 1, "k1"), (b"m2", 2, "k2")]
    assert all(m.properties["CLUSTER"] == "UnitCluster" for m in messages)


async def test_a_compressed_batch_is_stored_inflated(tables: Tables) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    body = zlib.compress(encode_batch([(0, b"a", {}), (0, b"b", {})]))
    fields(await call(processor(tables).send, connection(),
                      v1_send("T", body, batch=True, sys_flag=c.COMPRESSED_FLAG)))
    assert [m.body for m in await tables.messages("T", 0)] == [b"a", b"b"]


@pytest.mark.parametrize(("body", "remark"), [
    (encode_batch([(0, b"x", {"DELAY": "1"})]), "delay"),
    (b"\x00\x00\x00\x10not a batch", "malformed batch"),
    (b"not zlib", "inflate"),
], ids=["delay", "malformed", "not zlib"])
async def test_a_bad_batch_is_refused_whole(tables: Tables, body: bytes, remark: str) -> None:
    tables.topics.put(TopicConfigData("T", 4, 4))
    before = stored_state(tables)
    flag = c.COMPRESSED_FLAG if remark == "inflate" else 0
    answer = await answered(processor(tables).send, connection(), v1_send("T", body, batch=True, sys_flag=flag))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL and remark in (answer.remark or "").lower(), answer.remark
    assert stored_state(tables) == before


# --- send back ----------------------------------------------------------------------------------


async def stored(t: Tables, topic: str = "T", props: dict[str, str] | None = None) -> int:
    """Store one message in ``topic`` queue 0; its CommitLog offset."""
    t.topics.put(TopicConfigData(topic, 4, 4))
    fields(await call(processor(t).send, connection(), v1_send(topic, b"payload", props=props or {"TAGS": "A"})))
    [msg] = (await t.messages(topic, 0))[-1:]
    return msg.commit_log_offset


def send_back(offset: int, group: str = "G", delay_level: int = 0, **kw: object) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delay_level=delay_level, **kw)  # type: ignore[arg-type]
    return RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.encode())


async def test_a_message_handed_back_goes_to_the_retry_topic_after_a_delay(tables: Tables) -> None:
    offset = await stored(tables)
    answer = await answered(processor(tables).send_back, connection(), send_back(offset, origin_msg_id="UNIQ"))
    assert answer.code == ResponseCode.SUCCESS
    [retry] = await tables.messages(c.SCHEDULE_TOPIC, tables.max_delay_level - 1)  # 3 + 0 reconsumes
    assert retry.properties == {
        "TAGS": "A", "CLUSTER": "UnitCluster", "RETRY_TOPIC": "T", "WAIT": "false", "DELAY": "3",
        # the original's offset message id, not the header's originMsgId (as RocketMQ)
        "ORIGIN_MESSAGE_ID": create_offset_msg_id("127.0.0.1", 10911, offset),
        "REAL_TOPIC": "%RETRY%G", "REAL_QID": "0",
    }
    assert retry.reconsume_times == 1 and retry.body == b"payload"
    assert tables.topics.get("%RETRY%G") is not None and tables.topic_changes


@pytest.mark.parametrize(("delay_level", "max_times"), [(-1, None), (0, 0)])
async def test_a_message_handed_back_goes_to_the_dlq_when_asked_or_past_the_max(
    tables: Tables, delay_level: int, max_times: int | None
) -> None:
    offset = await stored(tables)
    req = send_back(offset, delay_level=delay_level, max_reconsume_times=max_times)
    assert (await answered(processor(tables).send_back, connection(), req)).code == ResponseCode.SUCCESS
    [dead] = await tables.messages("%DLQ%G", 0)
    assert dead.body == b"payload" and dead.reconsume_times == 1
    assert dead.properties == {"TAGS": "A", "CLUSTER": "UnitCluster", "RETRY_TOPIC": "T", "WAIT": "false", "DELAY": "0",
                               "ORIGIN_MESSAGE_ID": create_offset_msg_id("127.0.0.1", 10911, offset)}


async def test_a_group_without_retry_queues_drops_what_is_handed_back(tables: Tables) -> None:
    offset = await stored(tables)
    tables.subscriptions.put(SubscriptionGroupConfig("G", retry_queue_nums=0))
    before = stored_state(tables)
    assert (await answered(processor(tables).send_back, connection(), send_back(offset))).code == ResponseCode.SUCCESS
    assert stored_state(tables) == before


async def test_send_back_refusals_change_nothing(tables: Tables) -> None:
    offset = await stored(tables)
    sender = processor(tables)
    before = stored_state(tables)
    cases: list[tuple[RemotingCommand, int, str]] = [
        (send_back(offset + 1), ResponseCode.SYSTEM_ERROR, "look message by offset failed"),
        (send_back(offset, group="bad group"), ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "bad group"),
        (send_back(offset, group="G" * 250), ResponseCode.SYSTEM_ERROR, "not a legal topic"),
    ]
    for req, code, remark in cases:
        answer = await answered(sender.send_back, connection(), req)
        assert answer.code == code and remark in (answer.remark or ""), answer.remark
    tables.subscriptions.auto_create = False
    answer = await answered(sender.send_back, connection(), send_back(offset, group="Nobody"))
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    tables.config.broker_permission = c.PERM_READ
    answer = await answered(sender.send_back, connection(), send_back(offset))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert stored_state(tables) == before


async def test_send_back_to_a_retry_topic_that_is_not_writable_is_refused(tables: Tables) -> None:
    offset = await stored(tables)
    tables.topics.put(TopicConfigData("%RETRY%G", 1, 1, c.PERM_READ))
    answer = await answered(processor(tables).send_back, connection(), send_back(offset))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert await tables.messages(c.SCHEDULE_TOPIC, tables.max_delay_level - 1) == []
