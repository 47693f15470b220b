"""The producer: sync, async (awaitable or callback), oneway and batch sends.

Send path (the seeds' sendDefaultImpl): validate the message locally, find the topic's publish
info (the route, fetched on first use; an unknown topic borrows TBW102's route so the broker
auto-creates it), pick a queue (round robin, an explicit queue, or a selector for ordered
messages; latency fault tolerance when enabled), prepare the body (UNIQ_KEY, zlib above
``compress_msg_body_over_howmuch``), send, and on failure retry on another broker.

``send_async`` is bounded: at most ``max_inflight_messages`` await their result, and the
call itself waits (backpressure) instead of queueing without limit.  With ``auto_batch``,
messages to the same topic sent asynchronously are coalesced into SEND_BATCH_MESSAGE requests
(one frame and one broker round trip for up to ``batch_max_messages``), each message still
getting its own result.  ``flush()`` and ``shutdown()`` wait until every message has its
result.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apogee.broker.topics import NOT_ALLOWED_SEND_TOPICS, validate_topic
from apogee.client.api import parse_send_response, send_response_fields, send_result, send_results
from apogee.client.config import ProducerConfig
from apogee.client.fault import FaultStrategy
from apogee.client.instance import ClientInstance, TopicPublishInfo
from apogee.client.selectors import MessageQueueSelector
from apogee.client.types import SendResult, SendStatus
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.aio import within
from apogee.common.message import Message, MessageQueue
from apogee.common.message_codec import encode_batch, encode_batch_item, properties_to_string
from apogee.common.message_id import UniqIdGenerator
from apogee.errors import (
    ApogeeError,
    ClientStateError,
    ConnectionClosedError,
    MessageValidationError,
    RemoteError,
    RequestTimeoutError,
)
from apogee.remoting.codec import request_command
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import SendMessageRequestHeaderV2

log = logging.getLogger("apogee.client.producer")

# Response codes after which RocketMQ producers try again (elsewhere); SYSTEM_BUSY added.
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
# Wire keys of SendMessageRequestHeaderV2 ("a".."m"), taken from the header class itself, in
# the order of the values ``Producer._fields`` gives.
_V2_KEYS = {attr: key for attr, key, _kind, _required in SendMessageRequestHeaderV2._fields()}
_SEND_KEYS = tuple(
    _V2_KEYS[attr]
    for attr in (
        "producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id", "sys_flag",
        "born_timestamp", "flag", "properties", "reconsume_times", "max_reconsume_times", "batch",
    )
)
BATCH_ITEM_OVERHEAD = 22  # TOTALSIZE, MAGIC, CRC, FLAG, BODYLEN (4 each) + PROPLEN (2)

SendCallback = Callable[[SendResult | None, BaseException | None], Any]


@dataclass(slots=True)
class SendContext:
    """What send hooks see: before the send (no result yet) and after it."""

    group: str
    message: Message
    mode: str  # "SYNC", "ASYNC", "ONEWAY" or "BATCH"
    queue: MessageQueue | None = None
    broker_addr: str = ""
    result: SendResult | None = None
    exception: BaseException | None = None
    elapsed_ms: float = 0.0


class SendHook(Protocol):
    """Called around every send (RocketMQ's SendMessageHook); must not block."""

    def before_send(self, ctx: SendContext) -> None: ...
    def after_send(self, ctx: SendContext) -> None: ...


def validate_message(msg: Message, max_message_size: int) -> None:
    """RocketMQ's Validators.checkMessage, with the reason in the error."""
    if not isinstance(msg, Message):
        raise MessageValidationError(f"expected a Message, got {type(msg).__name__}")
    check_topic(msg.topic)
    body = msg.body
    if not isinstance(body, (bytes, bytearray)):
        raise MessageValidationError(f"the message body must be bytes, not {type(body).__name__}")
    if not body:
        raise MessageValidationError("the message body is empty")
    if len(body) > max_message_size:
        raise MessageValidationError(
            f"the message body is {len(body)} bytes, more than max_message_size {max_message_size}"
        )
    for key, value in msg.properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise MessageValidationError(f"property {key!r}={value!r}: names and values must be str")
        if not key or "\x01" in key or "\x02" in key or "\x01" in value or "\x02" in value:
            raise MessageValidationError(f"property {key!r} has an empty name or a \\x01/\\x02 character")
    level = msg.delay_time_level
    if level < 0:
        raise MessageValidationError(f"delay level {level} is negative")


_valid_topics: set[str] = set()
_batchable_topics: set[str] = set()  # valid and not a retry topic: send_async may batch them
_DELAY = c.DELAY
_TRAN = c.TRAN_MSG
_UNIQ = c.UNIQ_KEY
_RETRY_PREFIX = c.RETRY_GROUP_TOPIC_PREFIX


def check_topic(topic: str) -> None:
    if topic in _valid_topics:
        return
    if not isinstance(topic, str):
        raise MessageValidationError(f"the topic must be a str, not {type(topic).__name__}")
    problem = validate_topic(topic)
    if problem is not None:
        raise MessageValidationError(problem)
    if topic == c.TBW102:
        raise MessageValidationError(f"the topic {topic} is reserved for auto-creating topics")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MessageValidationError(f"sending to the system topic {topic} is not allowed")
    if len(_valid_topics) < 10_000:
        _valid_topics.add(topic)
        if not topic.startswith(_RETRY_PREFIX):
            _batchable_topics.add(topic)


def split_batch(sizes: Sequence[int], max_bytes: int) -> list[range]:
    """Split items of ``sizes`` (encoded bytes each) into consecutive runs of at most
    ``max_bytes``; an item larger than ``max_bytes`` travels alone."""
    runs: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > max_bytes:
            runs.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        runs.append(range(start, len(sizes)))
    return runs


class _Batch:
    """Messages waiting to leave in one SEND_BATCH_MESSAGE request."""

    __slots__ = ("topic", "queue", "body", "futures", "uniqs", "handle", "messages")

    def __init__(self, topic: str, queue: MessageQueue | None) -> None:
        self.topic = topic
        self.queue = queue
        # The batch body, encoded as messages arrive: no per-message objects wait in the batch
        # (fewer allocations for the collector to track), and flushing is one copy.
        self.body = bytearray()
        self.futures: list[asyncio.Future[SendResult]] = []
        self.uniqs: list[str] = []
        self.messages: list[Message] = []
        self.handle: asyncio.Handle | None = None


class Producer:
    """An asyncio producer.

    Use ``async with Producer("group", namesrv_addr="127.0.0.1:9876") as producer:`` or call
    ``start()`` / ``shutdown()``.  Options are the fields of ``ProducerConfig`` (given as
    keyword arguments, or as a ready ``config``).
    """

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        **options: Any,
    ) -> None:
        cfg = config or ProducerConfig()
        for key, value in options.items():
            if not hasattr(cfg, key):
                raise TypeError(f"unknown producer option {key!r}")
            setattr(cfg, key, value)
        if group is not None:
            cfg.group = group
        if namesrv_addr is not None:
            cfg.namesrv_addr = namesrv_addr
        cfg.validate()
        self.config = cfg
        self.group = cfg.group
        self._default_queue_nums_text = str(cfg.default_topic_queue_nums)
        self.fault = FaultStrategy(cfg.send_latency_fault_enable, cfg.latency_max_ms, cfg.not_available_duration_ms)
        self._instance: ClientInstance | None = None
        self._ids: UniqIdGenerator | None = None
        self._topics: set[str] = set()
        self._hooks: list[SendHook] = []
        self._running = False
        self._fast_async = False  # running with auto_batch: send_async may take its fast path
        self._fast_body_limit = min(cfg.compress_msg_body_over_howmuch, cfg.max_message_size + 1)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Backpressure: free in-flight slots and the senders waiting for one.
        self._free = cfg.max_inflight_messages
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle_waiters: list[asyncio.Future[None]] = []
        # Open batches by topic (the common case: no explicit queue), or by (topic, queue).
        self._pending: dict[str | tuple[str, MessageQueue], _Batch] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Producer:
        if self._running:
            return self
        self._loop = asyncio.get_running_loop()
        self._instance = await ClientInstance.acquire(self.config)
        try:
            self._instance.register_producer(self)
        except BaseException:
            await self._instance.release()
            raise
        self._ids = UniqIdGenerator(self._instance.config.client_ip)
        self._running = True
        self._fast_async = self.config.auto_batch
        log.info("producer %s started as %s", self.group, self._instance.client_id)
        return self

    async def shutdown(self, timeout_ms: int | None = None) -> None:
        """Send what is pending, wait for every result (up to ``timeout_ms``), unregister."""
        if not self._running:
            return
        try:
            await self.flush(timeout_ms)
        except TimeoutError:
            log.warning("producer %s shut down with %d messages still in flight", self.group, self.inflight)
        self._running = False
        self._fast_async = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._instance is not None
        await self._instance.unregister_producer(self.group)
        await self._instance.release()
        log.info("producer %s shut down", self.group)

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def inflight(self) -> int:
        """Messages sent asynchronously that have no result yet."""
        return self.config.max_inflight_messages - self._free

    def publish_topics(self) -> set[str]:
        return set(self._topics)

    def add_send_hook(self, hook: SendHook) -> None:
        self._hooks.append(hook)

    def _check_running(self) -> ClientInstance:
        if not self._running or self._instance is None:
            raise ClientStateError(f"producer {self.group} is not running: call start() first")
        return self._instance

    # --- preparation --------------------------------------------------------------------------

    def _validate(self, msg: Message) -> None:
        body = msg.body
        if (
            msg.topic not in _valid_topics
            or type(body) is not bytes
            or not body
            or len(body) > self.config.max_message_size
            or msg.delay_time_level < 0
        ):
            validate_message(msg, self.config.max_message_size)

    @staticmethod
    def _properties(msg: Message) -> str:
        """The properties string; a name or value holding a separator is refused here."""
        props = msg.properties
        if native is not None and props.__class__ is dict:
            text: str | None = native.properties_to_string(props, True)
            if text is None:
                validate_message(msg, 1 << 62)  # raises with the reason
            return text  # type: ignore[return-value]
        if not all(isinstance(k, str) and isinstance(v, str) and k for k, v in props.items()):
            validate_message(msg, 1 << 62)  # raises with the reason
        text = properties_to_string(props)
        if text.count("\x01") != len(props) or text.count("\x02") != len(props) - 1:
            validate_message(msg, 1 << 62)
        return text

    def _uniq(self, msg: Message) -> str:
        uniq = msg.properties.get(c.UNIQ_KEY)
        if not uniq:
            assert self._ids is not None
            uniq = self._ids.next_id()
            msg.properties[c.UNIQ_KEY] = uniq
        return uniq

    def _prepare(self, msg: Message) -> tuple[bytes, int, str, str]:
        """(wire body, sysflag, properties string, UNIQ_KEY) of a single send."""
        uniq = self._uniq(msg)
        body = msg.body if msg.body.__class__ is bytes else bytes(msg.body)
        sysflag = 0
        if len(body) >= self.config.compress_msg_body_over_howmuch:
            body = zlib.compress(body, self.config.compress_level)
            sysflag |= c.COMPRESSED_FLAG
        if msg.properties.get(c.TRAN_MSG) == "true":
            sysflag |= c.TRANSACTION_PREPARED_TYPE
        return body, sysflag, self._properties(msg), uniq

    def _fields(
        self,
        topic: str,
        queue_id: int,
        sysflag: int,
        flag: int,
        properties: str | None,
        msg: Message | None,
        batch: bool,
    ) -> tuple[str | int | None, ...]:
        """``SendMessageRequestHeaderV2``'s values in ``_SEND_KEYS`` order, None for the
        fields left out (no properties, not a batch, no retry counts: those only for ``msg``
        sent to a retry topic).

        Hot path: no ``Header`` object and no extFields dict; ``codec.fields_frame`` writes
        them, ``codec.request_command`` makes a command of them.
        """
        reconsume = max_reconsume = None
        if msg is not None and topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
            reconsume, max_reconsume = _retry_fields(msg)
        return (
            self.group, topic, self.config.create_topic_key, self._default_queue_nums_text, queue_id, sysflag,
            int(time.time() * 1000), flag, properties or None, reconsume, max_reconsume, "true" if batch else None,
        )

    def _batch_request(self, topic: str, queue_id: int, body: bytes) -> RemotingCommand:
        """The SEND_BATCH_MESSAGE request of an encoded batch body."""
        fields = self._fields(topic, queue_id, 0, 0, None, None, True)
        return request_command(RequestCode.SEND_BATCH_MESSAGE, _SEND_KEYS, fields, body)

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        instance = self._check_running()
        info = instance.publish_infos.get(topic)
        if info is not None and info.queues and topic in self._topics:
            return info
        self._topics.add(topic)
        return await instance.publish_info(topic, self.config.create_topic_key, self.config.default_topic_queue_nums)

    def _select(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        info.counter += 1
        if not self.fault.enabled and last_broker is None:
            queues = info.queues
            return queues[info.counter % len(queues)]
        return self.fault.select(info.queues, info.counter, last_broker, int(time.time() * 1000))

    async def _explicit_queue(
        self, msg: Message, queue: MessageQueue | None, selector: MessageQueueSelector | None, arg: Any
    ) -> MessageQueue | None:
        if queue is not None:
            if queue.topic != msg.topic:
                raise MessageValidationError(f"queue {queue} is not a queue of topic {msg.topic!r}")
            self._topics.add(msg.topic)
            return queue
        if selector is not None:
            info = await self._publish_info(msg.topic)
            chosen = selector.select(info.queues, msg, arg)
            if chosen not in info.queues:
                raise MessageValidationError(f"the selector returned {chosen}, which is not a queue of {msg.topic!r}")
            return chosen
        return None

    # --- hooks --------------------------------------------------------------------------------

    def _before(self, msg: Message, mode: str, mq: MessageQueue | None, addr: str) -> SendContext | None:
        if not self._hooks:
            return None
        ctx = SendContext(self.group, msg, mode, mq, addr)
        for hook in self._hooks:
            try:
                hook.before_send(ctx)
            except Exception:
                log.exception("send hook %r failed", hook)
        return ctx

    def _after(
        self, ctx: SendContext | None, result: SendResult | None, exc: BaseException | None, start: float
    ) -> None:
        if ctx is None:
            return
        ctx.result, ctx.exception = result, exc
        ctx.elapsed_ms = (time.perf_counter() - start) * 1000
        for hook in self._hooks:
            try:
                hook.after_send(ctx)
            except Exception:
                log.exception("send hook %r failed", hook)

    # --- sync sends ---------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer.

        Without ``queue`` or ``selector`` a failed attempt is retried
        ``retry_times_when_send_failed`` times, on another broker when there is one.  With them
        (ordered messages) there is exactly one attempt: retrying elsewhere would break order.
        Raises ``MessageValidationError`` before anything is sent for an invalid message,
        ``NoRouteError``, ``RemoteError`` (with the broker's code and remark),
        ``RequestTimeoutError`` or ``ConnectionClosedError``.
        """
        instance = self._check_running()
        self._validate(msg)
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        retries = self.config.retry_times_when_send_failed
        if queue is not None or selector is not None:
            fixed = await self._explicit_queue(msg, queue, selector, arg)
            prepared = self._prepare(msg)
            if fixed is not None:
                return await self._send_to(msg, fixed, prepared, timeout, "SYNC")
            return await self._send_with_retries(msg, prepared, timeout, retries, "SYNC")
        prepared = self._prepare(msg)
        info = instance.publish_infos.get(msg.topic)
        if info is None or not info.queues or msg.topic not in self._topics or self._hooks or self.fault.enabled:
            return await self._send_with_retries(msg, prepared, timeout, retries, "SYNC")
        # The usual send (known route, open connection, no hooks, no fault tracking): its first
        # attempt right here, written straight to the connection, one coroutine frame and the
        # retry loop's set-up fewer per send.  Whatever it does not settle goes on in the
        # retry loop as that loop's first attempt.
        mq = self._select(info, None)
        addr = instance.master_addr(mq.broker_name)
        conn = instance.remoting.connection_if_open(addr) if addr is not None else None
        if conn is None:
            return await self._send_with_retries(msg, prepared, timeout, retries, "SYNC")
        deadline = time.monotonic() + timeout / 1000
        fields = self._fields(mq.topic, mq.queue_id, prepared[1], msg.flag, prepared[2], msg, False)
        try:
            result = send_result(
                await conn.invoke_fields(_SEND_V2, _SEND_KEYS, fields, prepared[0], timeout), mq, prepared[3]
            )
        except ApogeeError as exc:
            return await self._send_with_retries(
                msg, prepared, timeout, retries, "SYNC", first=(exc, mq.broker_name, deadline)
            )
        if result.status is SendStatus.SEND_OK or not self.config.retry_another_broker_when_not_store_ok or retries < 1:
            return result
        return await self._send_with_retries(
            msg, prepared, timeout, retries, "SYNC", first=(None, mq.broker_name, deadline)
        )

    async def _send_to(
        self, msg: Message, mq: MessageQueue, prepared: tuple[bytes, int, str, str], timeout_ms: int, mode: str
    ) -> SendResult:
        instance = self._check_running()
        uniq = prepared[3]
        addr = instance.master_addr(mq.broker_name) or await instance.find_master_addr(mq.broker_name, mq.topic)
        fields = self._fields(mq.topic, mq.queue_id, prepared[1], msg.flag, prepared[2], msg, False)
        if not self._hooks and not self.fault.enabled:
            # Nothing to time or to report: the request and its answer, nothing else.
            return send_result(
                await instance.api.send_fields(addr, _SEND_V2, _SEND_KEYS, fields, prepared[0], timeout_ms), mq, uniq
            )
        start = time.perf_counter()
        ctx = self._before(msg, mode, mq, addr)
        try:
            resp = await instance.api.send_fields(addr, _SEND_V2, _SEND_KEYS, fields, prepared[0], timeout_ms)
            result = send_result(resp, mq, uniq)
        except BaseException as exc:
            if self.fault.enabled:
                self.fault.update_fault_item(
                    mq.broker_name, int((time.perf_counter() - start) * 1000), True, int(time.time() * 1000)
                )
            self._after(ctx, None, exc, start)
            raise
        if self.fault.enabled:
            self.fault.update_fault_item(
                mq.broker_name, int((time.perf_counter() - start) * 1000), False, int(time.time() * 1000)
            )
        if ctx is not None:
            self._after(ctx, result, None, start)
        return result

    async def _send_with_retries(
        self,
        msg: Message,
        prepared: tuple[bytes, int, str, str],
        timeout_ms: int,
        retries: int,
        mode: str,
        first: tuple[ApogeeError | None, str, float] | None = None,
    ) -> SendResult:
        """Up to ``1 + retries`` attempts within ``timeout_ms``, each on another broker when
        there is one.  ``first`` is an attempt already made (by ``send``): its error (None for
        a stored-but-not-OK answer), its broker and the deadline it started."""
        instance = self._check_running()
        last_exc: BaseException | None = None
        if first is None:
            deadline = time.monotonic() + timeout_ms / 1000
            last_broker: str | None = None
            begin = 0
        else:
            first_exc, last_broker, deadline = first
            if first_exc is not None:
                await self._retry_after(first_exc, msg.topic)
                last_exc = first_exc
            begin = 1
        attempts = begin
        for attempt in range(begin, 1 + max(0, retries)):
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            attempts = attempt + 1
            try:
                info = instance.publish_infos.get(msg.topic)
                if info is None or not info.queues or msg.topic not in self._topics:
                    info = await self._publish_info(msg.topic)
                mq = self._select(info, last_broker)
                last_broker = mq.broker_name
                result = await self._send_to(msg, mq, prepared, remaining, mode)
            except ApogeeError as exc:
                await self._retry_after(exc, msg.topic)
                last_exc = exc
                continue
            if result.status is not SendStatus.SEND_OK and self.config.retry_another_broker_when_not_store_ok:
                last_exc = None
                if attempt < retries:
                    continue
            return result
        if last_exc is None:
            raise RequestTimeoutError(f"sending to {msg.topic!r} timed out after {timeout_ms} ms ({attempts} attempts)")
        last_exc.add_note(f"send to topic {msg.topic!r} failed after {attempts} attempt(s)")
        raise last_exc

    async def _retry_after(self, exc: ApogeeError, topic: str) -> None:
        """Raise ``exc`` when another attempt cannot help; refresh the route when it is stale."""
        if isinstance(exc, RemoteError):
            if exc.code not in RETRY_RESPONSE_CODES:
                raise exc
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                await self._refresh_route(topic)
        elif not isinstance(exc, (RequestTimeoutError, ConnectionClosedError)) and not exc.retriable:
            raise exc

    async def _refresh_route(self, topic: str) -> None:
        assert self._instance is not None
        try:
            await self._instance.update_topic_route(
                topic,
                default_topic=self.config.create_topic_key,
                default_queue_nums=self.config.default_topic_queue_nums,
            )
        except ApogeeError as exc:
            log.debug("route refresh of %s failed: %s", topic, exc)

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer; no retries."""
        instance = self._check_running()
        self._validate(msg)
        mq = await self._explicit_queue(msg, queue, selector, arg)
        if mq is None:
            mq = self._select(await self._publish_info(msg.topic), None)
        body, sysflag, props, _ = self._prepare(msg)
        addr = await instance.find_master_addr(mq.broker_name, mq.topic)
        ctx = self._before(msg, "ONEWAY", mq, addr)
        start = time.perf_counter()
        fields = self._fields(mq.topic, mq.queue_id, sysflag, msg.flag, props, None, False)
        req = request_command(_SEND_V2, _SEND_KEYS, fields, body)
        try:
            await instance.remoting.invoke_oneway(addr, req)
        except BaseException as exc:
            self._after(ctx, None, exc, start)
            raise
        self._after(ctx, None, None, start)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests; one result per message.

        The list is split so that no request exceeds ``batch_max_bytes`` (and never
        ``max_message_size``).  Messages may not carry a delay level and the topic may not be a
        retry topic (the broker refuses both in batches).  Each part is retried like ``send``.
        """
        self._check_running()
        if not msgs:
            raise MessageValidationError("the batch is empty")
        topic = msgs[0].topic
        for msg in msgs:
            validate_message(msg, self.config.max_message_size)
            if msg.topic != topic:
                raise MessageValidationError(f"a batch holds one topic; got {topic!r} and {msg.topic!r}")
            if msg.delay_time_level > 0:
                raise MessageValidationError("batch messages cannot have a delay level")
        if topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
            raise MessageValidationError("batch messages cannot be sent to a retry topic")
        if queue is not None and queue.topic != topic:
            raise MessageValidationError(f"queue {queue} is not a queue of topic {topic!r}")
        items = []
        uniqs = []
        for msg in msgs:
            uniqs.append(self._uniq(msg))
            items.append((msg.flag, bytes(msg.body), self._properties(msg)))
        sizes = [BATCH_ITEM_OVERHEAD + len(b) + len(p.encode()) for _, b, p in items]
        limit = min(self.config.batch_max_bytes, self.config.max_message_size)
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        results: list[SendResult] = []
        for run in split_batch(sizes, limit):
            body = encode_batch(items[run.start : run.stop])
            results.extend(await self._send_batch_body(topic, queue, body, uniqs[run.start : run.stop], timeout))
        return results

    async def _send_batch_body(
        self, topic: str, queue: MessageQueue | None, body: bytes, uniqs: list[str], timeout_ms: int
    ) -> list[SendResult]:
        instance = self._check_running()
        deadline = time.monotonic() + timeout_ms / 1000
        retries = 0 if queue is not None else self.config.retry_times_when_send_failed
        last_broker: str | None = None
        last_exc: BaseException | None = None
        for _ in range(1 + retries):
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            start = time.perf_counter()
            mq = queue
            try:
                if mq is None:
                    mq = self._select(await self._publish_info(topic), last_broker)
                else:
                    self._topics.add(topic)
                last_broker = mq.broker_name
                addr = await instance.find_master_addr(mq.broker_name, topic)
                req = self._batch_request(topic, mq.queue_id, body)
                resp = await instance.api.send(addr, req, remaining)
                results = parse_send_response(resp, mq, uniqs)
            except RemoteError as exc:
                if exc.code not in RETRY_RESPONSE_CODES:
                    raise
                last_exc = exc
            except (RequestTimeoutError, ConnectionClosedError) as exc:
                last_exc = exc
            else:
                self.fault.update_fault_item(
                    mq.broker_name, int((time.perf_counter() - start) * 1000), False, int(time.time() * 1000)
                )
                return results
            if mq is not None:
                self.fault.update_fault_item(mq.broker_name, 0, True, int(time.time() * 1000))
        if last_exc is None:
            raise RequestTimeoutError(f"batch send to {topic!r} timed out after {timeout_ms} ms")
        raise last_exc

    # --- async sends --------------------------------------------------------------------------

    async def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[SendResult]:
        """Hand a message over for sending; returns a future of its ``SendResult``.

        The call waits only while ``max_inflight_messages`` results are outstanding
        (backpressure), so ``fut = await producer.send_async(msg)`` is cheap and ``await fut``
        gives the result or raises.  ``callback(result, exception)`` runs too when given.
        Failed sends are retried ``retry_times_when_send_async_failed`` times.
        """
        # The common case first, checked in one place: an auto-batched message with a free
        # in-flight slot (the checks are validate_message's and the batching conditions below).
        if self._fast_async and callback is None and queue is None and selector is None and timeout_ms is None \
                and self._free > 0:
            props = msg.properties
            body = msg.body
            topic = msg.topic
            if (topic in _batchable_topics and body.__class__ is bytes and 0 < len(body) < self._fast_body_limit
                    and _DELAY not in props and _TRAN not in props):
                batch = self._pending.get(topic)
                if batch is not None and native is not None and props.__class__ is dict:
                    # The batch is open: the message goes into it here, in C (see _append).
                    ids = self._ids
                    uniq = native.batch_append(batch.body, msg.flag, body, props, ids.prefix,  # type: ignore[union-attr]
                                               ids.start_ms, ids.next_start_ms, next(ids.counter))  # type: ignore[union-attr]
                    if uniq is not None:
                        self._free -= 1
                        fut: asyncio.Future[SendResult] = self._loop.create_future()  # type: ignore[union-attr]
                        batch.futures.append(fut)
                        batch.uniqs.append(uniq)
                        self._appended(topic, batch, msg)
                        return fut
                self._free -= 1
                fut = self._loop.create_future()  # type: ignore[union-attr]
                try:
                    self._append(msg, fut, None)
                except BaseException:  # a property that cannot go out: the slot is not used
                    self._release(1)
                    raise
                return fut
        self._check_running()
        self._validate(msg)
        if self._free <= 0:
            await self._wait_for_slot()
        self._free -= 1
        loop = self._loop
        assert loop is not None
        fut = loop.create_future()
        if callback is not None:
            fut.add_done_callback(_callback_adapter(callback))
        try:
            fixed = await self._explicit_queue(msg, queue, selector, arg) if (queue or selector) else None
        except BaseException as exc:
            self._finish(fut, None, exc)
            return fut
        if (
            self.config.auto_batch
            and len(msg.body) < self.config.compress_msg_body_over_howmuch
            and c.DELAY not in msg.properties
            and c.TRAN_MSG not in msg.properties
            and not msg.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX)
            and timeout_ms is None
        ):
            try:
                self._append(msg, fut, fixed)
            except BaseException:
                self._release(1)
                raise
        else:
            self._spawn(self._send_single_async(msg, fut, fixed, timeout_ms))
        return fut

    async def send_and_wait(self, msg: Message, **kwargs: Any) -> SendResult:
        """``await (await send_async(msg))``: an async send whose result you wait for."""
        return await (await self.send_async(msg, **kwargs))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait_for_slot(self) -> None:
        assert self._loop is not None
        while self._free <= 0:
            waiter = self._loop.create_future()
            self._slot_waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_slot_waiters()
                raise

    def _release(self, n: int) -> None:
        self._free += n
        if self._slot_waiters:
            self._wake_slot_waiters()
        if self._free >= self.config.max_inflight_messages and self._idle_waiters:
            for w in self._idle_waiters:
                if not w.done():
                    w.set_result(None)
            self._idle_waiters.clear()

    def _wake_slot_waiters(self) -> None:
        free = self._free
        while free > 0 and self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                free -= 1

    def _finish(self, fut: asyncio.Future[SendResult], result: SendResult | None, exc: BaseException | None) -> None:
        if not fut.done():
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)  # type: ignore[arg-type]
        self._release(1)

    async def _send_single_async(
        self, msg: Message, fut: asyncio.Future[SendResult], fixed: MessageQueue | None, timeout_ms: int | None
    ) -> None:
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        try:
            prepared = self._prepare(msg)
            if fixed is not None:
                result = await self._send_to(msg, fixed, prepared, timeout, "ASYNC")
            else:
                result = await self._send_with_retries(
                    msg, prepared, timeout, self.config.retry_times_when_send_async_failed, "ASYNC"
                )
        except asyncio.CancelledError:
            self._finish(fut, None, ClientStateError("the producer shut down before the message was sent"))
            raise
        except BaseException as exc:
            self._finish(fut, None, exc)
        else:
            self._finish(fut, result, None)

    # --- auto-batching ------------------------------------------------------------------------

    def _append(self, msg: Message, fut: asyncio.Future[SendResult], queue: MessageQueue | None) -> None:
        key: str | tuple[str, MessageQueue] = msg.topic if queue is None else (msg.topic, queue)
        batch = self._pending.get(key)
        new = batch is None
        if batch is None:
            batch = _Batch(msg.topic, queue)
        ids = self._ids
        assert ids is not None
        uniq = None
        if native is not None and msg.properties.__class__ is dict and msg.body.__class__ is bytes:
            uniq = native.batch_append(batch.body, msg.flag, msg.body, msg.properties,
                                       ids.prefix, ids.start_ms, ids.next_start_ms, next(ids.counter))
        if uniq is None:
            uniq = self._append_py(batch.body, msg)  # may refuse the message: nothing was added
        if new:
            self._pending[key] = batch
            loop = self._loop
            assert loop is not None
            if self.config.batch_linger_ms > 0:
                batch.handle = loop.call_later(self.config.batch_linger_ms / 1000, self._flush_key, key)
            else:
                batch.handle = loop.call_soon(self._flush_key, key)
        batch.futures.append(fut)
        batch.uniqs.append(uniq)
        self._appended(key, batch, msg)

    def _appended(self, key: str | tuple[str, MessageQueue], batch: _Batch, msg: Message) -> None:
        """After a message joined ``batch``: keep it for the hooks, send the batch once full."""
        if self._hooks:
            batch.messages.append(msg)
        if len(batch.futures) >= self.config.batch_max_messages or len(batch.body) >= self.config.batch_max_bytes:
            self._flush_key(key)

    def _append_py(self, body: bytearray, msg: Message) -> str:
        """Give ``msg`` its UNIQ_KEY and add its batch item to ``body`` (the reference of
        native.batch_append, and the path that explains a refusal)."""
        uniq = self._uniq(msg)
        props = self._properties(msg)
        try:
            body += encode_batch_item(msg.flag, msg.body, props)
        except ValueError as exc:
            raise MessageValidationError(f"message to {msg.topic}: {exc}") from None
        return uniq

    def _flush_key(self, key: str | tuple[str, MessageQueue]) -> None:
        batch = self._pending.pop(key, None)
        if batch is None:
            return
        if batch.handle is not None:
            batch.handle.cancel()
        body = bytes(batch.body)
        batch.body = bytearray()
        self._send_batch_now(batch, body, 1 + self.config.retry_times_when_send_async_failed, None)

    def _flush_all(self) -> None:
        for key in list(self._pending):
            self._flush_key(key)

    def _send_batch_now(self, batch: _Batch, body: bytes, attempts_left: int, last_broker: str | None) -> None:
        """Send ``batch`` without awaiting when the route and connection are at hand."""
        instance = self._instance
        if instance is None or not self._running:
            self._fail_batch(batch, ClientStateError("the producer is shut down"))
            return
        mq = batch.queue
        if mq is None:
            info = instance.publish_infos.get(batch.topic)
            if info is None or not info.ok():
                self._spawn(self._send_batch_slow(batch, body, attempts_left, last_broker))
                return
            mq = self._select(info, last_broker)
        addr = instance.master_addr(mq.broker_name)
        conn = instance.remoting.connection_if_open(addr) if addr else None
        if conn is None or addr is None:
            self._spawn(self._send_batch_slow(batch, body, attempts_left, last_broker))
            return
        req = self._batch_request(batch.topic, mq.queue_id, body)
        start = time.perf_counter()
        hook_ctxs = [self._before(m, "ASYNC", mq, addr) for m in batch.messages] if self._hooks else None

        def done(resp: RemotingCommand | None, err: BaseException | None) -> None:
            self._batch_done(batch, body, mq, resp, err, attempts_left, start, hook_ctxs)

        try:
            conn.invoke_callback(req, self.config.send_timeout_ms, done)
        except ApogeeError as exc:
            done(None, exc)

    async def _send_batch_slow(self, batch: _Batch, body: bytes, attempts_left: int, last_broker: str | None) -> None:
        """Fetch the route or open the connection first, then send."""
        instance = self._instance
        assert instance is not None
        try:
            if batch.queue is None:
                info = await self._publish_info(batch.topic)
                mq = self._select(info, last_broker)
            else:
                mq = batch.queue
                self._topics.add(batch.topic)
            addr = await instance.find_master_addr(mq.broker_name, batch.topic)
            await instance.remoting.connection(addr)
        except asyncio.CancelledError:
            self._fail_batch(batch, ClientStateError("the producer shut down before the batch was sent"))
            raise
        except BaseException as exc:
            if attempts_left > 1 and isinstance(exc, ApogeeError) and exc.retriable:
                await asyncio.sleep(0.1)
                self._send_batch_now(batch, body, attempts_left - 1, last_broker)
            else:
                self._fail_batch(batch, exc)
            return
        if batch.queue is None:
            batch_q = _Batch(batch.topic, mq)  # send this attempt to the queue just selected
            batch_q.futures, batch_q.uniqs, batch_q.messages = batch.futures, batch.uniqs, batch.messages
            self._send_batch_now(batch_q, body, attempts_left, last_broker)
            return
        self._send_batch_now(batch, body, attempts_left, last_broker)

    def _batch_done(
        self,
        batch: _Batch,
        body: bytes,
        mq: MessageQueue,
        resp: RemotingCommand | None,
        err: BaseException | None,
        attempts_left: int,
        start: float,
        hook_ctxs: list[SendContext | None] | None,
    ) -> None:
        now = int(time.time() * 1000)
        latency = int((time.perf_counter() - start) * 1000)
        if err is None and resp is not None:
            futures = batch.futures
            try:
                fields = send_response_fields(resp, mq, len(futures))
            except RemoteError as exc:
                err = exc
            else:
                self.fault.update_fault_item(mq.broker_name, latency, False, now)
                if native is not None and not hook_ctxs:
                    native.complete_sends(futures, SendResult, fields[0], batch.uniqs, *fields[1:])
                else:
                    results = send_results(batch.uniqs, *fields)
                    for fut, result in zip(futures, results, strict=True):
                        if not fut.done():
                            fut.set_result(result)
                    if hook_ctxs:
                        for ctx, result in zip(hook_ctxs, results, strict=True):
                            self._after(ctx, result, None, start)
                self._release(len(futures))
                return
        self.fault.update_fault_item(mq.broker_name, latency, True, now)
        retriable = isinstance(err, (RequestTimeoutError, ConnectionClosedError)) or (
            isinstance(err, RemoteError) and err.code in RETRY_RESPONSE_CODES
        )
        if retriable and attempts_left > 1 and self._running:
            log.debug("batch of %d to %s failed (%s); retrying", len(batch.futures), mq, err)
            retry = _Batch(batch.topic, batch.queue)
            retry.futures, retry.uniqs, retry.messages = batch.futures, batch.uniqs, batch.messages
            self._send_batch_now(retry, body, attempts_left - 1, mq.broker_name)
            return
        assert err is not None
        if hook_ctxs:
            for ctx in hook_ctxs:
                self._after(ctx, None, err, start)
        self._fail_batch(batch, err)

    def _fail_batch(self, batch: _Batch, exc: BaseException) -> None:
        for fut in batch.futures:
            if not fut.done():
                fut.set_exception(exc)
        self._release(len(batch.futures))

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send every pending batch now and wait until every async send has its result.

        ``TimeoutError`` if ``timeout_ms`` passes first.
        """
        self._flush_all()
        if self._free >= self.config.max_inflight_messages:
            return
        assert self._loop is not None
        waiter = self._loop.create_future()
        self._idle_waiters.append(waiter)
        if timeout_ms is None:
            await waiter
        else:
            await within(waiter, timeout_ms / 1000)


def _retry_fields(msg: Message) -> tuple[int | None, int | None]:
    """reconsumeTimes / maxReconsumeTimes of a message sent to a retry topic."""
    props = msg.properties
    try:
        reconsume = int(props.get(c.RECONSUME_TIME, "0"))
        max_times = int(props[c.MAX_RECONSUME_TIMES]) if c.MAX_RECONSUME_TIMES in props else None
    except ValueError:
        return None, None
    return reconsume, max_times


def _callback_adapter(callback: SendCallback) -> Callable[[asyncio.Future[SendResult]], None]:
    def run(fut: asyncio.Future[SendResult]) -> None:
        try:
            if fut.cancelled():
                callback(None, asyncio.CancelledError())
            elif fut.exception() is not None:
                callback(None, fut.exception())
            else:
                callback(fut.result(), None)
        except Exception:
            log.exception("send callback raised")

    return run
