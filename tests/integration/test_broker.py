"""A real `apogee broker` (and NameServer) process driven with hand-built RocketMQ frames."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from apogee.common.constants import parse_delay_levels
from apogee.common.message_codec import decode_records
from apogee.common.message_id import decode_offset_msg_id
from apogee.remoting.bodies.heartbeat import (
    ConsumerData,
    HeartbeatData,
    LockBatchRequest,
    QueueKey,
    SubscriptionData,
    decode_consumer_id_list,
    decode_lock_ok,
)
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import SendMessageRequestHeader, SendMessageRequestHeaderV2
from apogee.remoting.server import RequestDispatcher
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import next_millisecond, now_ms, wait_until
from tests.support.wire import pull_all, pull_request, send_request, wait_caught_up, wait_dispatched

T = 5000


def start_broker(namesrv: str, store: Path, conf: str = "") -> ServerProcess:
    conf_path = store.parent / f"{store.name}.conf"
    conf_path.parent.mkdir(parents=True, exist_ok=True)
    conf_path.write_text("brokerName=broker-t\n" + conf)
    return ServerProcess(
        ["broker", "-n", namesrv, "-c", str(conf_path), "--listen", "127.0.0.1:0", "--store-dir", str(store),
         "--broker-ip", "127.0.0.1"]
    ).start()


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_namesrv(tmp_path / "ns")
    yield server
    server.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One NameServer and broker for the tests that send, pull and ask: each test uses topics
    and groups of its own.  Tests that restart, expire or reconfigure a broker start their own
    (with the function-scoped ``namesrv``, since every broker here is named broker-t)."""
    base = tmp_path_factory.mktemp("broker")
    namesrv = start_namesrv(base / "ns")
    try:
        server = start_broker(namesrv.addr, base / "store", "maxMessageSize=65536\n")
        yield server
        server.close()
    finally:
        namesrv.close()


async def test_send_then_pull_returns_the_stored_bytes(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(
            broker.addr, send_request("Orders", b"payload", tags="TagA", keys="k1 k2", props={"color": "red"}), T
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        ext = resp.ext_fields or {}
        assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
        ip, port, phys = decode_offset_msg_id(ext["msgId"])
        assert (ip, port) == ("127.0.0.1", broker.port)
        (msg,) = await pull_all(client, broker.addr, "Orders")
        assert msg.body == b"payload" and msg.tags == "TagA" and msg.keys == ["k1", "k2"]
        assert msg.properties["color"] == "red" and msg.properties["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in msg.properties
        assert msg.commit_log_offset == phys and msg.store_host == ("127.0.0.1", broker.port)
    finally:
        await client.close()


@pytest.mark.parametrize(
    "props",
    [
        "WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02color\x01red\x02UNIQ_KEY\x01U1",  # the C path
        "TAGS\x01é😀\x02WAIT\x01false\x02KEYS\x01k3\x02",  # the C path, Java's trailing separator
        "TAGS\x01A\x02TAGS\x01B\x02\x02KEYS\x01\x02z\x01=\x01",  # the full path: duplicate, empty pair and value
    ],
)
async def test_both_send_paths_store_the_same_message(broker: ServerProcess, props: str) -> None:
    """SEND_MESSAGE_V2 of a plain message is stored by the C path, SEND_MESSAGE (V1) always by
    the full path: what a consumer gets back must not tell them apart."""
    client = RemotingClient()
    try:
        topic = unique("SamePaths")
        fields = dict(producer_group="g", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                      queue_id=1, sys_flag=0, born_timestamp=1_700_000_000_000, flag=7, properties=props)
        v1 = RemotingCommand.request(RequestCode.SEND_MESSAGE, SendMessageRequestHeader(**fields).encode(), b"same")
        v2 = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2(**fields).encode(), b"same"  # type: ignore[arg-type]
        )
        for req in (v1, v2):
            resp = await client.invoke(broker.addr, req, T)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        first, second = await pull_all(client, broker.addr, topic)
        assert first.properties == second.properties and "WAIT" not in first.properties
        assert first.properties["CLUSTER"] == "DefaultCluster"
        for attr in ("body", "flag", "sys_flag", "born_timestamp", "queue_id", "tags", "keys", "reconsume_times"):
            assert getattr(first, attr) == getattr(second, attr), attr
        assert first.store_size == second.store_size
        assert (first.queue_offset, second.queue_offset) == (0, 1)
    finally:
        await client.close()


async def test_a_held_pull_is_answered_by_the_send_not_by_its_timeout(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("LP", queue_id=1), T)  # create the topic
        loop = asyncio.get_running_loop()
        for _ in range(3):
            offset_resp = await client.invoke(
                broker.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "LP", "queueId": "0"}), T
            )
            offset = int(offset_resp.ext_fields["offset"])
            waiting = asyncio.ensure_future(
                client.invoke(broker.addr, pull_request("LP", 0, offset, suspend_ms=15000), 20000)
            )
            await asyncio.sleep(0.3)
            assert not waiting.done(), "the pull must be held while the queue is empty"
            sent = await client.invoke(broker.addr, send_request("LP", b"wake", queue_id=0), T)
            acked = loop.time()
            resp = await waiting
            latency_ms = (loop.time() - acked) * 1000
            assert resp.code == ResponseCode.SUCCESS and sent.code == 0
            assert [m.body for m in decode_records(resp.body_bytes())] == [b"wake"]
            # Apogee's hold service has no periodic recheck: a held pull whose queue is never
            # notified is answered only at its 15 s suspend timeout.  So any answer well inside
            # that proves the send woke it; the bound is loose because a loaded CI machine once
            # took 345 ms here (how fast the wake-up is belongs to benchmarks/, not to a test).
            assert latency_ms < 5000, f"held pull answered {latency_ms:.1f} ms after the send"
    finally:
        await client.close()


async def test_held_pull_times_out_with_no_new_message(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("LP2"), T)
        started = time.monotonic()
        resp = await client.invoke(broker.addr, pull_request("LP2", 2, 0, suspend_ms=500), 5000)
        assert resp.code == ResponseCode.PULL_NOT_FOUND
        assert 0.45 <= time.monotonic() - started < 3
        ext = resp.ext_fields or {}
        assert {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"} <= ext.keys()
    finally:
        await client.close()


async def test_pull_statuses_and_offsets(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        for i in range(3):
            await client.invoke(broker.addr, send_request("St", f"m{i}".encode(), tags="A" if i else "B"), T)
        await wait_dispatched(client, broker.addr, "St", 0, 3)
        resp = await client.invoke(broker.addr, pull_request("St", 0, 0, subscription="A"), T)
        assert resp.code == 0 and [m.body for m in decode_records(resp.body_bytes())] == [b"m1", b"m2"]
        assert resp.ext_fields["nextBeginOffset"] == "3" and resp.ext_fields["maxOffset"] == "3"
        resp = await client.invoke(broker.addr, pull_request("St", 0, 3), T)
        assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext_fields["nextBeginOffset"] == "3"
        resp = await client.invoke(broker.addr, pull_request("St", 0, 99), T)
        # Past the end: RocketMQ 4.9.8 corrects the consumer to the max offset (older releases to 0).
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext_fields["nextBeginOffset"] == "3"
        resp = await client.invoke(broker.addr, pull_request("St", 0, 0, subscription="C"), T)
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        resp = await client.invoke(broker.addr, pull_request("NoSuchTopic", 0, 0), T)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        resp = await client.invoke(broker.addr, pull_request("St", 77, 0), T)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[77] is illegal" in resp.remark
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("request_", "code", "remark"),
    [
        (lambda: send_request("Bad Topic"), ResponseCode.SYSTEM_ERROR, "characters"),
        (lambda: send_request("T" * 128), ResponseCode.SYSTEM_ERROR, "127"),
        (lambda: send_request("Fine", b""), ResponseCode.MESSAGE_ILLEGAL, "body is empty"),
        (lambda: send_request("Fine", b"x" * 65537), ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize"),
        (lambda: send_request("SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION, "forbidden"),
        (lambda: send_request("Fine", queue_id=99), ResponseCode.SYSTEM_ERROR, "queueId[99] is illegal"),
        (
            lambda: RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "Fine"}, b"x"),
            ResponseCode.SYSTEM_ERROR,
            "the custom field <c> is null",
        ),
        (
            lambda: RemotingCommand.request(
                RequestCode.PULL_MESSAGE, {"consumerGroup": "g", "topic": "Fine", "queueId": "zero"}
            ),
            ResponseCode.SYSTEM_ERROR,
            "queueId",
        ),
        (
            lambda: RemotingCommand.request(RequestCode.HEART_BEAT, None, b"{broken"),
            ResponseCode.SYSTEM_ERROR,
            "heartbeat",
        ),
        (
            lambda: RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, b"[]"),
            ResponseCode.SYSTEM_ERROR,
            "lock request",
        ),
        (lambda: RemotingCommand.request(7777), ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "7777"),
    ],
)
async def test_bad_requests_get_an_error_and_store_nothing(
    broker: ServerProcess, request_, code: int, remark: str
) -> None:
    client = RemotingClient()
    try:
        assert (await client.invoke(broker.addr, send_request("Fine", b"ok"), T)).code == 0
        before = (
            await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), T)
        ).body_bytes()
        resp = await client.invoke(broker.addr, request_(), T)
        assert resp.code == code
        assert remark in (resp.remark or ""), resp.remark
        after = (
            await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), T)
        ).body_bytes()
        max_offset = lambda body: orjson.loads(body)["table"]["commitLogMaxOffset"]  # noqa: E731
        assert max_offset(after) == max_offset(before)
        assert (await client.invoke(broker.addr, send_request("Fine", b"still serving"), T)).code == 0
    finally:
        await client.close()


async def test_garbage_frame_closes_only_that_connection(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("G1"), T)
        with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
            sock.sendall(struct.pack(">i", 1 << 30) + b"junk")
            assert await asyncio.to_thread(sock.recv, 10) == b""
        assert (await client.invoke(broker.addr, send_request("G1"), T)).code == 0
    finally:
        await client.close()


def _heartbeat(client_id: str, group: str, topic: str) -> RemotingCommand:
    body = HeartbeatData(
        client_id, [], [ConsumerData(group, subscriptions=[SubscriptionData(topic, "*")])]
    ).encode()
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, body)


async def test_consumer_membership_notify_and_locks(broker: ServerProcess) -> None:
    notified: asyncio.Queue[str] = asyncio.Queue()
    dispatcher = RequestDispatcher()
    dispatcher.register(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        lambda conn, req: notified.put_nowait(req.ext_fields["consumerGroup"]),
    )
    first = RemotingClient(dispatcher=dispatcher)
    second = RemotingClient()
    try:
        await first.invoke(broker.addr, send_request("Mem"), T)
        assert (await first.invoke(broker.addr, _heartbeat("c1", "GM", "Mem"), T)).code == 0
        assert (await second.invoke(broker.addr, _heartbeat("c2", "GM", "Mem"), T)).code == 0
        assert await asyncio.wait_for(notified.get(), 5) == "GM"
        resp = await first.invoke(
            broker.addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GM"}), T
        )
        assert decode_consumer_id_list(resp.body_bytes()) == ["c1", "c2"]
        # The retry topic of the group exists once a consumer heartbeats.
        resp = await first.invoke(broker.addr, pull_request("%RETRY%GM", 0, 0), T)
        assert resp.code == ResponseCode.PULL_NOT_FOUND

        q = QueueKey("Mem", "broker-t", 0)

        def lock(cid: str) -> RemotingCommand:
            return RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, LockBatchRequest("GM", cid, [q]).encode())

        assert decode_lock_ok((await first.invoke(broker.addr, lock("c1"), T)).body_bytes()) == [q]
        assert decode_lock_ok((await second.invoke(broker.addr, lock("c2"), T)).body_bytes()) == []
        # The second client leaves: the first is told, the list shrinks.
        await asyncio.sleep(0.2)
        while not notified.empty():  # the notifications of the joins
            notified.get_nowait()
        await second.close()
        assert await asyncio.wait_for(notified.get(), 5) == "GM"
        resp = await first.invoke(
            broker.addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GM"}), T
        )
        assert decode_consumer_id_list(resp.body_bytes()) == ["c1"]
    finally:
        await first.close()
        await second.close()


async def test_offsets_and_queries(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        t0 = int(time.time() * 1000)
        ids = []
        for i in range(5):
            resp = await client.invoke(broker.addr, send_request("Q", f"v{i}".encode(), keys=f"order-{i}"), T)
            ids.append(resp.ext_fields["msgId"])
            await asyncio.sleep(0.01)
        # The key index too (QUERY_MESSAGE below): a queue's max offset can show a record whose
        # index entry waits for its index file to be created.
        await wait_caught_up(broker.addr)
        q = {"consumerGroup": "GQ", "topic": "Q", "queueId": "0"}
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), T)
        assert resp.code == 0 and resp.ext_fields["offset"] == "0"  # new group, young queue: start at 0
        await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"}), T
        )
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), T)
        assert resp.ext_fields["offset"] == "3"
        tq = {"topic": "Q", "queueId": "0"}
        assert (
            await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, tq), T)
        ).ext_fields["offset"] == "5"
        assert (
            await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, tq), T)
        ).ext_fields["offset"] == "0"
        earliest = int(
            (
                await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME, tq), T)
            ).ext_fields["timestamp"]
        )
        assert t0 - 1000 <= earliest <= t0 + 5000
        resp = await client.invoke(
            broker.addr,
            RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**tq, "timestamp": str(t0 - 60_000)}),
            T,
        )
        assert resp.ext_fields["offset"] == "0"
        _, _, phys = decode_offset_msg_id(ids[2])
        resp = await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys)}), T
        )
        assert [m.body for m in decode_records(resp.body_bytes())] == [b"v2"]
        query = {"topic": "Q", "key": "order-4", "maxNum": "10", "beginTimestamp": "0", "endTimestamp": str(2**62)}
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, query), T)
        assert resp.code == 0 and [m.body for m in decode_records(resp.body_bytes())] == [b"v4"]
        resp = await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, {**query, "key": "nope"}), T
        )
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
    finally:
        await client.close()


async def test_send_back_goes_to_retry_then_dlq(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, _heartbeat("c1", "GR", "R"), T)
        resp = await client.invoke(broker.addr, send_request("R", b"fails", keys="rk"), T)
        _, _, phys = decode_offset_msg_id(resp.ext_fields["msgId"])
        back = {"offset": str(phys), "group": "GR", "delayLevel": "1", "originMsgId": resp.ext_fields["msgId"]}
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back), T)
        assert resp.code == 0, resp.remark
        # Delay level 1 (1 s): it reaches %RETRY%GR afterwards, with the retry bookkeeping.
        retried = await wait_until(
            lambda: pull_all(client, broker.addr, "%RETRY%GR", queues=1, group="GR"), 10, "the retry message"
        )
        (msg,) = retried
        assert msg.body == b"fails" and msg.reconsume_times == 1
        assert msg.properties["RETRY_TOPIC"] == "R" and msg.properties["ORIGIN_MESSAGE_ID"]
        # Past maxReconsumeTimes it lands in the DLQ at once.
        back = {"offset": str(msg.commit_log_offset), "group": "GR", "delayLevel": "0", "maxReconsumeTimes": "1"}
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back), T)
        assert resp.code == 0
        (dead,) = await pull_all(client, broker.addr, "%DLQ%GR", queues=1, group="GR")
        assert dead.body == b"fails" and dead.reconsume_times == 2
    finally:
        await client.close()


# Restarted brokers get 64 MiB CommitLog files: recovery reads a file's tail up to its end,
# which for the default 1 GiB file takes seconds that tell nothing more.
SMALL_COMMITLOG = "mappedFileSizeCommitLog=67108864\n"
# Level 3 is 10 s by default; 4 s still outlasts the stop of the first broker by far.
RESTART_DELAY_LEVELS = "messageDelayLevel=1s 2s 4s\n"


async def test_restart_keeps_topics_offsets_and_pending_delayed_messages(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    store = tmp_path / "restart-store"
    conf = SMALL_COMMITLOG + RESTART_DELAY_LEVELS
    broker = start_broker(namesrv.addr, store, conf)
    level_3_s = parse_delay_levels(RESTART_DELAY_LEVELS.split("=")[1])[2] / 1000
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("Keep", b"before"), T)
        q = {"consumerGroup": "GK", "topic": "Keep", "queueId": "0"}
        await client.invoke(
            broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"}), T
        )
        sent_at = time.monotonic()
        for body in (b"delayed", b"sentinel"):  # the sentinel: same level, same queue, just after
            resp = await client.invoke(broker.addr, send_request("Keep", body, queue_id=1, delay_level=3), T)
            assert resp.code == 0
        await client.close()
        first_port = broker.port
        assert broker.stop() == 0
        broker.close()
        broker = start_broker(namesrv.addr, store, conf)
        client = RemotingClient()
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), T)
        assert resp.ext_fields["offset"] == "1"
        resp = await client.invoke(broker.addr, pull_request("Keep", 0, 0, suspend_ms=3000), T)
        assert [m.body for m in decode_records(resp.body_bytes())] == [b"before"]
        # The delayed message was still pending at the restart (the restarted broker, on
        # another port, stored it): it arrives once, on time.
        resp = await client.invoke(broker.addr, pull_request("Keep", 1, 0, suspend_ms=15000), 20000)
        delayed, *rest = decode_records(resp.body_bytes())
        assert delayed.body == b"delayed"
        assert time.monotonic() - sent_at >= level_3_s - 0.5
        if broker.port != first_port:
            assert delayed.store_host == ("127.0.0.1", broker.port)
        # Not delivered twice: the level's next delivery is the sentinel sent after it.
        if not rest:
            resp = await client.invoke(broker.addr, pull_request("Keep", 1, 1, suspend_ms=15000), 20000)
            rest = decode_records(resp.body_bytes())
        assert [m.body for m in rest] == [b"sentinel"]
    finally:
        await client.close()
        broker.close()


async def test_clean_shutdown_unregisters_from_the_nameserver(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "s")
    client = RemotingClient()
    try:
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert (await client.invoke(namesrv.addr, route, T)).code == ResponseCode.SUCCESS
        broker.stop()
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert (await client.invoke(namesrv.addr, route, T)).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await client.close()
        broker.close()


async def test_silent_clients_expire(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "s", "channelExpiredTimeout=1500\n")
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, _heartbeat("quiet", "GE", "E"), T)
        conn = await client.connection(broker.addr)
        await asyncio.wait_for(conn.closed_future, 10)
        client2 = RemotingClient()
        resp = await client2.invoke(
            broker.addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GE"}), T
        )
        await client2.close()
        assert resp.code == ResponseCode.SYSTEM_ERROR  # no consumer left in the group
    finally:
        await client.close()
        broker.close()


async def test_reset_offset_by_time_sets_offsets_and_tells_live_consumers(broker: ServerProcess) -> None:
    from apogee.remoting.bodies.heartbeat import decode_reset_offset_body

    resets: asyncio.Queue[RemotingCommand] = asyncio.Queue()
    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, lambda conn, req: resets.put_nowait(req))
    consumer = RemotingClient(dispatcher=dispatcher)
    admin = RemotingClient()
    try:
        for i in range(3):
            await admin.invoke(broker.addr, send_request("Rw", f"old{i}".encode()), T)
        middle = next_millisecond(now_ms())  # after every "old" was stored
        next_millisecond(middle)  # every "new" is stored after it
        for i in range(2):
            await admin.invoke(broker.addr, send_request("Rw", f"new{i}".encode()), T)
        await wait_dispatched(admin, broker.addr, "Rw", 0, 5)
        await consumer.invoke(broker.addr, _heartbeat("c1", "GRw", "Rw"), T)
        q = {"consumerGroup": "GRw", "topic": "Rw", "queueId": "0"}
        await admin.invoke(
            broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "5"}), T
        )
        reset = {"topic": "Rw", "group": "GRw", "timestamp": str(middle), "isForce": "true"}
        resp = await admin.invoke(
            broker.addr, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset), T
        )
        assert resp.code == 0
        # RocketMQ's searchOffset rule: of the last "old" and the first "new", the one stored
        # nearer `middle` (the old one on a tie).
        times = [m.store_timestamp for m in await pull_all(admin, broker.addr, "Rw", queues=1)]
        target = 2 if middle - times[2] <= times[3] - middle else 3
        table = decode_reset_offset_body(resp.body_bytes())
        assert table[QueueKey("Rw", "broker-t", 0)] == target
        told = await asyncio.wait_for(resets.get(), 5)
        assert told.ext_fields["group"] == "GRw"
        assert decode_reset_offset_body(told.body_bytes())[QueueKey("Rw", "broker-t", 0)] == target
        resp = await admin.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), T)
        assert resp.ext_fields["offset"] == str(target)  # an offline consumer would start here too
    finally:
        await consumer.close()
        await admin.close()


async def test_sql92_subscriptions_filter_on_the_broker(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start_broker(namesrv.addr, tmp_path / "sql", "enablePropertyFilter=true\n")
    client = RemotingClient()
    try:
        for i in range(10):
            await client.invoke(
                broker.addr,
                send_request("Sq", f"m{i}".encode(), tags="TagA" if i % 2 else "TagB", props={"n": str(i)}),
                T,
            )
        await wait_dispatched(client, broker.addr, "Sq", 0, 10)
        resp = await client.invoke(
            broker.addr, pull_request("Sq", 0, 0, subscription="n > 5 AND TAGS = 'TagA'", expression_type="SQL92"), T
        )
        assert [m.body for m in decode_records(resp.body_bytes())] == [b"m7", b"m9"]
        resp = await client.invoke(
            broker.addr, pull_request("Sq", 0, 0, subscription="n BETWEEN 2 AND", expression_type="SQL92"), T
        )
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column" in resp.remark
        bad = HeartbeatData(
            "c1", [], [ConsumerData("GS", subscriptions=[SubscriptionData("Sq", "n >", expression_type="SQL92")])]
        ).encode()
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, bad), T)
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "GS" in resp.remark
    finally:
        await client.close()
        broker.close()


async def test_sql92_needs_enable_property_filter(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        await client.invoke(broker.addr, send_request("Sq2"), T)
        resp = await client.invoke(
            broker.addr, pull_request("Sq2", 0, 0, subscription="a > 1", expression_type="SQL92"), T
        )
        assert resp.code == ResponseCode.SYSTEM_ERROR and "SQL92" in resp.remark
    finally:
        await client.close()
