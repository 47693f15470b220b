"""The producer's public face: sync, async (awaitable or callback), oneway and batch sends.

The work is split as aiokafka splits its producer: ``validation`` checks a message before
anything travels, ``accumulator`` coalesces async sends into batch bodies, ``sender`` routes
each send to a queue, writes it and retries it by the one rule of ``retry``.  This class
ties them together and keeps what belongs to one producer: its lifecycle, the UNIQ_KEY
generator, compression, backpressure and hooks.

``send_async`` is bounded: at most ``max_inflight_messages`` await their result, and the
call itself waits (backpressure) instead of queueing without limit.  ``request`` sends a
message and waits for its reply (RIP-16, ``apogee.client.request``); ``reply`` answers one.  With ``auto_batch``,
messages to the same topic sent asynchronously travel in SEND_BATCH_MESSAGE requests, each
message still getting its own result.  ``flush()`` and ``shutdown()`` wait until every
message has its result.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from apogee.client.api import send_result, send_results
from apogee.client.config import ProducerConfig, with_options
from apogee.client.fault import FaultStrategy
from apogee.client.instance import ClientInstance
from apogee.client.producer.accumulator import Accumulator, Batch, BatchKey, batchable, split_batch
from apogee.client.producer.hooks import EndTransactionHook, SendHook, SendHooks
from apogee.client.producer.sender import (
    SEND_KEYS,
    SEND_REPLY_V2,
    SEND_V2,
    BatchAnswer,
    Failed,
    Prepared,
    Sender,
    SendSettings,
)
from apogee.client.producer.validation import (
    batchable_topics,
    check_message,
    properties_text,
    retry_counts,
    validate_message,
)
from apogee.client.replier import create_reply_message, is_reply
from apogee.client.request import prepare_request
from apogee.client.routes import TopicPublishInfo
from apogee.client.selectors import MessageQueueSelector
from apogee.client.types import SendResult, SendStatus
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.aio import within
from apogee.common.message import Message, MessageExt, MessageQueue
from apogee.common.message_codec import BATCH_ITEM_OVERHEAD, encode_batch
from apogee.common.uniq_id import UniqIdGenerator
from apogee.errors import ApogeeError, ClientStateError, MessageValidationError

if TYPE_CHECKING:  # the trace package sends with a Producer: imported when tracing starts
    from apogee.client.trace import EndTransactionTraceHook, SendTraceHook, TraceDispatcher

log = logging.getLogger("apogee.client.producer")

SendCallback = Callable[[SendResult | None, BaseException | None], Any]
RequestCallback = Callable[[MessageExt | None, BaseException | None], Any]

_DELAY = c.DELAY
_TRAN = c.TRAN_MSG
_RETRY_PREFIX = c.RETRY_GROUP_TOPIC_PREFIX
_MSG_TYPE = c.PROPERTY_MESSAGE_TYPE
_SEND_OK = SendStatus.SEND_OK  # read per send (an Enum class attribute read is slow: docs/architecture.md)


def _send_code(msg: Message) -> int:
    """SEND_REPLY_MESSAGE_V2 for a reply (MSG_TYPE=reply), else SEND_MESSAGE_V2 (as
    MQClientAPIImpl.sendMessage chooses)."""
    return SEND_REPLY_V2 if is_reply(msg) else SEND_V2


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
        cfg = with_options(config or ProducerConfig(), group, namesrv_addr, options, "producer")
        self.config = cfg
        self.group = cfg.group
        self.fault = FaultStrategy(cfg.send_latency_fault_enable, cfg.latency_max_ms, cfg.not_available_duration_ms)
        self._send_hooks = SendHooks(cfg.group)
        self._hooks = self._send_hooks.hooks
        self.end_transaction_hooks: list[EndTransactionHook] = []  # called by TransactionProducer
        # With enable_msg_trace: the send hook and the end-transaction hook (they hold the dispatcher).
        self._trace_hooks: tuple[SendTraceHook, EndTransactionTraceHook] | None = None
        self._instance: ClientInstance | None = None
        self._sender: Sender | None = None
        self._ids: UniqIdGenerator | None = None
        self._topics: set[str] = set()  # the sender's: topics this producer sends to
        self._running = False
        self._fast_async = False  # running with auto_batch: send_async may take its fast path
        self._fast_body_limit = min(cfg.compress_msg_body_over_howmuch, cfg.max_message_size + 1)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Backpressure: free in-flight slots and the senders waiting for one.
        self._free = cfg.max_inflight_messages
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._acc = Accumulator(
            cfg.batch_max_messages, cfg.batch_max_bytes, cfg.batch_linger_ms / 1000, self._schedule,
            self._dispatch, self._hooks,
        )
        # Open batches by topic (the common case: no explicit queue), or by (topic, queue).
        self._pending = self._acc.pending

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
        self._ids = self._acc.ids = UniqIdGenerator(self._instance.config.client_ip)
        self._sender = Sender(
            self._instance.route_table, self._instance.remoting, SendSettings.of(self.config), self.fault,
            self._send_hooks, topics=self._topics,
        )
        self._running = True
        self._fast_async = self.config.auto_batch
        if self.config.enable_msg_trace:
            await self._start_tracing()
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
        await self._stop_tracing()
        self._running = False
        self._fast_async = False
        if self._sender is not None:
            await self._sender.close()
        self._acc.buffers.clear()
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

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The ``TraceDispatcher`` with ``enable_msg_trace`` (its counters: ``dropped``,
        ``sent_messages``, ``failed_messages``), else None (RocketMQ's getTraceDispatcher)."""
        return self._trace_hooks[0].dispatcher if self._trace_hooks is not None else None

    async def _start_tracing(self) -> None:
        """Pub records of every stored message (and EndTransaction records of decisions)."""
        from apogee.client.trace import EndTransactionTraceHook, SendTraceHook, TraceDispatcher  # it uses Producer

        dispatcher = await TraceDispatcher.start_for(self.config, self.group, "PRODUCE")
        send_hook, end_hook = SendTraceHook(dispatcher), EndTransactionTraceHook(dispatcher)
        self._trace_hooks = (send_hook, end_hook)
        self._hooks.append(send_hook)
        self.end_transaction_hooks.append(end_hook)

    async def _stop_tracing(self) -> None:
        if self._trace_hooks is None:
            return
        send_hook, end_hook = self._trace_hooks
        self._trace_hooks = None
        self._hooks.remove(send_hook)
        self.end_transaction_hooks.remove(end_hook)
        await send_hook.dispatcher.close()

    def _check_running(self) -> ClientInstance:
        if not self._running or self._instance is None:
            raise ClientStateError(f"producer {self.group} is not running: call start() first")
        return self._instance

    def _running_sender(self) -> Sender:
        if not self._running or self._sender is None:
            raise ClientStateError(f"producer {self.group} is not running: call start() first")
        return self._sender

    # --- preparation --------------------------------------------------------------------------

    def _prepare(self, msg: Message) -> Prepared:
        """What every attempt of a single send carries (see ``sender.Prepared``)."""
        uniq = self._ids.ensure(msg.properties)  # type: ignore[union-attr]
        body = msg.body if msg.body.__class__ is bytes else bytes(msg.body)
        sysflag = 0
        if len(body) >= self.config.compress_msg_body_over_howmuch:
            body = zlib.compress(body, self.config.compress_level)
            sysflag |= c.COMPRESSED_FLAG
        if msg.properties.get(_TRAN) == "true":
            sysflag |= c.TRANSACTION_PREPARED_TYPE
        retry = retry_counts(msg) if msg.topic.startswith(_RETRY_PREFIX) else None
        return body, sysflag, properties_text(msg), uniq, msg.flag, retry

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        """The topic's writable queues, its route fetched on first use (``Sender.publish_info``)."""
        return await self._running_sender().publish_info(topic)

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
        sender = self._running_sender()
        check_message(msg, self.config.max_message_size)
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        if queue is not None or selector is not None:
            fixed = await self._explicit_queue(msg, queue, selector, arg)
            return await sender.send_message(
                msg.topic, self._prepare(msg), timeout, 0, queue=fixed, msg=msg, code=_send_code(msg)
            )
        retries = self.config.retry_times_when_send_failed
        prepared = self._prepare(msg)
        topic = msg.topic
        info = sender.routes.publish_infos.get(topic)
        if (info is None or not info.queues or topic not in self._topics or self._hooks or self.fault.enabled
                or _MSG_TYPE in msg.properties):
            return await sender.send_message(topic, prepared, timeout, retries, msg=msg, code=_send_code(msg))
        # The usual send (known route, open connection, no hooks, no fault tracking): the
        # sender's first attempt right here, written straight to the connection, one
        # coroutine frame and the retry loop's set-up fewer per send.  Whatever it does not
        # settle goes on in the sender's retry loop as that loop's first attempt.
        mq = sender.select(info, None)
        addr = sender.routes.master_addr(mq.broker_name)
        conn = sender.remoting.connection_if_open(addr) if addr is not None else None
        if conn is None:
            return await sender.send_message(topic, prepared, timeout, retries, msg=msg)
        deadline = time.monotonic() + timeout / 1000
        fields = sender.fields(topic, mq.queue_id, prepared[1], prepared[4], prepared[2], prepared[5], False)
        try:
            result = send_result(
                await conn.invoke_fields(SEND_V2, SEND_KEYS, fields, prepared[0], timeout), mq, prepared[3]
            )
        except ApogeeError as exc:
            return await sender.send_message(
                topic, prepared, timeout, retries, msg=msg, first=Failed(exc, mq.broker_name, deadline)
            )
        if result.status is _SEND_OK or not self.config.retry_another_broker_when_not_store_ok or retries < 1:
            return result
        return await sender.send_message(
            topic, prepared, timeout, retries, msg=msg, first=Failed(None, mq.broker_name, deadline, result)
        )

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer; no retries."""
        sender = self._running_sender()
        check_message(msg, self.config.max_message_size)
        mq = await self._explicit_queue(msg, queue, selector, arg)
        if mq is None:
            mq = sender.select(await sender.publish_info(msg.topic), None)
        await sender.send_oneway(msg, mq, self._prepare(msg), _send_code(msg))

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests; one result per message.

        The list is split so that no request exceeds ``batch_max_bytes`` (and never
        ``max_message_size``).  Messages may not carry a delay level and the topic may not be a
        retry topic (the broker refuses both in batches).  Each part is retried like ``send``.
        """
        sender = self._running_sender()
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
        ids = self._ids
        assert ids is not None
        uniqs = [ids.ensure(msg.properties) for msg in msgs]
        items = [(msg.flag, bytes(msg.body), properties_text(msg)) for msg in msgs]
        sizes = [BATCH_ITEM_OVERHEAD + len(b) + len(p.encode()) for _, b, p in items]
        limit = min(self.config.batch_max_bytes, self.config.max_message_size)
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        retries = 0 if queue is not None else self.config.retry_times_when_send_failed
        results: list[SendResult] = []
        for run in split_batch(sizes, limit):
            part = uniqs[run.start : run.stop]
            answer = await sender.send_batch(
                topic, encode_batch(items[run.start : run.stop]), part, timeout, retries,
                queue=queue, messages=msgs[run.start : run.stop],
            )
            results.extend(send_results(part, *answer))
        return results

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
        # in-flight slot (a narrower test than check_message's and accumulator.batchable's).
        if self._fast_async and callback is None and queue is None and selector is None and timeout_ms is None \
                and self._free > 0:
            props = msg.properties
            body = msg.body
            topic = msg.topic
            if (topic in batchable_topics and body.__class__ is bytes and 0 < len(body) < self._fast_body_limit
                    and _DELAY not in props and _TRAN not in props and _MSG_TYPE not in props):
                batch = self._pending.get(topic)
                if batch is not None and native is not None and props.__class__ is dict:
                    # The batch is open: the message goes into it here, in C (see Accumulator.append).
                    ids = self._ids
                    uniq = native.batch_append(batch.body, msg.flag, body, props, ids.prefix,  # type: ignore[union-attr]
                                               ids.start_ms, ids.next_start_ms, next(ids.counter))  # type: ignore[union-attr]
                    if uniq is not None:
                        self._free -= 1
                        fut: asyncio.Future[SendResult] = self._loop.create_future()  # type: ignore[union-attr]
                        batch.futures.append(fut)
                        batch.uniqs.append(uniq)
                        self._acc.appended(topic, batch, msg)
                        return fut
                self._free -= 1
                fut = self._loop.create_future()  # type: ignore[union-attr]
                try:
                    self._acc.append(msg, fut, None)
                except BaseException:  # a property that cannot go out: the slot is not used
                    self._release(1)
                    raise
                return fut
        sender = self._running_sender()
        check_message(msg, self.config.max_message_size)
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
        if self.config.auto_batch and timeout_ms is None and batchable(msg, self.config.compress_msg_body_over_howmuch):
            try:
                self._acc.append(msg, fut, fixed)
            except BaseException:
                self._release(1)
                raise
        else:
            sender.spawn(self._send_single_async(sender, msg, fut, fixed, timeout_ms))
        return fut

    async def send_and_wait(self, msg: Message, **kwargs: Any) -> SendResult:
        """``await (await send_async(msg))``: an async send whose result you wait for."""
        return await (await self.send_async(msg, **kwargs))

    async def _send_single_async(
        self,
        sender: Sender,
        msg: Message,
        fut: asyncio.Future[SendResult],
        fixed: MessageQueue | None,
        timeout_ms: int | None,
    ) -> None:
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        retries = 0 if fixed is not None else self.config.retry_times_when_send_async_failed
        try:
            result = await sender.send_message(
                msg.topic, self._prepare(msg), timeout, retries, queue=fixed, mode="ASYNC", msg=msg,
                code=_send_code(msg),
            )
        except asyncio.CancelledError:
            self._finish(fut, None, ClientStateError("the producer shut down before the message was sent"))
            raise
        except BaseException as exc:
            self._finish(fut, None, exc)
        else:
            self._finish(fut, result, None)

    # --- request-reply (RIP-16) ---------------------------------------------------------------

    async def request(
        self,
        msg: Message,
        timeout_ms: int | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Send ``msg`` as a request and return its reply (RocketMQ's ``request(msg, timeout)``).

        ``msg`` gets ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``; a consumer answers
        with ``reply`` (or any RocketMQ client with ``MessageUtil.createReplyMessage``), and the
        broker pushes the reply here.  Raises ``ReplyTimeoutError`` when no reply came within
        ``timeout_ms`` (default ``send_timeout_ms``), or the send's error (with a note) when
        the request could not be sent.
        """
        return await (await self.request_async(msg, timeout_ms=timeout_ms, queue=queue, selector=selector, arg=arg))

    async def request_async(
        self,
        msg: Message,
        callback: RequestCallback | None = None,
        *,
        timeout_ms: int | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> asyncio.Future[MessageExt]:
        """Send ``msg`` as a request; a future of its reply (``request``'s errors), and
        ``callback(reply, error)`` when given (RocketMQ's ``request(msg, callback, timeout)``)."""
        sender = self._running_sender()
        instance = self._check_running()
        check_message(msg, self.config.max_message_size)
        timeout = timeout_ms if timeout_ms is not None else self.config.send_timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout / 1000
        correlation_id = prepare_request(msg, instance.client_id, timeout)
        if msg.topic not in instance.routes:
            # The first request to the topic: learn its brokers and heartbeat them at once, so
            # they know which connection is ours when they push the reply (as RocketMQ does).
            await sender.publish_info(msg.topic)
            await instance.heartbeat_all()
        fixed = await self._explicit_queue(msg, queue, selector, arg) if (queue or selector) else None
        fut = instance.requests.add(correlation_id, msg.topic, timeout, deadline - loop.time())
        if callback is not None:
            fut.add_done_callback(_callback_adapter(callback))
        sender.spawn(self._send_request(sender, msg, correlation_id, fixed, deadline))
        return fut

    async def _send_request(
        self, sender: Sender, msg: Message, correlation_id: str, fixed: MessageQueue | None, deadline: float
    ) -> None:
        """The request's send (RocketMQ sends it asynchronously, with the async retries); a
        failure settles the request at once."""
        requests = self._check_running().requests
        remaining_ms = max(1, int((deadline - asyncio.get_running_loop().time()) * 1000))
        retries = 0 if fixed is not None else self.config.retry_times_when_send_async_failed
        try:
            await sender.send_message(
                msg.topic, self._prepare(msg), remaining_ms, retries, queue=fixed, mode="ASYNC", msg=msg
            )
        except asyncio.CancelledError:
            requests.fail(correlation_id, ClientStateError("the producer shut down before the request was sent"))
            raise
        except Exception as exc:
            exc.add_note(f"send request message to <{msg.topic}> fail")
            requests.fail(correlation_id, exc)

    async def reply(self, request: Message, body: bytes, *, timeout_ms: int | None = None) -> SendResult:
        """Answer ``request`` (a message a consumer received) with ``body``: the reply of
        ``replier.create_reply_message`` sent as SEND_REPLY_MESSAGE_V2, which the broker pushes
        to the requester.  A broker that cannot reach the requester answers SYSTEM_ERROR, and
        the send is retried on another broker of the cluster, as any send."""
        return await self.send(create_reply_message(request, body), timeout_ms=timeout_ms)

    # --- auto-batches -------------------------------------------------------------------------

    def _schedule(self, delay_s: float, fn: Callable[[BatchKey], None], key: BatchKey) -> asyncio.Handle:
        loop = self._loop
        assert loop is not None
        return loop.call_later(delay_s, fn, key) if delay_s > 0 else loop.call_soon(fn, key)

    def _dispatch(self, batch: Batch, body: bytes | memoryview) -> None:
        """A batch is ready: hand it to the sender."""
        sender = self._sender
        if sender is None or not self._running:
            self._batch_done(batch, None, ClientStateError("the producer is shut down"))
            return
        retries = self.config.retry_times_when_send_async_failed
        sender.send_batch_soon(batch, body, retries, functools.partial(self._batch_done, batch))

    def _batch_done(self, batch: Batch, answer: BatchAnswer | None, exc: BaseException | None) -> None:
        futures = batch.futures
        if answer is not None:
            self._acc.recycle(batch)
            if native is not None:
                native.complete_sends(futures, SendResult, answer[0], batch.uniqs, *answer[1:])
            else:
                for fut, result in zip(futures, send_results(batch.uniqs, *answer), strict=True):
                    if not fut.done():
                        fut.set_result(result)
        else:
            assert exc is not None
            batch.fail(exc)
        self._release(len(futures))

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send every pending batch now and wait until every async send has its result.

        ``TimeoutError`` if ``timeout_ms`` passes first.
        """
        self._acc.flush_all()
        if self._free >= self.config.max_inflight_messages:
            return
        assert self._loop is not None
        waiter = self._loop.create_future()
        self._idle_waiters.append(waiter)
        if timeout_ms is None:
            await waiter
        else:
            await within(waiter, timeout_ms / 1000)

    # --- backpressure -------------------------------------------------------------------------

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


def _callback_adapter(callback: Callable[[Any, BaseException | None], Any]) -> Callable[[asyncio.Future[Any]], None]:
    def run(fut: asyncio.Future[Any]) -> None:
        try:
            if fut.cancelled():
                callback(None, asyncio.CancelledError())
            elif fut.exception() is not None:
                callback(None, fut.exception())
            else:
                callback(fut.result(), None)
        except Exception:
            log.exception("send or request callback raised")

    return run
