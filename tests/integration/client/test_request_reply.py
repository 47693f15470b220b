"""Request-reply (RIP-16) between two Apogee clients through a real broker: a requester's
``request`` gets the reply a consumer's ``reply`` sends, pushed by the broker
(PUSH_REPLY_MESSAGE_TO_CLIENT); sync, async with a callback, the blocking facade, and the
timeout when nobody answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from apogee.client import (
    ConsumeContext,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    create_reply_message,
)
from apogee.client.replier import reply_to_client
from apogee.client.sync import SyncProducer
from apogee.common import constants as c
from apogee.errors import ReplyTimeoutError, SystemError_
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until
from tests.support.wire import wait_cluster_caught_up

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


class Replier:
    """A consumer of requests that answers each with ``re:<body>`` through its own producer."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.answered: list[MessageExt] = []
        self.producer = Producer(unique("Replier"), cluster.ns, **FAST)
        self.consumer = PushConsumer(
            unique("G"), cluster.ns, listener=self.on_message, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            **FAST_CONSUMER,
        )
        self.consumer.subscribe(topic)

    async def on_message(self, msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        for request in msgs:
            self.answered.append(request)
            if reply_to_client(request) is not None:  # a request, not the message creating the topic
                await self.producer.reply(request, b"re:" + request.body)


@pytest.fixture
async def replier(cluster: Cluster) -> AsyncIterator[tuple[str, Replier]]:
    topic = unique("T_request")
    async with Producer(unique("P"), cluster.ns, **FAST) as creator:
        await creator.send(Message(topic, b"creates the topic"))  # the consumer has a route at once
    r = Replier(cluster, topic)
    async with r.producer, r.consumer:
        await wait_until(lambda: r.answered, 20, "the replier to be consuming")  # it answered that one
        yield topic, r


async def test_request_returns_the_reply_sent_for_it(cluster: Cluster, replier: tuple[str, Replier]) -> None:
    topic, r = replier
    async with Producer(unique("P"), cluster.ns, **FAST) as requester:
        request = Message(topic, b"ping")
        started = time.time() * 1000
        reply = await requester.request(request, timeout_ms=15_000)
        client_id = requester._check_running().client_id
        assert reply.body == b"re:ping" and reply.topic == REPLY_TOPIC
        props = reply.properties
        assert props[c.PROPERTY_MESSAGE_TYPE] == "reply"
        assert props[c.PROPERTY_CORRELATION_ID] == request.properties[c.PROPERTY_CORRELATION_ID]
        assert props[c.PROPERTY_MESSAGE_REPLY_TO_CLIENT] == client_id
        assert props[c.PROPERTY_MESSAGE_TTL] == "15000"
        assert started <= int(props[c.PROPERTY_PUSH_REPLY_TIME]) <= int(props[c.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME])
        # What the replier received: the request with its correlation properties.
        (seen,) = [m for m in r.answered if m.body == b"ping"]
        assert seen.properties[c.PROPERTY_CORRELATION_ID] == props[c.PROPERTY_CORRELATION_ID]
        assert seen.properties[c.PROPERTY_MESSAGE_REPLY_TO_CLIENT] == client_id
        assert len(requester._check_running().requests) == 0  # settled and forgotten


async def test_concurrent_async_requests_each_get_their_own_reply(
    cluster: Cluster, replier: tuple[str, Replier]
) -> None:
    topic, _ = replier
    called: list[tuple[MessageExt | None, BaseException | None]] = []
    async with Producer(unique("P"), cluster.ns, **FAST) as requester:
        futures = [
            await requester.request_async(
                Message(topic, b"q%d" % i), lambda reply, exc: called.append((reply, exc)), timeout_ms=15_000
            )
            for i in range(20)
        ]
        replies = await asyncio.gather(*futures)
    assert [m.body for m in replies] == [b"re:q%d" % i for i in range(20)]
    await wait_until(lambda: len(called) == 20, 5, "20 callbacks")
    assert sorted(reply.body for reply, exc in called if reply is not None and exc is None) == sorted(
        m.body for m in replies
    )


async def test_the_blocking_facade_requests_and_replies(cluster: Cluster, replier: tuple[str, Replier]) -> None:
    topic, _ = replier

    def run() -> tuple[bytes, bytes]:
        with SyncProducer(unique("P"), cluster.ns, **FAST) as requester:
            reply = requester.request(Message(topic, b"sync"), 15_000)
            later = requester.request_async(Message(topic, b"sync-async"), timeout_ms=15_000)
            return reply.body, later.result(20).body

    assert await asyncio.to_thread(run) == (b"re:sync", b"re:sync-async")


async def test_a_request_nobody_answers_times_out_clearly(cluster: Cluster) -> None:
    topic = unique("T_unanswered")
    errors: list[BaseException | None] = []
    async with Producer(unique("P"), cluster.ns, **FAST) as requester:
        started = time.monotonic()
        with pytest.raises(ReplyTimeoutError, match=rf"send request message to <{topic}> OK, but wait reply message "
                                                    r"timeout, 800 ms\."):
            await requester.request(Message(topic, b"anyone?"), timeout_ms=800)
        assert 0.7 <= time.monotonic() - started < 5
        fut = await requester.request_async(Message(topic, b"anyone?"), lambda r, e: errors.append(e), timeout_ms=300)
        with pytest.raises(ReplyTimeoutError):
            await fut
        await wait_until(lambda: errors, 5, "the callback")
        assert isinstance(errors[0], ReplyTimeoutError)
        assert len(requester._check_running().requests) == 0  # expired entries are gone


async def test_a_reply_to_a_requester_that_left_is_refused_and_stored(cluster: Cluster) -> None:
    topic = unique("T_gone")
    async with Producer(unique("P"), cluster.ns, **FAST) as requester:
        fut = await requester.request_async(Message(topic, b"bye"), timeout_ms=200)
        with pytest.raises(ReplyTimeoutError):
            await fut
        client_id = requester._check_running().client_id
    await wait_cluster_caught_up(cluster.ns)  # the ConsumeQueue trails the request's send answer
    # The request as a consumer would have received it (the broker adds CLUSTER).
    async with PullConsumer(unique("G"), cluster.ns, **FAST) as puller:
        (mq,) = [q for q in await puller.fetch_message_queues(topic) if await puller.max_offset(q) > 0]
        (request,) = (await puller.pull(mq, "*", 0, 32)).messages
    assert request.properties[c.PROPERTY_CLUSTER] == "DefaultCluster"
    async with Producer(unique("Replier"), cluster.ns, **FAST) as replier:
        with pytest.raises(SystemError_, match=rf"push reply message fail, channel of <{client_id}> not found\."):
            await replier.reply(request, b"too late")
    # storeReplyMessageEnable (the default): stored in the reply topic anyway, as sent.
    reply = create_reply_message(request, b"too late")
    async with PullConsumer(unique("G"), cluster.ns, **FAST) as puller:
        (mq,) = await puller.fetch_message_queues(REPLY_TOPIC)  # one queue on each broker
        found: list[MessageExt] = []

        async def pulled() -> bool:
            result = await puller.pull(mq, "*", 0, 256)
            found[:] = result.messages if result.status is PullStatus.FOUND else []
            return any(m.body == b"too late" for m in found)

        await wait_until(pulled, 10, "the reply stored in the reply topic")
    stored = [m for m in found if m.body == b"too late"]
    assert stored and all(m.properties[c.PROPERTY_CORRELATION_ID] == reply.properties[c.PROPERTY_CORRELATION_ID]
                          and c.PROPERTY_CLUSTER not in m.properties for m in stored)
