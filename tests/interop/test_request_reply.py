"""Request-reply (RIP-16) with the Apache RocketMQ C++ client (rocketmq==0.4.4, librocketmq
1.2.3) where it can take part.

librocketmq 1.2.3 predates RIP-16: it has no request call, does not serve
PUSH_REPLY_MESSAGE_TO_CLIENT, and sends a message marked MSG_TYPE=reply as an ordinary
SEND_MESSAGE_V2 (stored, never pushed), so it can neither request nor reply.  What it can do
is consume requests: it sees their correlation properties, from which any client builds the
reply (here Apogee's ``Producer.reply``, as a Java replier would with
``MessageUtil.createReplyMessage``)."""

from __future__ import annotations

import asyncio

import pytest

from apogee.client import Message, MessageExt, Producer
from apogee.common import constants as c
from tests.interop.conftest import Cluster, cpp, received, unique

pytestmark = [pytest.mark.interop, pytest.mark.slow]

FAST = {"poll_name_server_interval_ms": 1000, "heartbeat_broker_interval_ms": 1000}


async def test_a_request_consumed_by_the_cpp_client_is_answered_from_what_it_sees(cluster: Cluster) -> None:
    topic = unique("X_request")
    await asyncio.to_thread(cluster.create_topic, topic)
    async with Producer(unique("Requester"), cluster.namesrv.addr, **FAST) as requester:
        pending = await requester.request_async(Message(topic, b"question"), timeout_ms=60_000)
        events = await asyncio.to_thread(
            cpp("consume", cluster.namesrv.addr, topic, unique("CppG"), "--expect", 1).wait
        )
        (seen,) = received(events)
        props = seen["props"]
        assert seen["body"] == "question"
        assert props["REPLY_TO_CLIENT"] == requester._check_running().client_id
        assert props["TTL"] == "60000" and props["CLUSTER"] == "DefaultCluster" and props["CORRELATION_ID"]
        # The request as the C++ consumer reported it: enough to reply.
        request = MessageExt(topic, seen["body"].encode(), properties=props)
        async with Producer(unique("Replier"), cluster.namesrv.addr, **FAST) as replier:
            await replier.reply(request, b"answer")
        reply = await pending
    assert reply.body == b"answer" and reply.topic == "DefaultCluster_REPLY_TOPIC"
    assert reply.properties[c.PROPERTY_CORRELATION_ID] == props["CORRELATION_ID"]
