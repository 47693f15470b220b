"""ACL 1.0 on a real broker (aclEnable=true, plain_acl.yml beside its broker.conf).

* Apogee's client signing with an account that may publish and subscribe everywhere: a
  representative run of the client suite (send, batch, pull, push consume with a retry,
  transactions, request-reply, offsets, queries) passes;
* admin-only codes are refused to that account and to unsigned requests, and allowed to an
  admin account; a refused send stores nothing;
* the permission table: every request code the broker serves, sent by a PUB, a SUB, a DENY and
  an admin account and unsigned, gets what ``TABLE`` says (the same table is in
  docs/security.md, checked below);
* plain_acl.yml edited while the broker runs takes effect within 2 s, a broken edit keeps the
  rules in force; the ``apogee admin`` ACL commands (codes 50-53) change the file.

One broker for the module; every test uses its own topics, groups and accounts.
"""

from __future__ import annotations

import asyncio
import os
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from apogee.admin.client import AdminClient
from apogee.admin.errors import TopicNotFoundError
from apogee.cli.admin import admin_group
from apogee.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PullResult,
    PullStatus,
    PushConsumer,
    TransactionProducer,
)
from apogee.common.message import MessageQueue
from apogee.common.message_codec import decode_records, encode_batch
from apogee.errors import NoRouteError, RemoteError
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from apogee.remoting.body_hasher import LARGE_BODY_BYTES
from apogee.remoting.client import RemotingClient
from apogee.remoting.codec import body_size
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.signing import SessionCredentials, Signer
from tests.integration.client.conftest import FAST, FAST_CONSUMER
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import pull_request, send_request

ROOT = Path(__file__).resolve().parents[2]
ACL_REMARK = "org.apache.rocketmq.acl.common.AclException: "

ACCOUNTS = {
    # name: (accessKey, secretKey, account entry beyond the keys)
    "admin": ("adminKey01", "adminSecret1", {"admin": True}),
    "app": ("appKey0001", "appSecret01", {"defaultTopicPerm": "PUB|SUB", "defaultGroupPerm": "PUB|SUB"}),
    "pub": ("pubKey0001", "pubSecret01", {"defaultTopicPerm": "PUB", "defaultGroupPerm": "PUB"}),
    "sub": ("subKey0001", "subSecret01", {"defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"}),
    "deny": ("denyKey001", "denySecret1", {"defaultTopicPerm": "DENY", "defaultGroupPerm": "DENY"}),
}


def account_entries() -> list[dict[str, Any]]:
    return [{"accessKey": ak, "secretKey": sk, **extra} for ak, sk, extra in ACCOUNTS.values()]


def creds(name: str) -> dict[str, str]:
    """Client options signing as the named account."""
    ak, sk, _ = ACCOUNTS[name]
    return {"access_key": ak, "secret_key": sk}


@dataclass
class AclCluster:
    namesrv: ServerProcess
    broker: ServerProcess
    acl_file: Path

    @property
    def ns(self) -> str:
        return self.namesrv.addr

    def admin(self, name: str | None = "admin") -> AdminClient:
        if name is None:
            return AdminClient(self.ns, access_key="", secret_key="")
        ak, sk, _ = ACCOUNTS[name]
        return AdminClient(self.ns, access_key=ak, secret_key=sk)

    def write_acl(self, doc: dict[str, Any]) -> None:
        """Replace plain_acl.yml as an operator does (write a temp file, rename it over)."""
        tmp = self.acl_file.with_name(".plain_acl.yml.edit")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        tmp.replace(self.acl_file)


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    base = tmp_path_factory.mktemp("acl")
    acl_file = base / "plain_acl.yml"  # beside the broker.conf start_broker writes (base/store.conf)
    acl_file.write_text(yaml.safe_dump({"accounts": account_entries()}, sort_keys=False))
    namesrv = start_namesrv(base / "namesrv")
    try:
        broker = start_broker(namesrv.addr, base / "store", "aclEnable=true\nbrokerName=acl-broker\n")
    except BaseException:
        namesrv.close()
        raise
    try:
        yield AclCluster(namesrv, broker, acl_file)
    finally:
        broker.close()
        namesrv.close()


def lacks(resource: str, needs: str, has: str, access_key: str) -> str:
    return f"No default permission for {resource} (needs {needs}; accessKey={access_key} has {has})"


async def max_offsets(cluster: AclCluster, topic: str) -> int:
    """Messages stored in ``topic`` (the sum of its queues' max offsets)."""
    async with cluster.admin() as admin:
        return sum(o.max_offset for o in (await admin.topic_stats(topic)).values())


async def created_topic(cluster: AclCluster, prefix: str) -> str:
    topic = unique(prefix)
    async with cluster.admin() as admin:
        (addr,) = (await admin.cluster_masters()).values()
        await admin.update_topic(topic, addr, queues=2)
    return topic


# --- the client suite, signing ------------------------------------------------------------------


async def op_send_and_query(cluster: AclCluster) -> None:
    topic = unique("AclSend")
    async with Producer(unique("P"), cluster.ns, **FAST, **creds("app")) as producer:
        msg = Message(topic, b"signed")
        msg.keys = ["k1"]
        result = await producer.send(msg)
    async with cluster.admin("app") as admin:

        async def by_key() -> list[bytes]:
            try:  # the NameServer learns the new topic at the broker's next registration
                return [f.message.body for f in await admin.query_by_key(topic, "k1")]
            except TopicNotFoundError:
                return []

        assert await wait_until(by_key, 10, "the key to be found") == [b"signed"]
        by_id = await admin.query_by_key(topic, result.msg_id, unique=True)  # _UNIQUE_KEY_QUERY
        assert [f.message.body for f in by_id] == [b"signed"]


async def op_batch(cluster: AclCluster) -> None:
    topic = unique("AclBatch")
    async with Producer(unique("P"), cluster.ns, **FAST, **creds("app")) as producer:
        await producer.send(Message(topic, b"creates the topic"))
        pending = [await producer.send_async(Message(topic, b"%d" % i)) for i in range(200)]  # auto-batched: 320
        results = await asyncio.gather(*pending)
        assert len({r.msg_id for r in results}) == 200
        batch = await producer.send_batch([Message(topic, b"b%d" % i) for i in range(10)])
        assert len(batch) == 10
    await wait_until(lambda: _eq(max_offsets(cluster, topic), 211), 10, "every message to be dispatched")


async def op_pull_and_offsets(cluster: AclCluster) -> None:
    topic = unique("AclPull")
    async with Producer(unique("P"), cluster.ns, **FAST, **creds("app")) as producer:
        sent = await producer.send(Message(topic, b"pulled"))
    async with PullConsumer(unique("G"), cluster.ns, **FAST, **creds("app")) as puller:
        mq = MessageQueue(topic, sent.message_queue.broker_name, sent.message_queue.queue_id)

        async def found() -> PullResult | None:  # the queue entry is written just after the send's answer
            try:
                result = await puller.pull(mq, "*", 0, 32)
            except NoRouteError:  # the NameServer learns the new topic at the broker's next registration
                return None
            return result if result.status is PullStatus.FOUND else None

        result = await wait_until(found, 10, "the message to be pulled")
        assert [m.body for m in result.messages] == [b"pulled"]
        puller.update_consume_offset(mq, result.next_begin_offset)
        await puller.commit()
        assert await puller.fetch_consume_offset(mq) == result.next_begin_offset


async def op_push_consume_with_retry(cluster: AclCluster) -> None:
    topic = unique("AclPush")
    seen: list[tuple[bytes, int]] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        seen.extend((m.body, m.reconsume_times) for m in msgs)
        # the first delivery fails: CONSUMER_SEND_MSG_BACK, then the retry topic (delay level 1: 1 s)
        ctx.delay_level_when_next_consume = 1
        return ConsumeResult.RECONSUME_LATER if all(m.reconsume_times == 0 for m in msgs) else ConsumeResult.SUCCESS

    async with Producer(unique("P"), cluster.ns, **FAST, **creds("app")) as producer:
        await producer.send(Message(topic, b"pushed"))
        consumer = PushConsumer(
            unique("G"), cluster.ns, listener=listener, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            **FAST_CONSUMER, **creds("app"),
        )
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: (b"pushed", 1) in seen, 30, "the message to come back from its retry topic")


async def op_transaction(cluster: AclCluster) -> None:
    topic = unique("AclTx")

    class Committing:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async with Producer(unique("P"), cluster.ns, **FAST, **creds("app")) as producer:
        await producer.send(Message(topic, b"creates the topic"))
    async with TransactionProducer(unique("Tx"), cluster.ns, listener=Committing(), **FAST, **creds("app")) as tx:
        result = await tx.send_message_in_transaction(Message(topic, b"paid"))
        assert result.local_state is LocalTransactionState.COMMIT_MESSAGE
    await wait_until(lambda: _eq(max_offsets(cluster, topic), 2), 10, "the committed message to be visible")


async def _eq(value: Any, expected: int) -> bool:
    return await value == expected


async def op_request_reply(cluster: AclCluster) -> None:
    topic = unique("AclRequest")
    async with Producer(unique("Replier"), cluster.ns, **FAST, **creds("app")) as replier:
        await replier.send(Message(topic, b"creates the topic"))

        async def answer(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            for msg in msgs:
                if msg.body != b"creates the topic":
                    await replier.reply(msg, b"re:" + msg.body)

        consumer = PushConsumer(
            unique("G"), cluster.ns, listener=answer, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            **FAST_CONSUMER, **creds("app"),
        )
        consumer.subscribe(topic)
        async with consumer, Producer(unique("Requester"), cluster.ns, **FAST, **creds("app")) as requester:
            reply = await requester.request(Message(topic, b"ping"), 15_000)
            assert reply.body == b"re:ping"


CLIENT_SUITE = {
    "send+query": op_send_and_query,
    "batch": op_batch,
    "pull+offsets": op_pull_and_offsets,
    "push+retry": op_push_consume_with_retry,
    "transaction": op_transaction,
    "request-reply": op_request_reply,
}


@pytest.mark.parametrize("operation", list(CLIENT_SUITE))
async def test_the_client_suite_passes_signed(acl_cluster: AclCluster, operation: str) -> None:
    await asyncio.wait_for(CLIENT_SUITE[operation](acl_cluster), 60)


# --- refusals -----------------------------------------------------------------------------------


async def test_admin_codes_are_refused_to_a_non_admin_account_and_to_unsigned_requests(acl_cluster: AclCluster) -> None:
    topic = unique("AclAdminOnly")
    for who, reason in (
        ("app", "Need admin permission for request code=17, but accessKey=appKey0001 is not"),
        (None, "No accessKey is configured"),
    ):
        async with acl_cluster.admin(who) as admin:
            (addr,) = (await admin.cluster_masters()).values()  # the NameServer checks nothing
            with pytest.raises(RemoteError) as info:
                await admin.update_topic(topic, addr)
            assert info.value.code == ResponseCode.SYSTEM_ERROR
            assert info.value.remark == ACL_REMARK + reason
    async with acl_cluster.admin("admin") as admin:
        await admin.update_topic(topic, addr)
        assert topic in await admin.topic_list()


async def test_a_refused_send_stores_nothing_and_the_connection_keeps_serving(acl_cluster: AclCluster) -> None:
    topic = await created_topic(acl_cluster, "AclRefused")
    async with Producer(unique("P"), acl_cluster.ns, **FAST, **creds("sub"), retry_times_when_send_failed=0) as p:
        with pytest.raises(RemoteError, match=r"No default permission for topic:AclRefused\S* \(needs PUB"):
            await p.send(Message(topic, b"refused"))
        with pytest.raises(RemoteError, match="needs PUB"):  # the same connection answers again
            await p.send(Message(topic, b"refused again"))
    wrong = {"access_key": ACCOUNTS["pub"][0], "secret_key": "notTheSecret"}
    async with Producer(unique("P"), acl_cluster.ns, **FAST, **wrong, retry_times_when_send_failed=0) as p:
        with pytest.raises(RemoteError, match="Check signature failed for accessKey=pubKey0001"):
            await p.send(Message(topic, b"forged"))
    async with Producer(unique("P"), acl_cluster.ns, **FAST, **creds("pub")) as p:
        await p.send(Message(topic, b"allowed"))
    stored = await wait_until(lambda: max_offsets(acl_cluster, topic), 10, "the allowed message to be dispatched")
    assert stored == 1  # and none of the refused ones
    # The pull path (C collect included) is behind the same check: PUB alone reads nothing.
    async with acl_cluster.admin() as admin:
        (queue,) = [k.queue_id for k, o in (await admin.topic_stats(topic)).items() if o.max_offset == 1]
    pulls = {}
    for name in ("pub", "sub"):
        puller = RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS[name][:2])))
        try:
            pulls[name] = await puller.invoke(acl_cluster.broker.addr, pull_request(topic, queue, 0, group="G"), 5000)
        finally:
            await puller.close()
    assert pulls["pub"].remark == ACL_REMARK + lacks(f"topic:{topic}", "SUB", "PUB", "pubKey0001")
    assert pulls["sub"].code == ResponseCode.SUCCESS and decode_records(pulls["sub"].body_bytes())[0].body == b"allowed"


def batch_request(topic: str, count: int = 100) -> RemotingCommand:
    """SEND_BATCH_MESSAGE of ``count`` x 1000 B to queue 0: from 100 on, a body both the
    client and the broker hash off their loops (``body_hasher``; with 2 cores or more)."""
    items = [(0, b"b" * 1000, {"WAIT": "true"}) for _ in range(count)]
    batch = send_request(topic, encode_batch(items), props={})
    batch.code = RequestCode.SEND_BATCH_MESSAGE
    batch.ext_fields = {**(batch.ext_fields or {}), "m": "true"}
    assert count < 100 or body_size(batch.body) >= LARGE_BODY_BYTES
    return batch


async def test_a_signed_batch_is_stored_and_a_forged_one_refused(acl_cluster: AclCluster) -> None:
    """SEND_BATCH_MESSAGE (320): the signature covers the whole 100 KB body."""
    topic = await created_topic(acl_cluster, "AclBatch320")
    addr = acl_cluster.broker.addr
    batch = batch_request(topic)
    forger = RemotingClient(signer=Signer(SessionCredentials(ACCOUNTS["app"][0], "notTheSecret")))
    client = RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS["app"][:2])))
    try:
        forged = await forger.invoke(addr, batch, 10_000)
        assert forged.remark == ACL_REMARK + "Check signature failed for accessKey=appKey0001"
        stored = await client.invoke(addr, batch, 10_000)
        assert stored.code == ResponseCode.SUCCESS, stored.remark
    finally:
        await client.close()
        await forger.close()
    assert await wait_until(lambda: max_offsets(acl_cluster, topic), 10, "the batch to be dispatched") == 100


async def test_a_large_batch_tampered_in_its_body_or_not_permitted_is_refused(acl_cluster: AclCluster) -> None:
    """The check of a large body, done off the broker's loop, refuses as the inline one does."""
    topic = await created_topic(acl_cluster, "AclBatchTampered")
    addr = acl_cluster.broker.addr
    tampered = batch_request(topic)
    tampered.ext_fields = Signer(SessionCredentials(*ACCOUNTS["app"][:2])).sign_ext(tampered.ext_fields, tampered.body)
    body = bytearray(tampered.body_bytes())
    body[-1] ^= 1  # the last message's last body byte: still a well-formed batch
    tampered.body = bytes(body)
    unsigned = RemotingClient()  # sends the fields as they are, Signature included
    sub = RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS["sub"][:2])))
    app = RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS["app"][:2])))
    try:
        refused = await unsigned.invoke(addr, tampered, 10_000)
        assert refused.remark == ACL_REMARK + "Check signature failed for accessKey=appKey0001"
        not_pub = await sub.invoke(addr, batch_request(topic), 10_000)
        assert not_pub.remark == ACL_REMARK + lacks(f"topic:{topic}", "PUB", "SUB", "subKey0001")
        stored = await app.invoke(addr, batch_request(topic, 3), 10_000)  # small: checked on the loop
        assert stored.code == ResponseCode.SUCCESS, stored.remark
    finally:
        for client in (unsigned, sub, app):
            await client.close()
    assert await wait_until(lambda: max_offsets(acl_cluster, topic), 10, "the allowed batch to be dispatched") == 3


async def test_requests_after_a_large_batch_keep_their_order(acl_cluster: AclCluster) -> None:
    """A batch hashed off the loop does not let the requests sent after it overtake it: the
    client writes them after it, the broker processes them after it."""
    topic = await created_topic(acl_cluster, "AclBatchOrder")
    addr = acl_cluster.broker.addr
    client = RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS["app"][:2])))
    try:
        first = await client.invoke(addr, send_request(topic, b"first"), 10_000)  # the connection is open
        assert first.code == ResponseCode.SUCCESS, first.remark
        answers = await asyncio.gather(
            client.invoke(addr, batch_request(topic), 10_000),
            client.invoke(addr, send_request(topic, b"after the batch"), 10_000),
            client.invoke(addr, batch_request(topic), 10_000),
            client.invoke(addr, send_request(topic, b"last"), 10_000),
        )
        # More requests behind one batch than the broker holds before it stops reading the
        # connection (AclDispatcher.HELD_LIMIT; whether they reach it depends on timing, the
        # unit tests hold it for sure): each keeps its place, and the connection serves on.
        many = await asyncio.gather(
            client.invoke(addr, batch_request(topic), 10_000),
            *(client.invoke(addr, send_request(topic, b"%d" % i), 10_000) for i in range(100)),
        )
        many.append(await client.invoke(addr, send_request(topic, b"read again"), 10_000))
    finally:
        await client.close()
    assert [a.code for a in answers + many] == [ResponseCode.SUCCESS] * 106, [a.remark for a in answers + many]
    assert [int((a.ext_fields or {})["queueOffset"]) for a in answers] == [1, 101, 102, 202]
    assert [int((a.ext_fields or {})["queueOffset"]) for a in many] == [203, *range(303, 404)]


# --- the permission table ---------------------------------------------------------------------------

TOPIC, GROUP = "AclTableTopic", "AclTableGroup"
COLUMNS = ("pub", "sub", "deny", "admin", "unsigned")
ALL, NONE, ADMIN = "yyyyn", "nnnnn", "nnnyn"
PUB_ONLY, SUB_ONLY = "ynnyn", "nynyn"
# What each account gets (y: past the ACL, n: refused by it), by request, for the codes with a
# rule; every other code the broker serves: ALL (a known account passes, unsigned does not).
TABLE: dict[str, tuple[int, dict[str, str], str]] = {
    "SEND_MESSAGE (10)": (10, {"topic": TOPIC, "producerGroup": "PG"}, PUB_ONLY),
    "SEND_MESSAGE_V2 (310)": (310, {"a": "PG", "b": TOPIC}, PUB_ONLY),
    "SEND_BATCH_MESSAGE (320)": (320, {"a": "PG", "b": TOPIC}, PUB_ONLY),
    "SEND_MESSAGE_V2 to %RETRY%group": (310, {"a": GROUP, "b": "%RETRY%" + GROUP}, SUB_ONLY),
    "SEND_MESSAGE_V2 to RMQ_SYS_TRACE_TOPIC": (310, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"}, ALL),
    "CONSUMER_SEND_MSG_BACK (36)": (36, {"group": GROUP}, SUB_ONLY),
    "PULL_MESSAGE (11)": (11, {"topic": TOPIC, "consumerGroup": GROUP}, SUB_ONLY),
    "QUERY_MESSAGE (12)": (12, {"topic": TOPIC}, SUB_ONLY),
    "UPDATE_CONSUMER_OFFSET (15)": (15, {"topic": TOPIC, "consumerGroup": GROUP}, SUB_ONLY),
    "HEART_BEAT (34) of a consumer": (34, {}, SUB_ONLY),
    "UNREGISTER_CLIENT (35) of a consumer": (35, {"clientID": "c", "consumerGroup": GROUP}, SUB_ONLY),
    "GET_CONSUMER_LIST_BY_GROUP (38)": (38, {"consumerGroup": GROUP}, SUB_ONLY),
    **{
        f"{RequestCode(code).name} ({code})": (code, {}, ADMIN)
        for code in (17, 25, 215, 200, 207, 50, 51, 52, 53, 222, 306, 316, 329)
    },
}
# Codes not sent by the table test: their processors act on what they get (a slave's report).
NOT_SENT = {RequestCode.APOGEE_HA_DIVERGED}


def heartbeat_body() -> bytes:
    consumer = ConsumerData(GROUP, subscriptions=[SubscriptionData(TOPIC)])
    return HeartbeatData("acl-table@client", [], [consumer]).encode()


def render_table() -> str:
    """The table as docs/security.md shows it."""
    lines = ["| request | PUB | SUB | DENY | admin | unsigned |", "|---|---|---|---|---|---|"]
    for name, (_, _, row) in TABLE.items():
        lines.append(f"| {name} | " + " | ".join("✓" if c == "y" else "✗" for c in row) + " |")
    lines.append("| every other code the broker serves | " + " | ".join("✓" if c == "y" else "✗" for c in ALL) + " |")
    return "\n".join(lines)


def test_docs_show_the_permission_table_the_broker_is_tested_against() -> None:
    assert render_table() in (ROOT / "docs" / "security.md").read_text()


async def outcome(client: RemotingClient, addr: str, code: int, ext: dict[str, str]) -> str:
    body = heartbeat_body() if code == RequestCode.HEART_BEAT else None
    resp = await client.invoke(addr, RemotingCommand.request(code, dict(ext), body), 5000)
    refused = resp.code == ResponseCode.SYSTEM_ERROR and (resp.remark or "").startswith(ACL_REMARK)
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return "-"
    return "n" if refused else "y"


async def test_the_permission_table_on_a_real_broker(acl_cluster: AclCluster) -> None:
    addr = acl_cluster.broker.addr
    clients = {
        name: RemotingClient(signer=Signer(SessionCredentials(*ACCOUNTS[name][:2])))
        for name in ("pub", "sub", "deny", "admin")
    }
    clients["unsigned"] = RemotingClient()
    try:
        got = {}
        for name, (code, ext, _) in TABLE.items():
            got[name] = "".join([await outcome(clients[c], addr, code, ext) for c in COLUMNS])
        assert got == {name: row for name, (_, _, row) in TABLE.items()}
        ruled = {code for code, _, _ in TABLE.values()}
        others = {}
        for code in RequestCode:
            if code in ruled or code in NOT_SENT:
                continue
            row = "".join([await outcome(clients[c], addr, code, {}) for c in COLUMNS])
            if "-" not in row:  # "-": not served by the broker (REQUEST_CODE_NOT_SUPPORTED)
                others[code.name] = row
        assert others and set(others.values()) == {ALL}, others
    finally:
        for client in clients.values():
            await client.close()


# --- plain_acl.yml while the broker runs ------------------------------------------------------


async def test_an_edited_plain_acl_yml_takes_effect_within_2_s_and_a_broken_one_changes_nothing(
    acl_cluster: AclCluster,
) -> None:
    topic = await created_topic(acl_cluster, "AclReload")
    late = SessionCredentials("lateKey001", "lateSecret1")
    probe = RemotingClient(signer=Signer(late))  # a request that touches no resource: only the account matters

    async def accepted() -> bool:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        resp = await probe.invoke(acl_cluster.broker.addr, request, 5000)
        return resp.code == ResponseCode.SUCCESS

    async def send_as_late() -> str:
        return await send(acl_cluster, topic, late.access_key, late.secret_key)

    try:
        assert not await accepted()
        assert "No acl config for lateKey001" in await send_as_late()
        entry = {"accessKey": late.access_key, "secretKey": late.secret_key, "defaultTopicPerm": "PUB"}
        acl_cluster.write_acl({"accounts": [*account_entries(), entry]})
        loop = asyncio.get_running_loop()
        written = loop.time()
        await wait_until(accepted, 10, "the new account to be in force")
        assert loop.time() - written < 2.0
        assert await send_as_late() == "stored"
        # A broken file: the rules in force stay, and the broker says why.
        acl_cluster.acl_file.write_text("accounts: [ {accessKey: lateKey001, secretKey: ")
        await wait_until(lambda: "the changed files are refused" in acl_cluster.broker.stderr(), 10, "the refusal")
        assert await accepted() and await send_as_late() == "stored"
        acl_cluster.write_acl({"accounts": account_entries()})
        await wait_until(lambda: _not(accepted()), 10, "the account to be gone again")
    finally:
        await probe.close()


async def _not(result: Any) -> bool:
    return not await result


# --- apogee admin: codes 50-53 ------------------------------------------------------------------


def apogee_admin(cluster: AclCluster, *args: str, account: str = "admin", ok: bool = True) -> Result:
    """``apogee admin ARGS`` signing as ``account`` (in process: a CLI start-up costs a second)."""
    ak, sk, _ = ACCOUNTS[account]
    argv = [*args, "-n", cluster.ns, "--acl-access-key", ak, "--acl-secret-key", sk]
    result = CliRunner().invoke(admin_group, argv, env={"NAMESRV_ADDR": ""}, catch_exceptions=False)
    assert (result.exit_code == 0) is ok, (argv, result.output)
    return result


async def send(cluster: AclCluster, topic: str, access_key: str, secret_key: str) -> str:
    options = {"access_key": access_key, "secret_key": secret_key, "retry_times_when_send_failed": 0}
    async with Producer(unique("P"), cluster.ns, **FAST, **options) as p:
        try:
            await p.send(Message(topic, b"x"))
            return "stored"
        except RemoteError as exc:
            return exc.remark or ""


def test_the_acl_admin_commands_change_the_file_and_the_rules(acl_cluster: AclCluster) -> None:
    topic = asyncio.run(created_topic(acl_cluster, "AclCli"))
    broker = acl_cluster.broker.addr
    made = apogee_admin(
        acl_cluster, "updateAclConfig", "-b", broker, "-a", "cliKey0001", "-s", "cliSecret01", "-i", "PUB",
        "-t", f"{topic}=PUB,other=DENY", "-m", "false",
    )
    assert "cliSecret01" not in made.output
    doc = yaml.safe_load(acl_cluster.acl_file.read_text())
    entry = next(a for a in doc["accounts"] if a["accessKey"] == "cliKey0001")
    assert entry["topicPerms"] == [f"{topic}=PUB", "other=DENY"] and entry["admin"] is False
    # in force when the command returned
    assert asyncio.run(send(acl_cluster, topic, "cliKey0001", "cliSecret01")) == "stored"

    refused = apogee_admin(acl_cluster, "updateAclConfig", "-b", broker, "-a", "x", "-s", "y", account="app", ok=False)
    assert "Need admin permission for request code=50" in refused.output

    versions = apogee_admin(acl_cluster, "clusterAclConfigVersion", "-b", broker, "--json")
    assert any(
        row["acl file"] == str(acl_cluster.acl_file.resolve()) and row["version"] >= 1
        for row in yaml.safe_load(versions.stdout)["aclConfigVersions"]
    )

    apogee_admin(acl_cluster, "updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.103.*,192.168.0.*")
    doc = yaml.safe_load(acl_cluster.acl_file.read_text())
    assert doc["globalWhiteRemoteAddresses"] == ["10.10.103.*", "192.168.0.*"]
    bad = apogee_admin(acl_cluster, "updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.103", ok=False)
    assert "code 211" in bad.output and "netaddress" in bad.output

    apogee_admin(acl_cluster, "deleteAclConfig", "-b", broker, "-a", "cliKey0001")
    assert "No acl config for cliKey0001" in asyncio.run(send(acl_cluster, topic, "cliKey0001", "cliSecret01"))
    again = apogee_admin(acl_cluster, "deleteAclConfig", "-b", broker, "-a", "cliKey0001", ok=False)
    assert "code 210" in again.output


async def test_the_dashboard_signs_with_its_account(acl_cluster: AclCluster) -> None:
    topic = await created_topic(acl_cluster, "Dash")
    ak, sk, _ = ACCOUNTS["admin"]
    signed = ServerProcess(["dashboard", "-n", acl_cluster.ns, "--listen", "127.0.0.1:0",
                            "--acl-access-key", ak, "--acl-secret-key", sk])
    unsigned = ServerProcess(["dashboard", "-n", acl_cluster.ns, "--listen", "127.0.0.1:0"],
                             env={**os.environ, "APOGEE_ACCESS_KEY": "", "APOGEE_SECRET_KEY": ""})
    with signed, unsigned:
        page = await asyncio.to_thread(http_get, f"http://{signed.addr}/topics/{topic}")
        refused = await asyncio.to_thread(http_get, f"http://{unsigned.addr}/topics/{topic}")
    # The topic's status (one row per queue, read from the broker) with the admin account ...
    assert "acl-broker" in page and "AclException" not in page
    # ... and, unsigned, the broker's refusal shown in the page with RocketMQ's remark.
    assert "AclException" in refused, refused[-2000:]


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())
