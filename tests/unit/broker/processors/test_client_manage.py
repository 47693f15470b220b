"""ClientManageProcessor: HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG,
GET_CONSUMER_LIST_BY_GROUP, LOCK/UNLOCK_BATCH_MQ, QUERY/UPDATE_CONSUMER_OFFSET."""

from __future__ import annotations

import asyncio

import orjson

from apogee.broker.processors.client_manage import ClientManageProcessor
from apogee.broker.subscriptions import SubscriptionGroupConfig
from apogee.common.message_codec import properties_to_string
from apogee.remoting.bodies.heartbeat import (
    ConsumerData,
    HeartbeatData,
    LockBatchRequest,
    QueueKey,
    SubscriptionData,
    decode_consumer_id_list,
    decode_lock_ok,
)
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.consumer import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from apogee.store.inner import InnerMessage
from tests.unit.broker.harness import Tables, answered, connection, sent


def processor(t: Tables) -> ClientManageProcessor:
    return ClientManageProcessor(
        config=t.config, store=t.store, topics=t.topics, subscriptions=t.subscriptions, offsets=t.offsets,
        clients=t.clients, locks=t.locks, topics_changed=t.topics_changed,
    )


def heartbeat(client_id: str, group: str = "CG", *, producer: str | None = None,
              subscription: SubscriptionData | None = None) -> RemotingCommand:
    consumers = [ConsumerData(group, subscriptions=[subscription or SubscriptionData("T")])] if group else []
    data = HeartbeatData(client_id, [producer] if producer else [], consumers)
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode())


def notifications(conn: Connection) -> list[str]:
    return [(cmd.ext_fields or {})["consumerGroup"] for cmd in sent(conn)
            if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]


async def test_a_heartbeat_registers_its_groups_and_creates_the_retry_topic(tables: Tables) -> None:
    conn = connection()
    answer = await answered(processor(tables).heartbeat, conn, heartbeat("c1", producer="PG"))
    assert answer.code == ResponseCode.SUCCESS
    info = tables.clients.consumer_group("CG")
    assert info is not None and info.client_ids() == ["c1"] and set(info.subscriptions) == {"T"}
    assert [ch.client_id for ch in tables.clients.producer_channels("PG")] == ["c1"]
    assert tables.topics.get("%RETRY%CG") is not None and tables.topic_changes
    assert conn.attributes["client_id"] == "c1"


async def test_a_client_joining_or_leaving_tells_the_group_to_rebalance(tables: Tables) -> None:
    manager = processor(tables)
    first, second = connection(("127.0.0.1", 1)), connection(("127.0.0.1", 2))
    await answered(manager.heartbeat, first, heartbeat("c1"))
    await answered(manager.heartbeat, second, heartbeat("c2"))
    await answered(manager.heartbeat, second, heartbeat("c2"))  # no change: no notification
    await asyncio.sleep(0)  # frames written later in a loop turn go out when it ends
    assert notifications(first) == ["CG", "CG"] and notifications(second) == ["CG"]
    header = UnregisterClientRequestHeader(client_id="c2", consumer_group="CG").encode()
    answer = await answered(manager.unregister_client, second, RemotingCommand.request(
        RequestCode.UNREGISTER_CLIENT, header))
    assert answer.code == ResponseCode.SUCCESS
    await asyncio.sleep(0)
    assert notifications(first) == ["CG", "CG", "CG"]
    info = tables.clients.consumer_group("CG")
    assert info is not None and info.client_ids() == ["c1"]


async def test_a_group_may_turn_notifications_off(tables: Tables) -> None:
    tables.subscriptions.put(SubscriptionGroupConfig("CG", notify_consumer_ids_changed_enable=False))
    manager = processor(tables)
    first = connection()
    await answered(manager.heartbeat, first, heartbeat("c1"))
    await answered(manager.heartbeat, connection(), heartbeat("c2"))
    await asyncio.sleep(0)
    assert notifications(first) == []


async def test_heartbeat_refusals_register_nothing(tables: Tables) -> None:
    manager = processor(tables)
    cases = [
        (heartbeat("c1", "bad group"), ResponseCode.SYSTEM_ERROR, "refused"),
        (heartbeat("c1", subscription=SubscriptionData("T", "a > 1", expression_type="SQL92")),
         ResponseCode.SYSTEM_ERROR, "SQL92"),
        (RemotingCommand.request(RequestCode.HEART_BEAT, body=b"{not json"), ResponseCode.SYSTEM_ERROR, "JSON"),
    ]
    for req, code, remark in cases:
        answer = await answered(manager.heartbeat, connection(), req)
        assert answer.code == code and remark in (answer.remark or ""), answer
    tables.config.enable_property_filter = True
    answer = await answered(manager.heartbeat, connection(),
                            heartbeat("c1", subscription=SubscriptionData("T", "a >", expression_type="SQL92")))
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert tables.clients.consumers == {} and tables.topics.get("%RETRY%CG") is None


def client_config(expression_type: str, expression: str) -> RemotingCommand:
    body = orjson.dumps({"subscriptionData": {"expressionType": expression_type, "subString": expression}})
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body)


async def test_check_client_config_judges_the_subscription(tables: Tables) -> None:
    check = processor(tables).check_client_config
    assert (await answered(check, connection(), client_config("TAG", "A || B"))).code == ResponseCode.SUCCESS
    assert (await answered(check, connection(), client_config("SQL92", "a > 1"))).code == ResponseCode.SYSTEM_ERROR
    malformed = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=b"[1]")
    assert (await answered(check, connection(), malformed)).code == ResponseCode.SYSTEM_ERROR
    tables.config.enable_property_filter = True
    assert (await answered(check, connection(), client_config("SQL92", "a > 1"))).code == ResponseCode.SUCCESS
    answer = await answered(check, connection(), client_config("SQL92", "a >"))
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_the_consumer_list_of_a_group(tables: Tables) -> None:
    manager = processor(tables)
    req = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                  GetConsumerListByGroupRequestHeader("CG").encode())
    answer = await answered(manager.get_consumer_list, connection(), req)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "no consumer" in (answer.remark or "")
    await answered(manager.heartbeat, connection(), heartbeat("c2"))
    await answered(manager.heartbeat, connection(), heartbeat("c1"))
    answer = await answered(manager.get_consumer_list, connection(), req)
    assert answer.code == ResponseCode.SUCCESS and decode_consumer_id_list(answer.body_bytes()) == ["c1", "c2"]


def lock_request(code: int, client_id: str, queues: list[int]) -> RemotingCommand:
    body = LockBatchRequest("CG", client_id, [QueueKey("T", "unit", q) for q in queues]).encode()
    return RemotingCommand.request(code, body=body)


async def test_queue_locks_belong_to_one_client_until_it_unlocks_them(tables: Tables) -> None:
    manager = processor(tables)
    mine = await answered(manager.lock_batch, connection(), lock_request(RequestCode.LOCK_BATCH_MQ, "c1", [0, 1]))
    assert {q.queue_id for q in decode_lock_ok(mine.body_bytes())} == {0, 1}
    theirs = await answered(manager.lock_batch, connection(), lock_request(RequestCode.LOCK_BATCH_MQ, "c2", [1, 2]))
    assert {q.queue_id for q in decode_lock_ok(theirs.body_bytes())} == {2}
    unlock = await answered(manager.unlock_batch, connection(), lock_request(RequestCode.UNLOCK_BATCH_MQ, "c1", [1]))
    assert unlock.code == ResponseCode.SUCCESS
    again = await answered(manager.lock_batch, connection(), lock_request(RequestCode.LOCK_BATCH_MQ, "c2", [1]))
    assert {q.queue_id for q in decode_lock_ok(again.body_bytes())} == {1}
    malformed = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=b"{}")
    assert (await answered(manager.lock_batch, connection(), malformed)).code == ResponseCode.SYSTEM_ERROR


def query(topic: str = "T", queue_id: int = 0) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(consumer_group="CG", topic=topic, queue_id=queue_id)
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.encode())


def update(offset: int, group: str = "CG") -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic="T", queue_id=0, commit_offset=offset)
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.encode())


async def test_offsets_are_committed_and_queried(tables: Tables) -> None:
    manager = processor(tables)
    fresh = await answered(manager.query_consumer_offset, connection(), query())
    assert fresh.code == ResponseCode.SUCCESS and (fresh.ext_fields or {})["offset"] == "0"  # a young queue: from 0
    assert (await answered(manager.update_consumer_offset, connection(), update(5))).code == ResponseCode.SUCCESS
    answer = await answered(manager.query_consumer_offset, connection(), query())
    assert (answer.ext_fields or {})["offset"] == "5" and tables.offsets.query("CG", "T", 0) == 5
    refused = await answered(manager.update_consumer_offset, connection(), update(9, group="bad group"))
    assert refused.code == ResponseCode.SYSTEM_ERROR and tables.offsets.query("bad group", "T", 0) < 0


async def test_a_new_group_on_a_queue_whose_start_was_deleted_is_not_found(tables: Tables) -> None:
    """QUERY_NOT_FOUND: the queue's first messages are gone, so the consumer decides where
    to start (its consumeFromWhere)."""
    for i in range(3):
        msg = InnerMessage(topic="T", queue_id=0, body=b"x", properties=properties_to_string({"i": str(i)}))
        tables.store.put_message_nowait(msg)
    await tables.store.wait_dispatched()
    queue = tables.store.consume_queues.get("T", 0)
    assert queue is not None
    entry = queue.get_entry(2)
    assert entry is not None
    queue.correct_min_offset(entry[0])  # what a cleanup does once the first two messages' files are deleted
    assert tables.store.get_min_offset_in_queue("T", 0) == 2
    answer = await answered(processor(tables).query_consumer_offset, connection(), query())
    assert answer.code == ResponseCode.QUERY_NOT_FOUND
