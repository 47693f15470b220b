"""Messages (mqadmin queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
queryMsgTraceById, printMsg, printMsgByQueue, consumeMessage, sendMessage, queryCq,
sendMsgStatus, checkMsgSendRT, clusterRT) on RocketMQ's wire: 33, 12, 11 with the
``TOOLS_CONSUMER`` group, 29-31, 321, sends through Apogee's producer (310), and the relayed
CONSUME_MESSAGE_DIRECTLY (309)."""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from apogee.admin.base import Tick, load_object
from apogee.admin.topics import TopicAdmin
from apogee.client.consumer.subscription import build_subscription
from apogee.client.producer import Producer
from apogee.client.trace import TRACE_TOPIC, MessageTrace, collect_trace
from apogee.client.types import PullStatus, SendResult
from apogee.common import constants as c
from apogee.common.message import Message, MessageExt, MessageQueue
from apogee.common.message_codec import decode_records
from apogee.common.message_id import decode_offset_msg_id
from apogee.errors import ApogeeError, ClientError, RemoteError
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.headers.consumer import QueryMessageRequestHeader
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, PullMessageRequestHeader

TRACE_QUERY_MAX = 64
RANGE_QUERY_MAX = 2000  # messages a time-range search keeps (the newest), as RocketMQ Dashboard's
PULL_BATCH = 32  # what mqadmin's printMsg pulls at a time
TOOLS_PRODUCER_GROUP = "PID_SMSC"  # mqadmin's sendMsgStatus / checkMsgSendRT group


# Properties a send or the broker sets anew: not copied when a message is sent again.
_SET_BY_SEND = frozenset((
    c.UNIQ_KEY, c.PROPERTY_MSG_REGION, c.PROPERTY_TRACE_SWITCH, c.PROPERTY_MIN_OFFSET, c.PROPERTY_MAX_OFFSET,
    c.PROPERTY_CLUSTER, c.PROPERTY_CONSUME_START_TIMESTAMP,
))

# Properties of the way to the DLQ (a delay, the retry topic it waited in, the consumer's own
# limits): a dead letter sent to its retry topic again leaves them behind, so it is delivered
# at once and retried under its group's current settings.
_SET_BY_RETRY = frozenset((c.DELAY, c.REAL_TOPIC, c.REAL_QID, c.RECONSUME_TIME, c.MAX_RECONSUME_TIMES))


class InvalidIdError(ClientError, ValueError):
    """The text given as a message id is not one."""


@dataclass
class FoundMessage:
    message: MessageExt
    broker_name: str


@dataclass
class SendProbe:
    """One message of a send-latency probe (sendMsgStatus, checkMsgSendRT, clusterRT)."""

    queue: MessageQueue | None
    ok: bool
    rt_ms: float
    result: str


class MessageAdmin(TopicAdmin):
    # --- lookups ------------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """By offset message id (store host + CommitLog offset): straight to that broker (33)."""
        ip, port, offset = decode_offset_msg_id(offset_msg_id)
        if not 0 < port < 65536 or offset < 0:
            raise ValueError(f"port {port} or offset {offset} is impossible")
        resp = await self.call_broker(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        (msg,) = decode_records(resp.body_bytes())
        return msg

    async def query_by_key(
        self, topic: str, key: str, *, begin_ms: int = 0, end_ms: int = 2**62, max_num: int = 32, unique: bool = False
    ) -> list[FoundMessage]:
        """Messages of ``topic`` whose KEYS (or, with ``unique``, UNIQ_KEY) hold ``key`` and
        that were stored within [begin_ms, end_ms]; every broker is asked (12), newest first."""
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms).encode()
        if unique:
            header["_UNIQUE_KEY_QUERY"] = "true"

        async def one(name: str, addr: str) -> list[FoundMessage]:
            resp = await self.call_broker(addr, RequestCode.QUERY_MESSAGE, header,
                                          ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            return [FoundMessage(m, name) for m in decode_records(resp.body_bytes())]

        masters = await self.readers(topic)
        found = [m for part in await asyncio.gather(*(one(n, a) for n, a in masters.items())) for m in part]
        found = [f for f in found if begin_ms <= f.message.store_timestamp <= end_ms]
        found.sort(key=lambda f: f.message.store_timestamp, reverse=True)
        return found[:max_num]

    async def query_by_id(self, msg_id: str, topic: str | None = None) -> list[FoundMessage]:
        """A client unique id (UNIQ_KEY; needs ``topic``) or an offset message id.

        Both are 32 hex digits, so with a topic the unique id is tried first (it is what
        consumers and send results show) and the offset id second."""
        if topic is not None:
            found = await self.query_by_key(topic, msg_id, unique=True)
            if found:
                return found
        try:
            return [FoundMessage(await self.view_message(msg_id), "")]
        except ValueError as exc:
            raise InvalidIdError(
                f"{msg_id!r} is not an offset message id ({exc}); give -t TOPIC for a unique id"
            ) from None
        except RemoteError:
            if topic is not None:
                return []
            raise

    async def message_trace(self, msg_id: str, trace_topic: str = TRACE_TOPIC) -> MessageTrace:
        """What the trace topic holds about ``msg_id`` (mqadmin's queryMsgTraceById): the trace
        messages whose KEYS hold the id (64 at most, as mqadmin asks), their records of it."""
        now_ms = int(time.time() * 1000)
        found = await self.query_by_key(trace_topic, msg_id, end_ms=now_ms, max_num=TRACE_QUERY_MAX)
        return collect_trace(msg_id, ((f.message.body, f.message.born_host[0]) for f in found))

    # --- reading queues -----------------------------------------------------------------------

    async def _pull(self, addr: str, mq: MessageQueue, offset: int, expression: str, group: str,
                    max_nums: int = PULL_BATCH) -> tuple[PullStatus, int, list[MessageExt]]:
        sub = build_subscription(mq.topic, expression, 0)
        header = PullMessageRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
            subscription=expression,
        )
        result = await self.instance.api.pull(addr, header, self.timeout_ms, sub.tags)
        return result.status, result.next_begin_offset, result.messages

    async def message_at(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt | None:
        """The message at a queue offset (mqadmin queryMsgByOffset: one PULL_MESSAGE)."""
        masters = await self.readers(topic)
        if broker_name not in masters:
            raise ClientError(f"broker {broker_name!r} does not serve topic {topic!r} "
                              f"(its brokers: {', '.join(sorted(masters))})")
        try:
            _, _, messages = await self._pull(masters[broker_name], MessageQueue(topic, broker_name, queue_id),
                                              offset, "*", c.TOOLS_CONSUMER_GROUP, 1)
        except RemoteError:
            return None
        return messages[0] if messages and messages[0].queue_offset == offset else None

    async def queue_bounds(self, addr: str, mq: MessageQueue, begin_ms: int | None = None,
                           end_ms: int | None = None) -> tuple[int, int]:
        """[min, max) offsets of a queue (31, 30), narrowed to stored times with 29."""
        api = self.instance.api
        low = await api.get_min_offset(addr, mq.topic, mq.queue_id)
        high = await api.get_max_offset(addr, mq.topic, mq.queue_id)
        if begin_ms is not None:
            low = await api.search_offset(addr, mq.topic, mq.queue_id, begin_ms)
        if end_ms is not None:
            high = await api.search_offset(addr, mq.topic, mq.queue_id, end_ms)
        return low, high

    async def read_queue(self, mq: MessageQueue, low: int, high: int, *, expression: str = "*",
                         group: str = c.TOOLS_CONSUMER_GROUP, limit: int | None = None) -> AsyncIterator[MessageExt]:
        """The messages of ``mq`` in [low, high) that match ``expression``, in order."""
        addr = (await self.readers(mq.topic)).get(mq.broker_name)
        if addr is None:
            raise ClientError(f"broker {mq.broker_name!r} does not serve topic {mq.topic!r}")
        offset, count = low, 0
        while offset < high and (limit is None or count < limit):
            status, nxt, messages = await self._pull(addr, mq, offset, expression, group)
            for m in messages:
                if m.queue_offset >= high or (limit is not None and count >= limit):
                    return
                count += 1
                yield m
            if status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL) or nxt <= offset:
                return
            offset = nxt

    async def messages_in_range(self, topic: str, begin_ms: int, end_ms: int, *, limit: int = RANGE_QUERY_MAX,
                                tick: Tick | None = None) -> tuple[list[FoundMessage], int]:
        """The messages of ``topic`` stored within [begin_ms, end_ms], newest first, at most
        ``limit`` of them (the newest), and how many matched in all (RocketMQ Dashboard's
        query by topic and time: each queue searched by time (29) and read (11)).  ``tick``
        counts queue entries read of those the range spans."""
        spans = []
        for mq, addr in sorted((await self.topic_queues(topic)).items(), key=lambda kv: (kv[0].broker_name,
                                                                                            kv[0].queue_id)):
            low, high = await self.queue_bounds(addr, mq, begin_ms)
            # searchOffset answers the entry nearest the time: the one after it may still be in range
            last = await self.instance.api.search_offset(addr, mq.topic, mq.queue_id, end_ms)
            spans.append((mq, low, min(high, last + 1)))
        total = sum(max(0, high - low) for _, low, high in spans)
        newest: list[tuple[int, int, FoundMessage]] = []  # a min-heap of the newest ``limit``
        matched = read = 0
        for mq, low, high in spans:
            async for m in self.read_queue(mq, low, high):
                read += 1
                if begin_ms <= m.store_timestamp <= end_ms:
                    matched += 1
                    item = (m.store_timestamp, matched, FoundMessage(m, mq.broker_name))
                    if len(newest) < limit:
                        heapq.heappush(newest, item)
                    elif item[:2] > newest[0][:2]:
                        heapq.heapreplace(newest, item)
                if tick and read % PULL_BATCH == 0:
                    tick(read, total)
        if tick:
            tick(total, total)
        return [f for _, _, f in sorted(newest, key=lambda i: i[:2], reverse=True)], matched

    async def topic_queues(self, topic: str) -> dict[MessageQueue, str]:
        """Every readable queue of ``topic`` -> its master's address."""
        route = await self.route(topic)
        masters = await self.readers(topic)
        return {
            MessageQueue(topic, qd.broker_name, i): masters[qd.broker_name]
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if qd.broker_name in masters and c.is_readable(qd.perm)
            for i in range(qd.read_queue_nums)
        }

    async def query_consume_queue(self, topic: str, queue_id: int, index: int, count: int = 10,
                                  broker_addr: str | None = None, group: str | None = None) -> dict[str, Any]:
        """QUERY_CONSUME_QUEUE (321): ConsumeQueue entries from ``index`` (mqadmin queryCq)."""
        addr = broker_addr or sorted((await self.readers(topic)).values())[0]
        ext = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
        if group:
            ext["consumerGroup"] = group
        return load_object((await self.call_broker(addr, RequestCode.QUERY_CONSUME_QUEUE, ext)).body_bytes())

    # --- sending ------------------------------------------------------------------------------

    def producer(self) -> Producer:
        cfg = self.config  # the admin's credentials sign the producer's requests too
        return Producer(
            TOOLS_PRODUCER_GROUP, cfg.namesrv_addr,
            access_key=cfg.access_key, secret_key=cfg.secret_key, security_token=cfg.security_token,
        )

    async def send_message(self, topic: str, body: bytes, *, keys: str | None = None, tags: str | None = None,
                           broker_name: str | None = None, queue_id: int | None = None) -> SendResult:
        """mqadmin sendMessage: one message, to a chosen queue when a broker (and queue) is named."""
        queues = await self.writable_queues(topic)
        msg = Message(topic, body)
        if tags:
            msg.tags = tags
        if keys:
            msg.keys = keys
        queue = None
        if broker_name is not None:
            mine = [q for q in queues if q.broker_name == broker_name]
            if not mine:
                raise ClientError(f"broker {broker_name!r} has no writable queue of topic {topic!r}")
            queue = next((q for q in mine if q.queue_id == queue_id), None) if queue_id is not None else mine[0]
            if queue is None:
                raise ClientError(f"queue {queue_id} of {topic!r} on {broker_name} is not writable")
        async with self.producer() as producer:
            return await producer.send(msg, queue=queue)

    async def resend(self, offset_msg_id: str) -> SendResult:
        """mqadmin queryMsgById -s: send the stored message again (topic, body, tags, keys and
        user properties) as a new message."""
        old = await self.view_message(offset_msg_id)
        props = {k: v for k, v in old.properties.items() if k not in _SET_BY_SEND}
        async with self.producer() as producer:
            return await producer.send(Message(old.topic, old.body, properties=props))

    async def resend_to_retry(self, group: str, offset_msg_id: str) -> SendResult:
        """A dead letter of ``group`` (a message of ``%DLQ%<group>``) sent as a new message to
        the group's retry topic ``%RETRY%<group>``, where the group's consumers take it at
        once: body, tags, keys and properties kept (``RETRY_TOPIC`` names the topic it was
        first sent to, which the consumer shows again), the delay and limits of its way to the
        DLQ left behind (``_SET_BY_RETRY``)."""
        old = await self.view_message(offset_msg_id)
        if old.topic != c.dlq_topic(group):
            raise ClientError(f"message {offset_msg_id} is in topic {old.topic!r}, not in {c.dlq_topic(group)!r}")
        props = {k: v for k, v in old.properties.items() if k not in _SET_BY_SEND and k not in _SET_BY_RETRY}
        async with self.producer() as producer:
            return await producer.send(Message(c.retry_topic(group), old.body, properties=props))

    async def probe_sends(self, topic: str, count: int, size: int, *, broker_name: str | None = None,
                          tick: Tick | None = None) -> list[SendProbe]:
        """Send ``count`` messages of ``size`` bytes, one at a time, timing each (mqadmin
        sendMsgStatus, checkMsgSendRT, clusterRT); a failed send is a row, not an error."""
        body = b"x" * size
        out = []
        async with self.producer() as producer:
            queues: list[MessageQueue] = []
            if broker_name is not None:
                queues = [q for q in await self.writable_queues(topic) if q.broker_name == broker_name]
            for i in range(count):
                queue = queues[i % len(queues)] if queues else None
                began = time.perf_counter()
                try:
                    result = await producer.send(Message(topic, body), queue=queue)
                    out.append(SendProbe(result.message_queue, True, (time.perf_counter() - began) * 1000,
                                         result.status.name))
                except ApogeeError as exc:
                    out.append(SendProbe(queue, False, (time.perf_counter() - began) * 1000, str(exc)))
                if tick:
                    tick(i + 1, count)
        return out

    async def consume_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY (309): the broker that stored the message hands it to the
        client ``client_id`` of ``group``, which consumes it and reports
        ConsumeMessageDirectlyResult.  ``msg_id`` is an offset id, or a unique id with ``topic``."""
        found = await self.query_by_id(msg_id, topic)
        if not found:
            raise ClientError(f"no message {msg_id} in {topic!r}")
        msg = found[0].message
        addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
        ext = {"consumerGroup": group, "clientId": client_id, "msgId": msg.offset_msg_id}
        if found[0].broker_name:
            ext["brokerName"] = found[0].broker_name
        resp = await self.call_broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        return load_object(resp.body_bytes())
