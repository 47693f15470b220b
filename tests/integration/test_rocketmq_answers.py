"""A real broker gives RocketMQ 4.9.8's answers where a Java client saw Apogee differ (issue 18):
request codes it does not serve are logged, searchOffset picks the offset RocketMQ picks, and
batch records are stored with the batch's own properties as RocketMQ stores them."""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterator

import pytest

from apogee.remoting.bodies.heartbeat import HeartbeatData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import SendMessageRequestHeaderV2
from apogee.remoting.server import MAX_UNSERVED_CODES_LOGGED, RequestDispatcher
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import next_millisecond, now_ms
from tests.support.wire import pull_all, send_request, wait_dispatched

T = 5000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("answers")
    namesrv = start_namesrv(base / "ns")
    try:
        server = start_broker(namesrv.addr, base / "store", "brokerName=broker-a\n")
        yield server
        server.close()
    finally:
        namesrv.close()


def _local_addr(conn: Connection) -> str:
    return f"{conn.local[0]}:{conn.local[1]}"


def _unserved_lines(broker: ServerProcess) -> list[tuple[str, int]]:
    """(client address, code) of every unserved-code warning the broker logged so far."""
    return [
        (m.group(1), int(m.group(2)))
        for m in re.finditer(r"WARNING.* (\S+:\d+) sent request code (-?\d+), which this server does not serve",
                             broker.stderr())
    ]


async def test_each_unserved_code_is_logged_once_per_client_with_its_address(broker: ServerProcess) -> None:
    first, second = RemotingClient(), RemotingClient()
    try:
        for client, codes in ((first, (4242, 4242, 4243, 4242)), (second, (4242,))):
            for code in codes:
                resp = await client.invoke(broker.addr, RemotingCommand.request(code), T)
                assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                   f" request type {code} not supported")
        # Each answer left after its warning was written: the lines are there now.
        a = _local_addr(await first.connection(broker.addr))
        b = _local_addr(await second.connection(broker.addr))
        lines = [line for line in _unserved_lines(broker) if line[0] in (a, b)]
        assert sorted(lines) == sorted([(a, 4242), (a, 4243), (b, 4242)])
    finally:
        await first.close()
        await second.close()


async def test_a_client_trying_every_code_leaves_a_bounded_number_of_lines(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        for code in range(-1_000_000, -1_000_000 + 3 * MAX_UNSERVED_CODES_LOGGED):
            resp = await client.invoke(broker.addr, RemotingCommand.request(code), T)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        me = _local_addr(await client.connection(broker.addr))
        mine = [code for addr, code in _unserved_lines(broker) if addr == me]
        assert mine == list(range(-1_000_000, -1_000_000 + MAX_UNSERVED_CODES_LOGGED + 1))
        assert broker.stderr().count("further ones from this connection are not logged") == 1
        # The broker still serves this connection.
        resp = await client.invoke(broker.addr, RemotingCommand.request(30, {"topic": "TBW102", "queueId": "0"}), T)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()


# --- batch records ---------------------------------------------------------------------------

# RocketMQ 4.9.8's record with IPv4 hosts (CommitLog.calMsgLength): TOTALSIZE 4, MAGICCODE 4,
# BODYCRC 4, QUEUEID 4, FLAG 4, QUEUEOFFSET 8, PHYSICALOFFSET 8, SYSFLAG 4, BORNTIMESTAMP 8,
# BORNHOST 8, STORETIMESTAMP 8, STOREHOST 8, RECONSUMETIMES 4, PREPARED TRANSACTION OFFSET 8,
# BODYLENGTH 4 + body, TOPICLENGTH 1 + topic, PROPERTIESLENGTH 2 + properties.
RECORD_FIXED = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2


def _java_batch_item(flag: int, body: bytes, properties: str) -> bytes:
    """One message of a batch body as the Java client writes it (MessageDecoder.encodeMessage):
    TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH, body, PROPERTIESLENGTH, properties."""
    props = properties.encode()
    size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", size, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def _stored_properties_length(own: str, batch: str) -> int:
    """CommitLog.MessageExtBatchEncoder: a record's properties are the message's own, then a
    separator unless they are empty or already end with one, then the batch's properties."""
    own_len, batch_len = len(own.encode()), len(batch.encode())
    separator = 1 if own_len > 0 and batch_len > 0 and not own.endswith("\x02") else 0
    return own_len + separator + batch_len


async def test_batch_records_have_rocketmq_sizes_with_the_batch_properties(broker: ServerProcess) -> None:
    topic = unique("Batch")
    items = [  # (flag, body, the message's own properties string)
        (0, b"a" * 10, "KEYS\x01k0\x02WAIT\x01true\x02UNIQ_KEY\x01AC11000100002A9F0000000000000000"),
        (7, "é😀".encode(), "TAGS\x01T\x02WAIT\x01true\x02"),  # a trailing separator: no extra one
        (0, b"x", ""),  # no properties of its own: the batch's alone
    ]
    # The batch's own properties, as DefaultMQProducer.send(Collection) sends them
    # (MessageBatch.generateFromList sets the first message's WAIT).
    header = SendMessageRequestHeaderV2(
        producer_group="java-batch", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties="WAIT\x01true", batch=True,
    )
    body = b"".join(_java_batch_item(*item) for item in items)
    client = RemotingClient()
    try:
        resp = await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.encode(), body), T
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        await wait_dispatched(client, broker.addr, topic, 0, len(items))
        stored = await pull_all(client, broker.addr, topic, queues=1)
    finally:
        await client.close()
    batch_props = "CLUSTER\x01DefaultCluster\x02WAIT\x01true"  # any order: the same length
    expected = [
        RECORD_FIXED + len(body) + len(topic.encode()) + _stored_properties_length(props, batch_props)
        for _, body, props in items
    ]
    assert [m.store_size for m in stored] == expected
    # Ten bytes a record more than before: "\x02WAIT\x01true", the batch's WAIT kept.
    assert [m.store_size for m in stored] == [
        RECORD_FIXED + len(body) + len(topic.encode()) + _stored_properties_length(props, "CLUSTER\x01DefaultCluster")
        + 10 for _, body, props in items
    ]
    for m, (flag, body, _) in zip(stored, items, strict=True):
        assert (m.flag, m.body, m.properties["WAIT"], m.properties["CLUSTER"]) == (flag, body, "true", "DefaultCluster")
    assert stored[0].properties["KEYS"] == "k0" and stored[1].properties["TAGS"] == "T"


# --- searchOffset ----------------------------------------------------------------------------


async def _search(client: RemotingClient, addr: str, topic: str, ts: int, boundary: str | None = None) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP as a 4.x client sends it (no boundaryType), or with
    RocketMQ 5's boundaryType."""
    fields = {"topic": topic, "queueId": "0", "timestamp": str(ts)}
    if boundary is not None:
        fields["boundaryType"] = boundary
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields), T)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int((resp.ext_fields or {})["offset"])


async def test_search_offset_names_the_message_rocketmq_names(broker: ServerProcess) -> None:
    topic = unique("Search")
    client = RemotingClient()
    try:
        for i in range(3):  # three messages, each in a millisecond of its own
            resp = await client.invoke(broker.addr, send_request(topic, f"m{i}".encode()), T)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            next_millisecond(now_ms())
        await wait_dispatched(client, broker.addr, topic, 0, 3)
        t0, t1, t2 = [m.store_timestamp for m in await pull_all(client, broker.addr, topic, queues=1)]
        assert t0 < t1 < t2
        addr = broker.addr
        # A time after the last message: the last message (max offset - 1), as RocketMQ
        # 4.9.8's ConsumeQueue.getOffsetInQueueByTime answers; the max offset only for
        # RocketMQ 5's LOWER boundary.
        future = now_ms() + 3_600_000
        assert await _search(client, addr, topic, future) == 2
        assert await _search(client, addr, topic, future, "LOWER") == 3
        assert await _search(client, addr, topic, future, "UPPER") == 2
        # Before the first message: the first.
        assert await _search(client, addr, topic, t0 - 60_000) == 0
        # A message's own time: that message.
        assert [await _search(client, addr, topic, t) for t in (t0, t1, t2)] == [0, 1, 2]
        # Between two messages: the nearer one, the earlier on a tie.
        for ts in range(t0 + 1, t1):
            expected = 0 if ts - t0 <= t1 - ts else 1
            assert await _search(client, addr, topic, ts) == expected, (t0, ts, t1)
            assert await _search(client, addr, topic, ts, "LOWER") == 1
            assert await _search(client, addr, topic, ts, "upper") == 0
        # resetOffsetByTime uses the same rule: a future time puts a group on the last message.
        group = unique("G")
        reset = {"topic": topic, "group": group, "timestamp": str(future), "isForce": "true"}
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset), T)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        q = {"consumerGroup": group, "topic": topic, "queueId": "0"}
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), T)
        assert (resp.ext_fields or {})["offset"] == "2"
    finally:
        await client.close()


# --- request-reply: SEND_REPLY_MESSAGE(_V2) and PUSH_REPLY_MESSAGE_TO_CLIENT -------------------


async def test_a_reply_is_pushed_to_the_requester_as_rocketmq_pushes_it(broker: ServerProcess) -> None:
    """Both sides as hand-built frames: a requester that heartbeats as a producer and answers
    PUSH_REPLY_MESSAGE_TO_CLIENT, a replier that sends SEND_REPLY_MESSAGE_V2 and (V1) _MESSAGE."""
    pushed: list[RemotingCommand] = []
    answer_push = [ResponseCode.SUCCESS]
    dispatcher = RequestDispatcher()
    dispatcher.register(
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
        lambda conn, req: pushed.append(req) or req.response(answer_push[0], None if answer_push[0] == 0 else "no"),
    )
    requester = RemotingClient(dispatcher=dispatcher)
    replier = RemotingClient()
    reply_topic = "DefaultCluster_REPLY_TOPIC"
    props = {"MSG_TYPE": "reply", "CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": "requester-1", "TTL": "3000",
             "UNIQ_KEY": "U1"}

    def reply(code: int = RequestCode.SEND_REPLY_MESSAGE_V2, **changed: str) -> RemotingCommand:
        properties = "\x02".join(f"{k}\x01{v}" for k, v in {**props, **changed}.items() if v)
        header = SendMessageRequestHeaderV2(
            producer_group="replier-group", topic=reply_topic, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=1_700_000_000_123, flag=5, properties=properties,
            reconsume_times=0,
        )
        fields = header.encode() if code == RequestCode.SEND_REPLY_MESSAGE_V2 else header.to_v1().encode()
        return RemotingCommand.request(code, fields, b"the answer")

    try:
        hb = HeartbeatData("requester-1", ["requester-group"], []).encode()
        resp = await requester.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, hb), T)
        assert resp.code == ResponseCode.SUCCESS
        resp = await replier.invoke(broker.addr, reply(), T)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        ext = resp.ext_fields or {}
        # storeReplyMessageEnable (the default): the stored message's id and offset.
        assert ext["queueId"] == "0" and ext["msgId"] != "0" and int(ext["queueOffset"]) >= 0
        assert ext["MSG_REGION"] == "DefaultRegion"
        (push,) = pushed
        h = push.ext_fields or {}
        replier_port = (await replier.connection(broker.addr)).local[1]
        assert {k: h[k] for k in ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                                  "sysFlag", "bornTimestamp", "flag", "reconsumeTimes", "unitMode", "bornHost",
                                  "storeHost")} == {
            "producerGroup": "replier-group", "topic": reply_topic, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000123",
            "flag": "5", "reconsumeTimes": "0", "unitMode": "false", "bornHost": f"127.0.0.1:{replier_port}",
            "storeHost": broker.addr,
        }
        pushed_props = dict(kv.split("\x01") for kv in h["properties"].split("\x02"))
        assert int(h["storeTimestamp"]) <= int(pushed_props.pop("PUSH_REPLY_TIME")) and pushed_props == props
        assert push.body_bytes() == b"the answer"
        # The V1 header (SEND_REPLY_MESSAGE) is served the same way.
        resp = await replier.invoke(broker.addr, reply(RequestCode.SEND_REPLY_MESSAGE, CORRELATION_ID="c-2"), T)
        assert resp.code == ResponseCode.SUCCESS and len(pushed) == 2
        # RocketMQ's answers when the push cannot be made; the reply is stored all the same.
        for changed, remark in (
            ({"REPLY_TO_CLIENT": ""}, "reply message properties[REPLY_TO_CLIENT] is null"),
            ({"REPLY_TO_CLIENT": "nobody"}, "push reply message fail, channel of <nobody> not found."),
        ):
            resp = await replier.invoke(broker.addr, reply(**changed), T)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark)
            assert (resp.ext_fields or {})["msgId"] != "0"
        answer_push[0] = ResponseCode.SYSTEM_ERROR
        resp = await replier.invoke(broker.addr, reply(), T)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "push reply message to requester-1fail.")
        await wait_dispatched(replier, broker.addr, reply_topic, 0, 5)
        stored = await pull_all(replier, broker.addr, reply_topic, queues=1)
        assert len(stored) >= 5 and stored[0].body == b"the answer" and stored[0].flag == 5
        assert "CLUSTER" not in stored[0].properties  # stored as the replier sent it
    finally:
        await requester.close()
        await replier.close()


# --- system topics -----------------------------------------------


async def test_system_topics_cannot_be_created_or_deleted_by_hand(broker: ServerProcess) -> None:
    """UPDATE_AND_CREATE_TOPIC and DELETE_TOPIC_IN_BROKER refuse TopicValidator's system
    topics and the broker's own names with RocketMQ's answer."""
    client = RemotingClient()
    try:
        for topic in ("SCHEDULE_TOPIC_XXXX", "TBW102", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_anything",
                      "broker-a", "DefaultCluster"):
            create = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                      "perm": "6", "topicFilterType": "SINGLE_TAG"}
            for req in (RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}),
                        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)):
                resp = await client.invoke(broker.addr, req, T)
                assert (resp.code, resp.remark) == (
                    ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
                ), (topic, req.code)
    finally:
        await client.close()
