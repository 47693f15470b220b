"""Hand-built RocketMQ requests for broker integration tests (no client library involved).

These build the exact frames a RocketMQ client sends, so broker tests check the protocol
itself; the native client has tests of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator

import orjson

from apogee.common.message import MessageExt
from apogee.common.message_codec import decode_records, properties_to_string
from apogee.remoting.bodies.route import decode_cluster_info
from apogee.remoting.client import RemotingClient
from apogee.remoting.codec import FrameDecoder
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, FLAG_SUSPEND, PullMessageRequestHeader
from apogee.remoting.headers.send import SendMessageRequestHeaderV2
from tests.support.waiting import wait_until


def send_request(
    topic: str,
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    delay_level: int = 0,
    props: dict[str, str] | None = None,
    group: str = "test-producer",
    reconsume_times: int = 0,
) -> RemotingCommand:
    properties = dict(props or {})
    if tags:
        properties["TAGS"] = tags
    if keys:
        properties["KEYS"] = keys
    if delay_level:
        properties["DELAY"] = str(delay_level)
    properties.setdefault("WAIT", "true")
    header = SendMessageRequestHeaderV2(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(properties), reconsume_times=reconsume_times,
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.encode(), body)


def pull_request(
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str = "test-consumer",
    max_msgs: int = 32,
    suspend_ms: int = 0,
    subscription: str = "*",
    expression_type: str | None = None,
) -> RemotingCommand:
    flags = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_msgs, sys_flag=flags, commit_offset=0, suspend_timeout_millis=suspend_ms,
        sub_version=0, subscription=subscription, expression_type=expression_type,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.encode())


async def pull_all(client: RemotingClient, addr: str, topic: str, queues: int = 4, **kw: object) -> list[MessageExt]:
    """Every message of ``topic`` the broker acknowledged before this call.  A send is answered
    once it is in the CommitLog and dispatch makes it visible just after (a new queue's first
    message waits for its ConsumeQueue file, on the I/O thread): so first wait until the broker
    has dispatched everything it stored (``wait_caught_up``), then pull each queue to its end."""
    await wait_caught_up(addr)
    kw.setdefault("suspend_ms", 300)
    messages: list[MessageExt] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            resp = await client.invoke(addr, pull_request(topic, queue_id, offset, **kw), 5000)  # type: ignore[arg-type]
            if resp.code != 0:
                break
            messages += decode_records(resp.body_bytes())
            offset = int((resp.ext_fields or {})["nextBeginOffset"])
    return messages


async def wait_dispatched(
    client: RemotingClient, addr: str, topic: str, queue_id: int, count: int, timeout_s: float = 5
) -> None:
    """Wait until the queue's max offset reaches ``count`` (the dispatcher has caught up)."""

    async def reached() -> bool:
        req = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        resp = await client.invoke(addr, req, 5000)
        return resp.code == 0 and int((resp.ext_fields or {}).get("offset", "0")) >= count

    await wait_until(reached, timeout_s, f"{topic}:{queue_id} to reach offset {count}", interval_s=0.01)


async def wait_caught_up(addr: str, timeout_s: float = 10) -> None:
    """Wait until the broker has dispatched everything it stored (queues and key index),
    so a pull or a query sees every message acknowledged before this call."""

    async def caught_up(client: RemotingClient) -> bool:
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
        return resp.code == 0 and orjson.loads(resp.body_bytes())["table"]["dispatchBehindBytes"] == "0"

    async with _client() as client:
        await wait_until(lambda: caught_up(client), timeout_s, f"{addr} to dispatch what it stored", interval_s=0.01)


async def wait_cluster_caught_up(namesrv_addr: str, timeout_s: float = 10) -> None:
    """``wait_caught_up`` for every broker the NameServer knows: a broker acknowledges a send
    once it is in the CommitLog and makes it readable just after, so a test that reads back
    what it sent waits for this first."""
    async with _client() as client:
        req = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        brokers, _ = decode_cluster_info((await client.invoke(namesrv_addr, req, 5000)).body_bytes())
    for broker in brokers.values():
        for addr in broker.broker_addrs.values():
            await wait_caught_up(addr, timeout_s)


HALF_TOPIC, TRANS_GROUP = "RMQ_SYS_TRANS_HALF_TOPIC", "CID_RMQ_SYS_TRANS"


async def wait_checked_past(addr: str, timeout_s: float = 15, *, half_offset: int = -1) -> None:
    """Wait until the broker's transaction check has passed every half message stored before
    this call (and the one at ``half_offset`` of the half queue: a half just acknowledged may
    not be in the queue's max offset yet).  RocketMQ keeps the check's progress as the offset
    of the internal group CID_RMQ_SYS_TRANS in RMQ_SYS_TRANS_HALF_TOPIC queue 0, and a pass
    stops at the first half it cannot settle: once the progress reaches today's end, every
    earlier half was found decided (or checked back and re-queued), so a decided one can
    produce nothing more."""
    head = {"topic": HALF_TOPIC, "queueId": "0"}

    async def passed(client: RemotingClient, end: int) -> bool:
        query = {"consumerGroup": TRANS_GROUP, **head}
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, query), 5000)
        return resp.code == 0 and int((resp.ext_fields or {}).get("offset", "-1")) >= end

    async with _client() as client:
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, head), 5000)
        end = max(int((resp.ext_fields or {}).get("offset", "0")) if resp.code == 0 else 0, half_offset + 1)
        what = f"the transaction check to pass half offset {end}"
        await wait_until(lambda: passed(client, end), timeout_s, what, interval_s=0.05)


@contextlib.asynccontextmanager
async def _client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    try:
        yield client
    finally:
        await client.close()


def raw_frame(code: int, ext_fields: dict[str, object], body: bytes = b"") -> bytes:
    """A request frame written by hand, header JSON and all, as a hostile client would: no
    codec of ours decides what is representable (values go out exactly as given)."""
    head = orjson.dumps({"code": code, "extFields": ext_fields})
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


async def exchange_raw(addr: str, frame: bytes, timeout_s: float = 5.0) -> RemotingCommand:
    """Send ``frame`` on a connection of its own and return the first frame answered."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(frame)
        decoder = FrameDecoder()
        async with asyncio.timeout(timeout_s):
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError(f"{addr} closed the connection without an answer")
                answers = decoder.feed(data)
                if answers:
                    return answers[0]
    finally:
        writer.close()
