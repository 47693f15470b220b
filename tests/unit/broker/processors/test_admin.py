"""AdminProcessor: queue metadata, message lookup, topic and group administration, offsets
reset -- every request code it serves, the answers and the refusals (which change nothing)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from apogee.broker.clients import ClientChannel
from apogee.broker.processors.admin import AdminProcessor
from apogee.broker.subscriptions import SubscriptionGroupConfig
from apogee.common import constants as c
from apogee.common.message import MessageExt
from apogee.common.message_codec import decode_records, properties_to_string
from apogee.remoting.bodies.heartbeat import ConsumerData, SubscriptionData, decode_reset_offset_body
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import LanguageCode, RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    ViewMessageRequestHeader,
)
from apogee.store.inner import InnerMessage
from tests.unit.broker.harness import Tables, answered, connection, sent


def processor(t: Tables) -> AdminProcessor:
    return AdminProcessor(
        config=t.config, store=t.store, topics=t.topics, subscriptions=t.subscriptions, offsets=t.offsets,
        clients=t.clients, table_writer=t.table_writer, delay_offsets=t.schedule.encode,
        topics_changed=t.topics_changed, stats=t.stats,
    )


def request(code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.request(code, ext or {}, body)


async def stored(t: Tables, count: int, topic: str = "T", keys: str = "k") -> list[MessageExt]:
    """``count`` messages in queue 0 of ``topic``, a few ms apart."""
    t.topics.put(TopicConfigData(topic, 2, 2))
    for i in range(count):
        props = properties_to_string({c.KEYS: f"{keys}{i}"})
        result = await t.store.put_message(InnerMessage(topic=topic, queue_id=0, body=f"m{i}".encode(),
                                                        properties=props, store_host=t.address.store_host))
        assert result.ok
        await asyncio.sleep(0.002)  # distinct store times for the time searches
    return await t.messages(topic)


def offset_of(answer: RemotingCommand) -> int:
    assert answer.code == ResponseCode.SUCCESS, answer
    return int((answer.ext_fields or {})["offset"])


# --- queue metadata -----------------------------------------------------------------------------


async def test_queue_offsets_and_times(tables: Tables) -> None:
    messages = await stored(tables, 3)
    admin = processor(tables)
    queue = TopicQueueRequestHeader(topic="T", queue_id=0).encode()
    answer = await answered(admin.get_max_offset, connection(), request(RequestCode.GET_MAX_OFFSET, queue))
    assert offset_of(answer) == 3
    answer = await answered(admin.get_min_offset, connection(), request(RequestCode.GET_MIN_OFFSET, queue))
    assert offset_of(answer) == 0
    search = SearchOffsetRequestHeader(topic="T", queue_id=0, timestamp=messages[1].store_timestamp).encode()
    answer = await answered(admin.search_offset, connection(), request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, search))
    assert offset_of(answer) == 1
    answer = await answered(admin.earliest_time, connection(), request(RequestCode.GET_EARLIEST_MSG_STORETIME, queue))
    assert int((answer.ext_fields or {})["timestamp"]) == messages[0].store_timestamp
    empty = TopicQueueRequestHeader(topic="T", queue_id=1).encode()
    answer = await answered(admin.earliest_time, connection(), request(RequestCode.GET_EARLIEST_MSG_STORETIME, empty))
    assert (answer.ext_fields or {})["timestamp"] == "0"
    bad = await answered(admin.get_max_offset, connection(), request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "queueId" in (bad.remark or "")


# --- message lookup -----------------------------------------------------------------------------


async def test_view_message_answers_a_record_only_where_one_starts(tables: Tables) -> None:
    messages = await stored(tables, 2)
    admin = processor(tables)
    view = ViewMessageRequestHeader(offset=messages[1].commit_log_offset).encode()
    answer = await answered(admin.view_message, connection(), request(RequestCode.VIEW_MESSAGE_BY_ID, view))
    assert answer.code == ResponseCode.SUCCESS and [m.body for m in decode_records(answer.body_bytes())] == [b"m1"]
    inside = ViewMessageRequestHeader(offset=messages[1].commit_log_offset + 4).encode()
    answer = await answered(admin.view_message, connection(), request(RequestCode.VIEW_MESSAGE_BY_ID, inside))
    assert answer.code == ResponseCode.SYSTEM_ERROR and "can not find message" in (answer.remark or "")


async def test_query_message_by_key(tables: Tables) -> None:
    await stored(tables, 3)
    admin = processor(tables)
    now = int(time.time() * 1000)

    def by_key(key: str) -> RemotingCommand:
        header = QueryMessageRequestHeader(
            topic="T", key=key, max_num=32, begin_timestamp=0, end_timestamp=now + 60_000
        )
        return request(RequestCode.QUERY_MESSAGE, header.encode())

    answer = await answered(admin.query_message, connection(), by_key("k1"))
    assert answer.code == ResponseCode.SUCCESS and [m.body for m in decode_records(answer.body_bytes())] == [b"m1"]
    assert "indexLastUpdateTimestamp" in (answer.ext_fields or {})
    answer = await answered(admin.query_message, connection(), by_key("nope"))
    assert answer.code == ResponseCode.QUERY_NOT_FOUND


# --- topics -------------------------------------------------------------------------------------


def create_topic(topic: str, **kw: object) -> RemotingCommand:
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(topic=topic, **kw).encode())  # type: ignore[arg-type]


def on_disk(path: Path) -> dict[str, object]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


async def test_a_created_topic_is_on_disk_before_the_answer_and_the_namesrvs_are_told(tables: Tables) -> None:
    answer = await answered(processor(tables).create_topic, connection(), create_topic("New", read_queue_nums=3,
                                                                                        write_queue_nums=3))
    assert answer.code == ResponseCode.SUCCESS and tables.topic_changes
    assert tables.topics.file.path is not None
    table = on_disk(tables.topics.file.path)["topicConfigTable"]
    assert isinstance(table, dict) and table["New"]["writeQueueNums"] == 3


@pytest.mark.parametrize(("req", "remark"), [
    (create_topic("UnitCluster"), "conflict"),
    (create_topic("T", read_queue_nums=0), "between 1 and"),
    (create_topic("T", topic_filter_type="ANY"), "topicFilterType"),
    (create_topic("bad topic"), "characters"),
], ids=["cluster name", "queue nums", "filter type", "name"])
async def test_topic_creation_refusals_change_nothing(tables: Tables, req: RemotingCommand, remark: str) -> None:
    before = dict(tables.topics.table)
    answer = await answered(processor(tables).create_topic, connection(), req)
    assert answer.code == ResponseCode.SYSTEM_ERROR and remark in (answer.remark or ""), answer.remark
    assert tables.topics.table == before and not tables.topic_changes


async def test_deleting_a_topic_drops_its_offsets_and_consume_queues_too(tables: Tables) -> None:
    await stored(tables, 3, topic="Old")
    tables.offsets.commit("CG", "Old", 0, 4)
    cq_dir = tables.store_config.consume_queue_dir / "Old"
    assert cq_dir.is_dir() and tables.store.get_max_offset_in_queue("Old", 0) == 3
    admin = processor(tables)
    delete = request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader("Old").encode())
    assert (await answered(admin.delete_topic, connection(), delete)).code == ResponseCode.SUCCESS
    assert tables.topics.get("Old") is None and tables.offsets.query("CG", "Old", 0) < 0
    # As RocketMQ's cleanUnusedTopic: the queues and their files are gone, so the topic made
    # again starts empty at offset 0.
    assert not cq_dir.exists() and tables.store.get_max_offset_in_queue("Old", 0) == 0
    again = await tables.store.put_message(InnerMessage(topic="Old", queue_id=0, body=b"new",
                                                        store_host=tables.address.store_host))
    assert again.ok and again.logics_offset == 0
    assert [m.body for m in await tables.messages("Old")] == [b"new"]
    tables.topics.put(TopicConfigData("rmq_sys_own", 1, 1))
    system = request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader("rmq_sys_own").encode())
    answer = await answered(admin.delete_topic, connection(), system)
    assert answer.code == ResponseCode.SYSTEM_ERROR and tables.topics.get("rmq_sys_own") is not None


async def test_clean_unused_topic_removes_queues_of_topics_no_longer_configured(tables: Tables) -> None:
    await stored(tables, 2, topic="Gone")
    await stored(tables, 1, topic="Kept")
    del tables.topics.table["Gone"]  # as after a delete whose queue removal was lost
    clean = request(RequestCode.CLEAN_UNUSED_TOPIC)
    answer = await answered(processor(tables).clean_unused_topics, connection(), clean)
    assert answer.code == ResponseCode.SUCCESS
    assert tables.store.consume_queues.get("Gone", 0) is None
    assert not (tables.store_config.consume_queue_dir / "Gone").exists()
    assert tables.store.get_max_offset_in_queue("Kept", 0) == 1


async def test_topic_tables_and_stats(tables: Tables) -> None:
    await stored(tables, 2)
    admin = processor(tables)
    answer = await answered(admin.all_topic_config, connection(), request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert "T" in orjson.loads(answer.body_bytes())["topicConfigTable"]
    answer = await answered(admin.topic_stats, connection(), request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"}))
    # fastjson's TopicStatsTable: a map keyed by MessageQueue objects, fields in alphabetical order.
    text = answer.body_bytes().decode()
    assert text.startswith('{"offsetTable":{{"brokerName":"unit","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":')
    table = fastjson_queue_map(text, "offsetTable")
    assert [(q["queueId"], v["minOffset"], v["maxOffset"]) for q, v in table] == [(0, 0, 2), (1, 0, 0)]
    assert table[0][1]["lastUpdateTimestamp"] > 0 and table[1][1]["lastUpdateTimestamp"] == 0
    missing = await answered(admin.topic_stats, connection(), request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "X"}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    no_header = await answered(admin.topic_stats, connection(), request(RequestCode.GET_TOPIC_STATS_INFO))
    assert no_header.code == ResponseCode.SYSTEM_ERROR and "<topic>" in (no_header.remark or "")


# --- consumers ----------------------------------------------------------------------------------


def register(t: Tables, language: int = LanguageCode.PYTHON) -> tuple[object, ClientChannel]:
    conn = connection()
    channel = ClientChannel(conn, "c1", language, 400, 0)
    t.clients.register_consumer(ConsumerData("CG", subscriptions=[SubscriptionData("T")]), channel)
    return conn, channel


async def test_consume_stats_and_connections(tables: Tables) -> None:
    await stored(tables, 2)
    tables.offsets.commit("CG", "T", 0, 1)
    admin = processor(tables)
    answer = await answered(admin.consume_stats, connection(), request(RequestCode.GET_CONSUME_STATS,
                                                                      {"consumerGroup": "CG"}))
    text = answer.body_bytes().decode()
    assert text.startswith('{"consumeTps":0.0,"offsetTable":{{"brokerName":"unit","queueId":0,"topic":"T"}:')
    table = fastjson_queue_map(text, "offsetTable")
    assert [(q["queueId"], v["brokerOffset"], v["consumerOffset"]) for q, v in table] == [(0, 2, 1), (1, 0, 0)]
    assert table[0][1]["lastTimestamp"] > 0 and table[1][1]["lastTimestamp"] == 0
    no_group = await answered(admin.consume_stats, connection(), request(RequestCode.GET_CONSUME_STATS))
    assert no_group.code == ResponseCode.SYSTEM_ERROR
    header = GetConsumerListByGroupRequestHeader("CG").encode()
    offline = await answered(admin.consumer_connections, connection(),
                             request(RequestCode.GET_CONSUMER_CONNECTION_LIST, header))
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    register(tables)
    online = await answered(admin.consumer_connections, connection(),
                            request(RequestCode.GET_CONSUMER_CONNECTION_LIST, header))
    body = orjson.loads(online.body_bytes())
    assert [c["clientId"] for c in body["connectionSet"]] == ["c1"] and "T" in body["subscriptionTable"]
    answer = await answered(admin.all_consumer_offsets, connection(), request(RequestCode.GET_ALL_CONSUMER_OFFSET))
    assert orjson.loads(answer.body_bytes())["offsetTable"]["T@CG"] == {"0": 1}
    tables.schedule.offsets[2] = 7
    answer = await answered(admin.all_delay_offsets, connection(), request(RequestCode.GET_ALL_DELAY_OFFSET))
    assert orjson.loads(answer.body_bytes()) == {"offsetTable": {"2": 7}}


async def test_subscription_groups_are_created_listed_and_deleted(tables: Tables) -> None:
    admin = processor(tables)
    body = orjson.dumps(SubscriptionGroupConfig("NewGroup", retry_max_times=3).to_json())
    answer = await answered(admin.create_group, connection(), request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body))
    assert answer.code == ResponseCode.SUCCESS
    assert tables.subscriptions.file.path is not None
    assert "NewGroup" in str(on_disk(tables.subscriptions.file.path))
    answer = await answered(admin.all_groups, connection(), request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    assert orjson.loads(answer.body_bytes())["subscriptionGroupTable"]["NewGroup"]["retryMaxTimes"] == 3
    for bad in (b"{", orjson.dumps(SubscriptionGroupConfig("bad group").to_json())):
        refused = await answered(admin.create_group, connection(), request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad))
        assert refused.code == ResponseCode.SYSTEM_ERROR
    assert tables.subscriptions.get("bad group") is None
    delete = request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "NewGroup"})
    assert (await answered(admin.delete_group, connection(), delete)).code == ResponseCode.SUCCESS
    assert tables.subscriptions.get("NewGroup") is None
    no_name = await answered(admin.delete_group, connection(), request(RequestCode.DELETE_SUBSCRIPTIONGROUP))
    assert no_name.code == ResponseCode.SYSTEM_ERROR


async def test_runtime_info_reports_the_store_and_the_table_writer(tables: Tables) -> None:
    answer = await answered(processor(tables).runtime_info, connection(), request(RequestCode.GET_BROKER_RUNTIME_INFO))
    table = orjson.loads(answer.body_bytes())["table"]
    assert table["tableWriteFailures"] == "0" and "dispatchBehindBytes" in table
    assert all(isinstance(v, str) for v in table.values())
    # What RocketMQ's tools parse: numbers with Long.parseLong, TPS as "tps10 tps60 tps600".
    for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning", "bootTimestamp",
                "commitLogMaxOffset", "commitLogMinOffset", "dispatchBehindBytes", "earliestMessageTimeStamp",
                "putMessageTimesTotal", "putMessageSizeTotal", "brokerVersion"):
        assert int(table[key]) >= -1, key  # Long.parseLong; -1: no message yet, as Java says
    assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
    assert len(table["getTotalTps"].split(" ")) == 3 and len(table["putTps"].split(" ")) == 3
    assert float(table["putLatency99"]) >= 0 and float(table["commitLogDiskRatio"]) <= 1
    assert table["commitLogDirCapacity"].startswith("Total : ")


def fastjson_queue_map(text: str, field: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Read ``field`` of a body as fastjson's parser does a ``Map<MessageQueue, V>``: a JSON
    object whose keys are JSON objects.  Written here, apart from Apogee's own decoder."""
    decoder = json.JSONDecoder()
    start = text.index(f'"{field}":') + len(field) + 3
    assert text[start] == "{", "fastjson's map parser expects an object"
    pos, pairs = start + 1, []
    while text[pos] != "}":
        key, pos = decoder.raw_decode(text, pos)
        assert text[pos] == ":"
        value, pos = decoder.raw_decode(text, pos + 1)
        pairs.append((key, value))
        pos += text[pos] == ","
    return pairs


def reset(topic: str = "T", group: str = "CG", timestamp: int = 0, force: bool = True) -> RemotingCommand:
    header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=force)
    return request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.encode())


async def test_reset_offsets_sets_them_and_tells_the_live_consumers(tables: Tables) -> None:
    messages = await stored(tables, 3)
    tables.offsets.commit("CG", "T", 0, 3)
    conn, _ = register(tables)
    answer = await answered(processor(tables).reset_offset, connection(), reset(timestamp=messages[1].store_timestamp))
    assert answer.code == ResponseCode.SUCCESS
    assert {q.queue_id: o for q, o in decode_reset_offset_body(answer.body_bytes()).items()} == {0: 1, 1: 0}
    assert tables.offsets.query("CG", "T", 0) == 1
    await asyncio.sleep(0)
    [told] = [cmd for cmd in sent(conn) if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]  # type: ignore[arg-type]
    assert {q.queue_id: o for q, o in decode_reset_offset_body(told.body_bytes()).items()} == {0: 1, 1: 0}


async def test_reset_offsets_refusals_change_nothing(tables: Tables) -> None:
    await stored(tables, 1)
    tables.subscriptions.auto_create = False
    admin = processor(tables)
    missing_topic = await answered(admin.reset_offset, connection(), reset(topic="X"))
    assert missing_topic.code == ResponseCode.TOPIC_NOT_EXIST
    missing_group = await answered(admin.reset_offset, connection(), reset(group="Nobody"))
    assert missing_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert tables.offsets.query("Nobody", "T", 0) < 0
