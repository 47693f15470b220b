"""Requests built to break the broker for everyone (issue 16, finding 3), against a real one.

Each bad request must get a clean error answer whose remark names what is wrong, change no
table and no queue, and leave the broker whole: every acknowledged message delivered, offsets
persisted across a restart, topics created and registered, groups only with legal names.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from apogee.common.atomic_file import read_with_backup
from apogee.common.message_codec import decode_records
from apogee.common.message_id import decode_offset_msg_id
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.integration.test_broker import start_broker
from tests.support.processes import ServerProcess
from tests.support.wire import exchange_raw, pull_all, pull_request, raw_frame, send_request

T = 5000
# Small files: a restart then takes a second, not the many a 1 GiB CommitLog file costs.
CONF = "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=60000\n"

# The issue's reproducer, byte for byte: SEND_MESSAGE_V2 to T1 with flag (h) = 2^31.
ISSUE_FRAME = bytes.fromhex(
    "00000098000000917b22636f6465223a3331302c226578744669656c6473223a7b2261223a227067222c2262223a2254"
    "31222c2263223a22544257313032222c2264223a2231222c2265223a2230222c2266223a2230222c2267223a2230222c"
    "2268223a2232313437343833363438222c2269223a22222c226a223a2230222c226b223a2266616c7365222c226d223a"
    "2266616c7365227d7d424144"
)
V2 = {"a": "pg", "b": "T1", "c": "TBW102", "d": "1", "e": "0", "f": "0", "g": "0", "h": "0", "i": "", "j": "0",
      "k": "false", "m": "false"}
V1 = {"producerGroup": "pg", "topic": "T1", "defaultTopic": "TBW102", "defaultTopicQueueNums": "1", "queueId": "0",
      "sysFlag": "0", "bornTimestamp": "0", "flag": "2147483648"}
BIG = "2147483648"
HUGE = "100000000000000000000"  # 10^20, beyond a Java long

# (frame, the field the answer must name)
BAD_SENDS = [
    (ISSUE_FRAME, "<h>"),
    (raw_frame(RequestCode.SEND_MESSAGE_V2, {**V2, "f": BIG}, b"BAD"), "<f>"),
    (raw_frame(RequestCode.SEND_MESSAGE_V2, {**V2, "j": BIG}, b"BAD"), "<j>"),
    (raw_frame(RequestCode.SEND_MESSAGE_V2, {**V2, "g": HUGE}, b"BAD"), "<g>"),
    (raw_frame(RequestCode.SEND_MESSAGE, V1, b"BAD"), "<flag>"),
    (raw_frame(RequestCode.SEND_BATCH_MESSAGE, {**V2, "h": BIG, "m": "true"}, b"BAD"), "<h>"),
    (raw_frame(RequestCode.SEND_BATCH_MESSAGE, {**V2, "f": BIG, "m": "true"}, b"BAD"), "<f>"),
    (raw_frame(RequestCode.SEND_BATCH_MESSAGE, {**V2, "j": BIG, "m": "true"}, b"BAD"), "<j>"),
]


def assert_clean_error(resp: RemotingCommand, code: int, *words: str) -> None:
    assert resp.code == code, (resp.code, resp.remark)
    for word in words:
        assert word in (resp.remark or ""), resp.remark
    assert "Traceback" not in (resp.remark or "") and "format requires" not in (resp.remark or "")


def restart(broker: ServerProcess, namesrv: ServerProcess, store: Path, conf: str = CONF, *, kill: bool = False
            ) -> ServerProcess:
    if kill:
        broker.kill()
    broker.close()
    return start_broker(namesrv.addr, store, conf)


def saved(path: Path) -> bytes:
    """A table file as a restart would read it (it, or its .bak while a write renames)."""
    return read_with_backup(path) or b""


async def bodies_of(client: RemotingClient, broker: ServerProcess, topic: str) -> list[bytes]:
    return [m.body for m in await pull_all(client, broker.addr, topic, queues=1)]


async def eventually(probe: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 10.0) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await probe():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_out_of_range_send_fields_are_refused_before_the_queue_moves(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrv.addr, store, CONF)
    client = RemotingClient()
    try:
        acked: list[bytes] = []

        async def send(body: bytes) -> None:
            resp = await client.invoke(broker.addr, send_request("T1", body), T)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            acked.append(body)

        await send(b"m0")
        for n, (frame, field) in enumerate(BAD_SENDS):
            assert_clean_error(await exchange_raw(broker.addr, frame), ResponseCode.SYSTEM_ERROR, field, "out of range")
            for i in range(1, 11):
                await send(f"after-{n}-m{i}".encode())
        assert await bodies_of(client, broker, "T1") == acked
        max_offset = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T1", "queueId": "0"})
        assert (await client.invoke(broker.addr, max_offset, T)).ext_fields["offset"] == str(len(acked))

        await client.close()
        broker = restart(broker, namesrv, store)
        client = RemotingClient()
        await send(b"after-restart")
        assert await bodies_of(client, broker, "T1") == acked
    finally:
        await client.close()
        broker.close()


async def test_a_commit_offset_beyond_a_java_long_is_refused_and_offsets_keep_persisting(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    conf = CONF + "flushConsumerOffsetInterval=100\n"
    broker = start_broker(namesrv.addr, store, conf)
    client = RemotingClient()
    offsets_file = store / "config" / "consumerOffset.json"

    def commit(group: str, topic: str, offset: str) -> bytes:
        ext = {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": offset}
        return raw_frame(RequestCode.UPDATE_CONSUMER_OFFSET, ext)

    try:
        assert (await client.invoke(broker.addr, send_request("T1", b"m0"), T)).code == ResponseCode.SUCCESS
        assert_clean_error(await exchange_raw(broker.addr, commit("G", "T1", HUGE)), ResponseCode.SYSTEM_ERROR,
                           "<commitOffset>")
        assert_clean_error(await exchange_raw(broker.addr, commit("", "T1", "3")), ResponseCode.SYSTEM_ERROR, "empty")
        assert_clean_error(await exchange_raw(broker.addr, commit("G" * 300, "T1", "3")), ResponseCode.SYSTEM_ERROR,
                           "255")
        assert_clean_error(await exchange_raw(broker.addr, commit("G", "Bad Topic", "3")), ResponseCode.SYSTEM_ERROR,
                           "characters")
        assert (await exchange_raw(broker.addr, commit("G", "T1", "7"))).code == ResponseCode.SUCCESS

        async def written() -> bool:  # the periodic write still works after the bad commit
            return b'"T1@G"' in saved(offsets_file)

        await eventually(written, "consumerOffset.json to hold the good commit")
        assert list(orjson.loads(saved(offsets_file))["offsetTable"]) == ["T1@G"]

        await client.close()
        broker = restart(broker, namesrv, store, conf, kill=True)
        client = RemotingClient()
        query = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T1", "queueId": "0"}
        )
        resp = await client.invoke(broker.addr, query, T)
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "7"
    finally:
        await client.close()
        broker.close()


def create_topic(topic: str, perm: str) -> bytes:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": perm,
           "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    return raw_frame(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)


async def test_a_topic_with_an_impossible_permission_is_refused_and_topics_stay_routable(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrv.addr, store, CONF)
    client = RemotingClient()
    topics_file = store / "config" / "topics.json"

    async def routable(topic: str) -> bool:
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return (await client.invoke(namesrv.addr, route, T)).code == ResponseCode.SUCCESS

    try:
        assert_clean_error(await exchange_raw(broker.addr, create_topic("Evil", HUGE)), ResponseCode.SYSTEM_ERROR,
                           "<perm>")
        assert_clean_error(await exchange_raw(broker.addr, create_topic("Evil", "16")), ResponseCode.SYSTEM_ERROR,
                           "<perm>")
        assert_clean_error(await exchange_raw(broker.addr, create_topic("Bad Topic", "6")), ResponseCode.SYSTEM_ERROR,
                           "characters")
        # Later creations, by an admin and by a send, still work and reach the NameServer.
        assert (await exchange_raw(broker.addr, create_topic("Good", "6"))).code == ResponseCode.SUCCESS
        assert b'"Good"' in topics_file.read_bytes()  # an admin creation is on disk when answered
        assert (await client.invoke(broker.addr, send_request("Auto1", b"x"), T)).code == ResponseCode.SUCCESS
        await eventually(lambda: routable("Good"), "a route for Good")
        await eventually(lambda: routable("Auto1"), "a route for Auto1")
        all_topics = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
        table = orjson.loads((await client.invoke(broker.addr, all_topics, T)).body_bytes())["topicConfigTable"]
        assert "Evil" not in table and "Bad Topic" not in table

        async def auto_saved() -> bool:
            return b'"Auto1"' in saved(topics_file)

        await eventually(auto_saved, "topics.json to hold the auto-created topic")
        await client.close()
        broker = restart(broker, namesrv, store, kill=True)
        client = RemotingClient()
        table = orjson.loads((await client.invoke(broker.addr, all_topics, T)).body_bytes())["topicConfigTable"]
        assert {"Good", "Auto1"} <= set(table) and "Evil" not in table
        assert await bodies_of(client, broker, "Auto1") == [b"x"]
    finally:
        await client.close()
        broker.close()


async def test_view_message_by_id_answers_only_at_a_record_start(namesrv: ServerProcess, tmp_path: Path) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "store", CONF)
    client = RemotingClient()
    try:
        # A body whose every aligned 4 bytes claim a 48 MiB record.
        body = struct.pack(">i", 48 << 20) * 64
        for _ in range(2):
            resp = await client.invoke(broker.addr, send_request("V", body), T)
            assert resp.code == ResponseCode.SUCCESS
        phys = decode_offset_msg_id(resp.ext_fields["msgId"])[2]  # the second record
        view = lambda offset: RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})  # noqa: E731
        whole = await client.invoke(broker.addr, view(phys), T)
        assert whole.code == ResponseCode.SUCCESS
        (record,) = decode_records(whole.body_bytes())
        assert record.body == body and record.commit_log_offset == phys
        size = len(whole.body_bytes())
        for offset in [*range(phys - 3, phys), *range(phys + 1, phys + size + 4), -1, 1 << 62]:
            resp = await client.invoke(broker.addr, view(offset), T)
            assert_clean_error(resp, ResponseCode.SYSTEM_ERROR, "can not find message")
            assert not resp.body_bytes()
        for offset in ("18446744073709551616", "x"):
            assert_clean_error(await client.invoke(broker.addr, view(offset), T), ResponseCode.SYSTEM_ERROR, "offset")
    finally:
        await client.close()
        broker.close()


def heartbeat(group: str) -> RemotingCommand:
    body = HeartbeatData("c1", [], [ConsumerData(group, subscriptions=[SubscriptionData("T1", "*")])]).encode()
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, body)


def create_group(body: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)


async def test_group_names_rocketmq_refuses_never_enter_the_group_table(
    namesrv: ServerProcess, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrv.addr, store, CONF)
    client = RemotingClient()
    all_groups = RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    try:
        assert (await client.invoke(broker.addr, send_request("T1", b"x"), T)).code == ResponseCode.SUCCESS
        before = orjson.loads((await client.invoke(broker.addr, all_groups, T)).body_bytes())
        for name, why in (("", "empty"), ("G" * 300, "255"), ("my group", "characters")):
            assert_clean_error(await client.invoke(broker.addr, heartbeat(name), T), ResponseCode.SYSTEM_ERROR, why)
            assert_clean_error(await client.invoke(broker.addr, pull_request("T1", 0, 0, group=name), T),
                               ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, why)
            body = orjson.dumps({"groupName": name})
            assert_clean_error(await client.invoke(broker.addr, create_group(body), T), ResponseCode.SYSTEM_ERROR, why)
        huge = b'{"groupName": "Huge", "retryQueueNums": 100000000000000000000}'
        assert_clean_error(await client.invoke(broker.addr, create_group(huge), T), ResponseCode.SYSTEM_ERROR,
                           "retryQueueNums")
        after = orjson.loads((await client.invoke(broker.addr, all_groups, T)).body_bytes())
        assert after == before
        # A legal group still works, and the table is written and read back after a restart.
        assert (await client.invoke(broker.addr, heartbeat("G" * 120), T)).code == ResponseCode.SUCCESS
        assert (await client.invoke(broker.addr, create_group(orjson.dumps({"groupName": "Admin"})), T)).code == 0
        await client.close()
        broker = restart(broker, namesrv, store)
        client = RemotingClient()
        groups = orjson.loads((await client.invoke(broker.addr, all_groups, T)).body_bytes())["subscriptionGroupTable"]
        assert {"G" * 120, "Admin"} <= set(groups) and "" not in groups and "G" * 300 not in groups
    finally:
        await client.close()
        broker.close()
