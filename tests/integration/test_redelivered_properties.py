"""The properties of redelivered messages are Apache RocketMQ 4.9.8's (issue 18, items 2-4).

A real broker, driven with hand-built frames.  Each expected property map is what 4.9.8's
code paths store (``broker/rewrite.py`` says where each comes from): a delayed message keeps
DELAY, REAL_TOPIC, REAL_QID and WAIT; a retried one RETRY_TOPIC, WAIT=false, DELAY,
ORIGIN_MESSAGE_ID (the first message's offset id, which VIEW_MESSAGE_BY_ID resolves) and the
REAL_TOPIC=%RETRY%group of its delay; a dead letter DELAY=0; a committed transaction message
everything its half held (TRAN_MSG, REAL_TOPIC, REAL_QID, WAIT, and TRANSACTION_CHECK_TIMES
once checked back).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apogee.common.message import MessageExt
from apogee.common.message_codec import decode_records
from apogee.common.message_id import create_offset_msg_id, decode_offset_msg_id
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from apogee.remoting.server import RequestDispatcher
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import pull_all, send_request

T = 5000
CLUSTER = "PropsCluster"
# Every delay level 1 s; transactions checked back 800 ms after their half is stored.
CONF = (
    f"brokerClusterName={CLUSTER}\nmessageDelayLevel=1s 1s 1s\n"
    "transactionCheckInterval=300\ntransactionTimeOut=800\ntransactionCheckMax=3\n"
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("props")
    namesrv = start_namesrv(base / "ns")
    try:
        server = start_broker(namesrv.addr, base / "store", CONF)
        yield server
        server.close()
    finally:
        namesrv.close()


async def arrived(client: RemotingClient, addr: str, topic: str, group: str, count: int = 1) -> list[MessageExt]:
    """The messages of queue 0 of ``topic`` once there are ``count``."""

    async def found() -> list[MessageExt] | None:
        got = await pull_all(client, addr, topic, queues=1, group=group, suspend_ms=500)
        return got if len(got) >= count else None

    return await wait_until(found, 15, f"{count} message(s) in {topic}")


async def sent(client: RemotingClient, addr: str, req: RemotingCommand) -> RemotingCommand:
    resp = await client.invoke(addr, req, T)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def test_a_delayed_message_arrives_with_delay_real_topic_real_qid_and_wait(broker: ServerProcess) -> None:
    client = RemotingClient()
    topic = unique("Delayed")
    try:
        await sent(client, broker.addr, send_request(topic, b"later", tags="A", keys="k1", delay_level=2))
        await sent(client, broker.addr, send_request(topic, b"latest", keys="k2", delay_level=99))
        first, second = sorted(await arrived(client, broker.addr, topic, "G-delay", 2), key=lambda m: m.body)
        assert first.properties == {
            "TAGS": "A", "KEYS": "k1", "DELAY": "2", "WAIT": "true", "CLUSTER": CLUSTER,
            "REAL_TOPIC": topic, "REAL_QID": "0",
        }
        # A level above the highest is delivered at the highest, and says so.
        assert second.properties == {
            "KEYS": "k2", "DELAY": "3", "WAIT": "true", "CLUSTER": CLUSTER, "REAL_TOPIC": topic, "REAL_QID": "0",
        }
    finally:
        await client.close()


def send_back(msg: MessageExt, group: str, delay_level: int, max_times: int | None = None) -> RemotingCommand:
    ext = {"offset": str(msg.commit_log_offset), "group": group, "delayLevel": str(delay_level),
           "originMsgId": msg.msg_id}  # the client's id: RocketMQ does not store this one
    if max_times is not None:
        ext["maxReconsumeTimes"] = str(max_times)
    return RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)


def heartbeat(group: str, topic: str) -> RemotingCommand:
    body = HeartbeatData("c1", [], [ConsumerData(group, subscriptions=[SubscriptionData(topic)])]).encode()
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, body)


async def test_retry_and_dead_letter_messages_carry_rocketmqs_properties(broker: ServerProcess) -> None:
    client = RemotingClient()
    topic, group = unique("Fails"), unique("G-retry")
    try:
        await sent(client, broker.addr, heartbeat(group, topic))  # the group and its retry topic exist
        await sent(client, broker.addr, send_request(topic, b"fails", tags="A", keys="k", props={"UNIQ_KEY": "U1"}))
        (original,) = await arrived(client, broker.addr, topic, group)
        origin = create_offset_msg_id("127.0.0.1", int(broker.addr.rsplit(":", 1)[1]), original.commit_log_offset)
        assert original.offset_msg_id == origin
        await sent(client, broker.addr, send_back(original, group, 0))
        (retried,) = await arrived(client, broker.addr, f"%RETRY%{group}", group)
        assert retried.reconsume_times == 1 and retried.body == b"fails"
        assert retried.properties == {
            **original.properties,  # TAGS, KEYS, UNIQ_KEY, CLUSTER
            "RETRY_TOPIC": topic, "WAIT": "false",
            "DELAY": "3",  # 3 + 0 reconsumes
            "ORIGIN_MESSAGE_ID": origin,
            "REAL_TOPIC": f"%RETRY%{group}", "REAL_QID": "0",
        }

        # ORIGIN_MESSAGE_ID is an offset message id: it names the first message's record.
        host, port, offset = decode_offset_msg_id(retried.properties["ORIGIN_MESSAGE_ID"])
        assert f"{host}:{port}" == broker.addr
        resp = await sent(client, broker.addr, RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
        (viewed,) = decode_records(resp.body_bytes())
        assert (viewed.topic, viewed.body, viewed.properties) == (topic, b"fails", original.properties)

        # Past the max reconsume times: the DLQ, with DELAY=0 and the rest of the retry's.
        await sent(client, broker.addr, send_back(retried, group, 0, max_times=1))
        (dead,) = await arrived(client, broker.addr, f"%DLQ%{group}", group)
        assert dead.reconsume_times == 2
        assert dead.properties == {**retried.properties, "DELAY": "0"}

        # A consumer that asks for the DLQ at once: no delay, so no REAL_TOPIC either.
        await sent(client, broker.addr, send_back(original, group, -1))
        dead_at_once = (await arrived(client, broker.addr, f"%DLQ%{group}", group, 2))[1]
        assert dead_at_once.properties == {
            **original.properties, "RETRY_TOPIC": topic, "WAIT": "false", "DELAY": "0", "ORIGIN_MESSAGE_ID": origin,
        }
    finally:
        await client.close()


def half_request(topic: str, body: bytes, group: str) -> RemotingCommand:
    req = send_request(topic, body, keys="tk", props={"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": "TX1"},
                       group=group)
    req.ext_fields["f"] = "4"  # sysFlag: TRANSACTION_PREPARED_TYPE, as clients send it
    return req


def end_request(resp: RemotingCommand, group: str) -> RemotingCommand:
    _, _, phys = decode_offset_msg_id(resp.ext_fields["msgId"])
    header = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=int(resp.ext_fields["queueOffset"]),
        commit_log_offset=phys, commit_or_rollback=8, msg_id=resp.ext_fields["msgId"],
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.encode())


def committed_properties(topic: str, group: str) -> dict[str, str]:
    """What the half message held, which the committed message keeps."""
    return {"KEYS": "tk", "TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": "TX1", "WAIT": "true", "CLUSTER": CLUSTER,
            "REAL_TOPIC": topic, "REAL_QID": "0"}


async def test_a_committed_transaction_message_keeps_what_its_half_held(broker: ServerProcess) -> None:
    client = RemotingClient()
    topic, group = unique("Tx"), unique("PG")
    try:
        await sent(client, broker.addr, send_request(topic, b"plain"))  # the topic exists
        half = await sent(client, broker.addr, half_request(topic, b"commit-me", group))
        await sent(client, broker.addr, end_request(half, group))
        plain, committed = await arrived(client, broker.addr, topic, "G-tx", 2)
        assert committed.body == b"commit-me" and committed.properties == committed_properties(topic, group)
    finally:
        await client.close()


async def test_a_transaction_committed_after_a_check_back_counts_its_checks(broker: ServerProcess) -> None:
    topic, group = unique("TxCheck"), unique("PG")
    checks: list[dict[str, str]] = []

    def on_check(conn: object, req: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.decode(req.ext_fields)
        (msg,) = decode_records(req.body_bytes())
        checks.append(msg.properties)
        end = EndTransactionRequestHeader(
            producer_group=group, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=8, msg_id=header.msg_id or "",
            from_transaction_check=True,
        )
        conn.invoke_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, end.encode()))  # type: ignore[attr-defined]

    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    producer = RemotingClient(dispatcher=dispatcher)
    try:
        await sent(producer, broker.addr, RemotingCommand.request(
            RequestCode.HEART_BEAT, None, HeartbeatData("p1", [group], []).encode()))
        await sent(producer, broker.addr, send_request(topic, b"plain"))
        await sent(producer, broker.addr, half_request(topic, b"decided-on-check", group))  # no answer: unknown
        plain, committed = await arrived(producer, broker.addr, topic, "G-tx", 2)
        assert committed.body == b"decided-on-check" and len(checks) == 1
        assert committed.properties == {**committed_properties(topic, group), "TRANSACTION_CHECK_TIMES": "1"}
        assert checks[0] == committed.properties  # the producer was asked about what is now delivered
    finally:
        await producer.close()
