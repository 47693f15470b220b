"""Request-reply's pure parts: the request's and the reply's properties, the pushed reply's
decoding, and the table of requests waiting for their reply."""

from __future__ import annotations

import asyncio
import uuid
import zlib

import pytest

from apogee.client.producer.accumulator import batchable
from apogee.client.producer.producer import _send_code
from apogee.client.producer.sender import SEND_REPLY_V2, SEND_V2
from apogee.client.replier import create_reply_message, is_reply, reply_to_client
from apogee.client.request import RequestTable, decode_pushed_reply, prepare_request
from apogee.common import constants as c
from apogee.common.message import Message, MessageExt
from apogee.errors import ClientStateError, HeaderError, MessageValidationError, ReplyTimeoutError
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import ReplyMessageRequestHeader


def test_a_request_carries_its_correlation_id_client_and_ttl() -> None:
    msg = Message("T", b"x", properties={"a": "b"})
    correlation_id = prepare_request(msg, "10.0.0.1@7#1", 3000)
    assert uuid.UUID(correlation_id).version == 4
    assert msg.properties == {
        "a": "b", "CORRELATION_ID": correlation_id, "REPLY_TO_CLIENT": "10.0.0.1@7#1", "TTL": "3000"
    }
    assert prepare_request(Message("T", b"x"), "c", 1) != correlation_id


def test_the_reply_goes_to_the_cluster_reply_topic_with_the_request_properties() -> None:
    request = MessageExt("T", b"q", properties={
        "CLUSTER": "ClusterB", "CORRELATION_ID": "id-1", "REPLY_TO_CLIENT": "client-1", "TTL": "500",
        "KEYS": "not carried",
    })
    reply = create_reply_message(request, b"answer")
    assert (reply.topic, reply.body) == ("ClusterB_REPLY_TOPIC", b"answer")
    assert reply.properties == {"MSG_TYPE": "reply", "CORRELATION_ID": "id-1", "REPLY_TO_CLIENT": "client-1",
                                "TTL": "500"}
    assert is_reply(reply) and not is_reply(request) and reply_to_client(request) == "client-1"
    with pytest.raises(MessageValidationError, match=r"property\[CLUSTER\] is null"):
        create_reply_message(Message("T", b"q"), b"answer")


def test_a_reply_is_sent_as_send_reply_message_v2_and_never_batched() -> None:
    reply = create_reply_message(Message("T", b"q", properties={"CLUSTER": "C"}), b"a")
    assert _send_code(reply) == SEND_REPLY_V2 == RequestCode.SEND_REPLY_MESSAGE_V2
    assert _send_code(Message("T", b"q")) == SEND_V2
    assert not batchable(reply, 4096) and batchable(Message("T", b"q"), 4096)


def _push(body: bytes, sys_flag: int = 0, **changed: object) -> RemotingCommand:
    header = ReplyMessageRequestHeader(
        producer_group="PG", topic="C_REPLY_TOPIC", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=sys_flag, born_timestamp=111, flag=3, born_host="10.0.0.2:5555",
        store_host="10.0.0.1:10911", store_timestamp=222,
        properties="CORRELATION_ID\x01id-1\x02UNIQ_KEY\x01U1\x02PUSH_REPLY_TIME\x01220", reconsume_times=1,
        unit_mode=False,
    ).encode()
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, {**header, **changed}, body)


def test_a_pushed_reply_decodes_as_the_java_client_decodes_it() -> None:
    msg = decode_pushed_reply(_push(zlib.compress(b"big answer"), c.COMPRESSED_FLAG), 333)
    assert (msg.topic, msg.body, msg.flag, msg.queue_id) == ("C_REPLY_TOPIC", b"big answer", 3, 0)
    assert (msg.born_host, msg.store_host) == (("10.0.0.2", 5555), ("10.0.0.1", 10911))
    assert (msg.born_timestamp, msg.store_timestamp, msg.reconsume_times, msg.msg_id) == (111, 222, 1, "U1")
    assert msg.properties["ARRIVE_TIME"] == "333" and msg.properties["CORRELATION_ID"] == "id-1"
    with pytest.raises(HeaderError, match="storeHost"):
        decode_pushed_reply(_push(b"x", storeHost=None), 1)
    with pytest.raises(ValueError, match="host:port"):
        decode_pushed_reply(_push(b"x", bornHost="nowhere"), 1)


async def test_the_table_hands_each_reply_to_its_request_and_forgets_it() -> None:
    table = RequestTable()
    first = table.add("a", "T", 5000, 5)
    second = table.add("b", "T", 5000, 5)
    reply = MessageExt("R", b"r")
    assert table.complete("a", reply) and await first is reply
    assert not table.complete("a", reply)  # settled: a second reply finds nobody
    assert not table.complete("unknown", reply)
    table.fail("b", ConnectionError("send failed"))
    with pytest.raises(ConnectionError):
        await second
    assert len(table) == 0


async def test_a_request_without_reply_expires_at_its_deadline() -> None:
    table = RequestTable()
    fut = table.add("a", "Topic", 40, 0.04)
    with pytest.raises(ReplyTimeoutError, match=r"send request message to <Topic> OK, but wait reply message "
                                                r"timeout, 40 ms\."):
        await fut
    assert len(table) == 0
    cancelled = table.add("b", "Topic", 5000, 5)
    cancelled.cancel()  # the caller gave up
    await asyncio.sleep(0)
    assert len(table) == 0
    left = table.add("c", "Topic", 5000, 5)
    table.fail_all("shut down")
    with pytest.raises(ClientStateError, match="shut down"):
        await left
