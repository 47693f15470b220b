"""PullProcessor: PULL_MESSAGE against a real store -- found, not found, moved, held until a
message arrives, filtered -- and every refusal, which changes no table."""

from __future__ import annotations

import asyncio

import pytest

from apogee.broker.clients import ClientChannel
from apogee.broker.processors.pull import PERMITS_KEPT, PullProcessor, _not_found, _pull_code
from apogee.broker.subscriptions import SubscriptionGroupConfig
from apogee.common import constants as c
from apogee.common.java_hash import tags_code
from apogee.common.message_codec import decode_records, properties_to_string
from apogee.remoting.bodies.heartbeat import ConsumerData, SubscriptionData
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.pull import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, PullMessageRequestHeader
from apogee.remoting.server import Deferred
from apogee.store.inner import InnerMessage
from apogee.store.results import GetStatus
from tests.support.wire import pull_request
from tests.unit.broker.harness import Tables, answered, as_read, connection


def processor(t: Tables) -> PullProcessor:
    return PullProcessor(
        config=t.config, store=t.store, topics=t.topics, subscriptions=t.subscriptions, offsets=t.offsets,
        clients=t.clients, long_polling=t.long_polling, address=t.address, stats=t.stats,
    )


async def put(t: Tables, topic: str, body: bytes, tags: str = "A", queue_id: int = 0) -> None:
    props = {c.TAGS: tags}
    result = await t.store.put_message(InnerMessage(
        topic=topic, queue_id=queue_id, body=body, properties=properties_to_string(props), tags_code=tags_code(tags),
    ))
    assert result.ok
    await t.store.wait_dispatched()


def pull(topic: str = "T", offset: int = 0, *, sys_flag: int = FLAG_SUBSCRIPTION, commit_offset: int = 0,
         sub_version: int = 0, subscription: str = "*", expression_type: str | None = None,
         queue_id: int = 0, group: str = "CG") -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
        sys_flag=sys_flag, commit_offset=commit_offset, suspend_timeout_millis=0, sub_version=sub_version,
        subscription=subscription, expression_type=expression_type,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.encode())


def ext(answer: RemotingCommand) -> dict[str, int]:
    fields = answer.ext_fields or {}
    assert all(isinstance(v, str) for v in fields.values())  # the C++ client reads strings only
    return {k: int(fields[k]) for k in ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")}


@pytest.fixture
def topic(tables: Tables) -> str:
    tables.topics.put(TopicConfigData("T", 2, 2))
    return "T"


async def test_a_pull_answers_the_stored_records_and_where_to_go_on(tables: Tables, topic: str) -> None:
    for i in range(3):
        await put(tables, topic, f"m{i}".encode())
    answer = await answered(processor(tables).pull, connection(), pull(offset=1))
    assert answer.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(answer.body_bytes())] == [b"m1", b"m2"]
    assert ext(answer) == {"suggestWhichBrokerId": 0, "nextBeginOffset": 3, "minOffset": 0, "maxOffset": 3}
    assert tables.subscriptions.get("CG") is not None  # accepted: the group is created


async def test_a_pull_at_the_end_is_not_found_and_past_it_is_moved(tables: Tables, topic: str) -> None:
    puller = processor(tables)
    assert (await answered(puller.pull, connection(), pull())).code == ResponseCode.PULL_NOT_FOUND
    await put(tables, topic, b"x")
    assert (await answered(puller.pull, connection(), pull(offset=1))).code == ResponseCode.PULL_NOT_FOUND
    moved = await answered(puller.pull, connection(), pull(offset=7))
    # Past the end: back to the max offset, as RocketMQ 4.9.8 answers.
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and ext(moved)["nextBeginOffset"] == 1


async def test_a_tag_filter_skips_other_tags(tables: Tables, topic: str) -> None:
    await put(tables, topic, b"a", tags="A")
    await put(tables, topic, b"b", tags="B")
    answer = await answered(processor(tables).pull, connection(), pull(subscription="B"))
    assert [m.body for m in decode_records(answer.body_bytes())] == [b"b"]


async def test_a_held_pull_is_answered_when_a_message_arrives(tables: Tables, topic: str) -> None:
    tables.store.add_arrival_listener(
        lambda t, q, max_offset, code, props: tables.long_polling.notify(t, q, max_offset, code)
    )
    req = pull_request(topic, 0, 0, group="CG", suspend_ms=30_000)
    held = processor(tables).pull(connection(), req)
    # Held at once, in the callback that found the queue empty: nothing can slip in between.
    assert isinstance(held, Deferred) and tables.long_polling.held == 1
    assert not held.future.done()
    await put(tables, topic, b"late")
    answer = as_read(req, held.answer(await asyncio.wait_for(held.future, 10)))
    assert answer.code == ResponseCode.SUCCESS and decode_records(answer.body_bytes())[0].body == b"late"
    assert tables.long_polling.held == 0


async def test_a_connection_over_its_held_pulls_is_answered_system_busy(tables: Tables, topic: str) -> None:
    tables.long_polling.max_per_connection = 1
    conn = connection()
    puller = processor(tables)
    held = puller.pull(conn, pull_request(topic, 0, 0, group="CG", suspend_ms=30_000))
    assert isinstance(held, Deferred)
    refused = await answered(puller.pull, conn, pull_request(topic, 1, 0, group="CG", suspend_ms=30_000))
    assert refused.code == ResponseCode.SYSTEM_BUSY and "maxHeldPullsPerConnection" in (refused.remark or "")
    other = puller.pull(connection(("127.0.0.1", 5556)), pull_request(topic, 1, 0, group="CG", suspend_ms=30_000))
    assert isinstance(other, Deferred)  # another connection still holds its own
    tables.long_polling.wake_all()
    assert held.answer(await held.future).code == ResponseCode.PULL_NOT_FOUND


async def test_a_pull_may_commit_the_consumers_offset(tables: Tables, topic: str) -> None:
    await put(tables, topic, b"x")
    await answered(processor(tables).pull, connection(), pull(sys_flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET,
                                                             commit_offset=1))
    assert tables.offsets.query("CG", topic, 0) == 1


async def test_without_a_subscription_in_the_request_the_heartbeats_one_is_used(tables: Tables, topic: str) -> None:
    puller = processor(tables)
    answer = await answered(puller.pull, connection(), pull(sys_flag=0))
    assert answer.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and "group info" in (answer.remark or "")
    conn = connection()
    channel = ClientChannel(conn, "client-1", 0, 0, 0)
    tables.clients.register_consumer(ConsumerData("CG", subscriptions=[SubscriptionData("Other")]), channel)
    answer = await answered(puller.pull, conn, pull(sys_flag=0))
    assert answer.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and "subscription not exist" in (answer.remark or "")
    sub = SubscriptionData(topic, "B", code_set=[tags_code("B")], sub_version=5)
    tables.clients.register_consumer(ConsumerData("CG", subscriptions=[sub]), channel)
    answer = await answered(puller.pull, conn, pull(sys_flag=0, sub_version=6))
    assert answer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    await put(tables, topic, b"a", tags="A")
    await put(tables, topic, b"b", tags="B")
    answer = await answered(puller.pull, conn, pull(sys_flag=0, sub_version=5))
    assert [m.body for m in decode_records(answer.body_bytes())] == [b"b"]


async def test_pull_refusals_change_nothing(tables: Tables, topic: str) -> None:
    tables.topics.put(TopicConfigData("WriteOnly", 1, 1, c.PERM_WRITE))
    tables.subscriptions.put(SubscriptionGroupConfig("Off", consume_enable=False))
    puller = processor(tables)
    cases: list[tuple[RemotingCommand, int, str]] = [
        (pull("Missing"), ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (pull("WriteOnly"), ResponseCode.NO_PERMISSION, "forbidden"),
        (pull(queue_id=2), ResponseCode.SYSTEM_ERROR, "queueId[2] is illegal"),
        (pull(group="Off"), ResponseCode.NO_PERMISSION, "no permission"),
        (pull(subscription="a > 1", expression_type="SQL92"), ResponseCode.SYSTEM_ERROR, "SQL92"),
        (pull(group="bad group"), ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "bad group"),
    ]
    before = dict(tables.subscriptions.table)
    for req, code, remark in cases:
        answer = await answered(puller.pull, connection(), req)
        assert answer.code == code and remark in (answer.remark or ""), (req.ext_fields, answer)
    tables.config.enable_property_filter = True
    answer = await answered(puller.pull, connection(), pull(subscription="a >", expression_type="SQL92"))
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    tables.subscriptions.auto_create = False
    answer = await answered(puller.pull, connection(), pull(group="Nobody"))
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    tables.config.broker_permission = c.PERM_WRITE
    answer = await answered(puller.pull, connection(), pull())
    assert answer.code == ResponseCode.NO_PERMISSION and tables.address.addr in (answer.remark or "")
    assert tables.subscriptions.table == before  # no group was created by a refused pull


async def test_an_accepted_pulls_verdict_is_taken_again_after_what_it_read_changes(tables: Tables, topic: str) -> None:
    """The processor keeps an accepted pull's checks and filter for the next identical pull
    (``PullProcessor._filter``); every table and setting they read makes it check again."""
    await put(tables, topic, b"a", tags="A")
    await put(tables, topic, b"b", tags="B")
    await put(tables, topic, b"c", queue_id=1)
    puller = processor(tables)

    async def code(req: RemotingCommand) -> int:
        return (await answered(puller.pull, connection(), req)).code

    def change(what: str) -> None:
        if what == "topic perm":
            tables.topics.put(TopicConfigData(topic, 2, 2, c.PERM_WRITE))
        elif what == "read queues":
            tables.topics.put(TopicConfigData(topic, 1, 1))
        elif what == "group":
            tables.subscriptions.put(SubscriptionGroupConfig("CG", consume_enable=False))
        else:
            tables.config.broker_permission = c.PERM_WRITE

    for what, refused in (("topic perm", ResponseCode.NO_PERMISSION), ("read queues", ResponseCode.SYSTEM_ERROR),
                          ("group", ResponseCode.NO_PERMISSION), ("broker perm", ResponseCode.NO_PERMISSION)):
        tables.topics.put(TopicConfigData(topic, 2, 2))
        tables.subscriptions.put(SubscriptionGroupConfig("CG"))
        tables.config.broker_permission = c.PERM_READ | c.PERM_WRITE
        assert await code(pull(queue_id=1)) == ResponseCode.SUCCESS  # accepted, its verdict kept
        change(what)
        assert await code(pull(queue_id=1)) == refused, what
    tables.config.broker_permission = c.PERM_READ | c.PERM_WRITE
    tables.config.enable_property_filter = True
    assert await code(pull(subscription="TAGS = 'B'", expression_type="SQL92")) == ResponseCode.SUCCESS
    tables.config.enable_property_filter = False
    assert await code(pull(subscription="TAGS = 'B'", expression_type="SQL92")) == ResponseCode.SYSTEM_ERROR

    # Without a subscription in the request: the consumer's heartbeat decides, and a new one too.
    conn = connection()
    channel = ClientChannel(conn, "client-1", 0, 0, 0)
    tables.clients.register_consumer(ConsumerData("CG", subscriptions=[
        SubscriptionData(topic, "B", code_set=[tags_code("B")], sub_version=5)]), channel)
    answer = await answered(puller.pull, conn, pull(sys_flag=0, sub_version=5))
    assert [m.body for m in decode_records(answer.body_bytes())] == [b"b"]
    tables.clients.register_consumer(ConsumerData("CG", subscriptions=[
        SubscriptionData(topic, "A", code_set=[tags_code("A")], sub_version=6)]), channel)
    answer = await answered(puller.pull, conn, pull(sys_flag=0, sub_version=5))
    assert [m.body for m in decode_records(answer.body_bytes())] == [b"a"]
    tables.clients.remove_connection(conn)
    assert await code(pull(sys_flag=0, sub_version=5)) == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_the_kept_verdicts_are_bounded(tables: Tables, topic: str) -> None:
    """Subscriptions are the clients' text: a client varying it pull after pull cannot make the
    processor keep more than PERMITS_KEPT verdicts."""
    puller = processor(tables)
    for i in range(PERMITS_KEPT + 10):
        await answered(puller.pull, connection(), pull(subscription=f"T{i}"))
    assert len(puller._permits) <= PERMITS_KEPT


@pytest.mark.parametrize(("status", "from_start", "later"), [
    # RocketMQ's PullMessageProcessor: each store outcome's code, pulling from offset 0 and from later.
    (GetStatus.FOUND, ResponseCode.SUCCESS, ResponseCode.SUCCESS),
    (GetStatus.NO_MATCHED_MESSAGE, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_RETRY_IMMEDIATELY),
    (GetStatus.MESSAGE_WAS_REMOVING, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_RETRY_IMMEDIATELY),
    (GetStatus.OFFSET_OVERFLOW_ONE, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_NOT_FOUND),
    (GetStatus.OFFSET_FOUND_NULL, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_NOT_FOUND),
    (GetStatus.NO_MESSAGE_IN_QUEUE, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED),
    (GetStatus.NO_MATCHED_LOGIC_QUEUE, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED),
    (GetStatus.OFFSET_TOO_SMALL, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_OFFSET_MOVED),
    (GetStatus.OFFSET_OVERFLOW_BADLY, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_OFFSET_MOVED),
])
def test_each_store_outcome_answers_rocketmqs_code(status: GetStatus, from_start: ResponseCode,
                                                    later: ResponseCode) -> None:
    assert _pull_code(status, 0) is from_start and _pull_code(status, 5) is later
    # Only PULL_NOT_FOUND is held for a suspending pull.
    assert _not_found(status, 0) == (from_start is ResponseCode.PULL_NOT_FOUND)
    assert _not_found(status, 5) == (later is ResponseCode.PULL_NOT_FOUND)
    assert len(GetStatus) == 9  # a new outcome needs its row here and in _PULL_CODES
