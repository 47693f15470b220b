"""The sender (aiokafka's ``Sender``): one send, from its topic to the broker's answer.

A send is a message (SEND_MESSAGE_V2) or a batch body (SEND_BATCH_MESSAGE).  Each attempt
picks a queue (round robin, skipping the broker that just failed; latency fault tolerance
when enabled; or the caller's fixed queue), finds the broker's master address in the route
cache (``apogee.client.routes``), writes the request and reads the answer.  After a failed
attempt the one retry rule (``apogee.client.producer.retry``) says whether and how to go
on, within the send's attempts and timeout.

Two users: the ``Producer`` (sync, async, oneway, batch and auto-batched sends) and the
Spark sink (``apogee.spark.writer``), which hands it the batch bodies it builds column by
column.  Both write the request header from the same keys (``SEND_KEYS``, the short names
of SendMessageRequestHeaderV2) through ``fields``.

Hot paths: the producer's sync ``send`` and the auto-batch path write their first attempt
straight to an open connection without a coroutine (the auto-batch one here, in
``send_batch_soon``); whatever that attempt does not settle continues in the retry loop,
given as its first attempt (``Failed``), so the rule lives in one place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from apogee.client.api import send_response_fields, send_result, send_results
from apogee.client.config import ProducerConfig
from apogee.client.fault import FaultStrategy
from apogee.client.producer.accumulator import Batch
from apogee.client.producer.hooks import SendContext, SendHooks
from apogee.client.producer.retry import after_failure, after_stored, classify, pause_before
from apogee.client.routes import TopicPublishInfo, TopicRoutes
from apogee.client.types import SendResult, SendStatus
from apogee.common import constants as c
from apogee.common.message import Message, MessageQueue
from apogee.errors import ApogeeError, ClientStateError, RemoteError, RequestTimeoutError, Retry
from apogee.remoting.client import RemotingClient
from apogee.remoting.codec import request_command
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import SendMessageRequestHeaderV2

log = logging.getLogger("apogee.client.producer")
_SEND_OK = SendStatus.SEND_OK  # read per batch (an Enum class attribute read is slow: docs/architecture.md)

SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
# A reply (MSG_TYPE=reply) goes as SEND_REPLY_MESSAGE_V2, same header (MQClientAPIImpl.sendMessage).
SEND_REPLY_V2 = int(RequestCode.SEND_REPLY_MESSAGE_V2)
SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
# Wire keys of SendMessageRequestHeaderV2 ("a".."m"), taken from the header class itself, in
# the order of the values ``Sender.fields`` gives.
_V2_KEYS = {attr: key for attr, key, _kind, _required in SendMessageRequestHeaderV2._fields()}
SEND_KEYS = tuple(
    _V2_KEYS[attr]
    for attr in (
        "producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id", "sys_flag",
        "born_timestamp", "flag", "properties", "reconsume_times", "max_reconsume_times", "batch",
    )
)

RetryCounts = tuple[int | None, int | None] | None
# A message ready to go: wire body, sysflag, properties string, UNIQ_KEY, flag, retry counts.
Prepared = tuple[bytes, int, str, str, int, RetryCounts]
# What a batch answer says: status, offset ids, queue, first queue offset, region, trace flag.
BatchAnswer = tuple[SendStatus, list[str], MessageQueue, int, str, bool]
BatchDone = Callable[[BatchAnswer | None, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class SendSettings:
    """What a sender needs to know of its producer (or of the Spark sink's options)."""

    group: str
    send_timeout_ms: int = 3000
    create_topic_key: str = c.TBW102
    default_topic_queue_nums: int = 4
    retry_another_broker_when_not_store_ok: bool = False
    # Routes older than this are fetched again before use; None: someone refreshes them (the
    # client instance every poll_name_server_interval_ms).
    max_route_age_s: float | None = None

    @classmethod
    def of(cls, cfg: ProducerConfig) -> SendSettings:
        return cls(
            cfg.group,
            cfg.send_timeout_ms,
            cfg.create_topic_key,
            cfg.default_topic_queue_nums,
            cfg.retry_another_broker_when_not_store_ok,
        )


class Failed(NamedTuple):
    """An attempt made before the retry loop: its error (None for a stored answer that was
    not SEND_OK, ``answer``), its broker, and the send's deadline (``time.monotonic()``)."""

    error: BaseException | None
    broker: str
    deadline: float
    answer: Any = None


class Sender:
    def __init__(
        self,
        routes: TopicRoutes,
        remoting: RemotingClient,
        settings: SendSettings,
        fault: FaultStrategy | None = None,
        hooks: SendHooks | None = None,
        *,
        topics: set[str] | None = None,
    ) -> None:
        self.routes = routes
        self.remoting = remoting
        self.settings = settings
        self.fault = fault or FaultStrategy(False, (0,), (0,))
        self.hooks = hooks or SendHooks(settings.group)
        # Topics sent to: the client instance keeps their routes fresh.
        self.topics: set[str] = topics if topics is not None else set()
        self.closed = False
        self._group = settings.group
        self._create_key = settings.create_topic_key
        self._queue_nums_text = str(settings.default_topic_queue_nums)
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- requests and queues ------------------------------------------------------------------

    def fields(
        self, topic: str, queue_id: int, sysflag: int, flag: int, properties: str | None, retry: RetryCounts,
        batch: bool,
    ) -> tuple[str | int | None, ...]:
        """``SendMessageRequestHeaderV2``'s values in ``SEND_KEYS`` order, None for the fields
        left out (no properties, not a batch, no retry counts: those only for a message sent
        to a retry topic).

        Hot path: no ``Header`` object and no extFields dict; ``codec.fields_frame`` writes
        them, ``codec.request_command`` makes a command of them.
        """
        if retry is None:
            return (
                self._group, topic, self._create_key, self._queue_nums_text, queue_id, sysflag,
                int(time.time() * 1000), flag, properties or None, None, None, "true" if batch else None,
            )
        return (
            self._group, topic, self._create_key, self._queue_nums_text, queue_id, sysflag,
            int(time.time() * 1000), flag, properties or None, retry[0], retry[1], "true" if batch else None,
        )

    def batch_request(self, topic: str, queue_id: int, body: bytes | memoryview) -> RemotingCommand:
        """The SEND_BATCH_MESSAGE request of an encoded batch body (written as header and
        body, without copying the body)."""
        values = self.fields(topic, queue_id, 0, 0, None, None, True)
        return request_command(SEND_BATCH, SEND_KEYS, values, body)

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """The topic's writable queues (its route fetched on first use); ``NoRouteError``."""
        info = self.routes.publish_infos.get(topic)
        if info is not None and info.queues and topic in self.topics and self.settings.max_route_age_s is None:
            return info
        self.topics.add(topic)
        s = self.settings
        return await self.routes.publish_info(topic, s.create_topic_key, s.default_topic_queue_nums, s.max_route_age_s)

    def select(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        info.counter += 1
        if not self.fault.enabled and last_broker is None:
            queues = info.queues
            return queues[info.counter % len(queues)]
        return self.fault.select(info.queues, info.counter, last_broker, int(time.time() * 1000))

    async def refresh_route(self, topic: str) -> None:
        s = self.settings
        try:
            await self.routes.update(
                topic, default_topic=s.create_topic_key, default_queue_nums=s.default_topic_queue_nums
            )
        except ApogeeError as exc:
            log.debug("route refresh of %s failed: %s", topic, exc)

    def _report(self, broker: str, start: float, failed: bool) -> None:
        """Tell the fault strategy how an attempt on ``broker`` went."""
        if self.fault.enabled:
            self.fault.update_fault_item(
                broker, int((time.perf_counter() - start) * 1000), failed, int(time.time() * 1000)
            )

    # --- the retry loop -----------------------------------------------------------------------

    def send_message(
        self,
        topic: str,
        prepared: Prepared,
        timeout_ms: int,
        retries: int,
        *,
        queue: MessageQueue | None = None,
        mode: str = "SYNC",
        msg: Message | None = None,
        first: Failed | None = None,
        code: int = SEND_V2,
    ) -> Coroutine[Any, Any, SendResult]:
        """One message, in up to ``1 + retries`` attempts within ``timeout_ms``; to ``queue``
        only, when given; as request ``code`` (SEND_MESSAGE_V2, or SEND_REPLY_MESSAGE_V2 for a
        reply).  Await it for the ``SendResult``; raises the last attempt's error."""
        messages = [msg] if msg is not None and self.hooks.hooks else None
        return self._send(topic, queue, prepared, None, (), timeout_ms, retries, mode, messages, first, code)

    def send_batch(
        self,
        topic: str,
        body: bytes | memoryview,
        uniqs: Sequence[str],
        timeout_ms: int,
        retries: int,
        *,
        queue: MessageQueue | None = None,
        mode: str = "BATCH",
        messages: Sequence[Message] | None = None,
        first: Failed | None = None,
    ) -> Coroutine[Any, Any, BatchAnswer]:
        """One encoded batch body of ``len(uniqs)`` messages, as ``send_message``; await it for
        the answer (``api.send_results(uniqs, *answer)`` gives every message's ``SendResult``)."""
        if not self.hooks.hooks:
            messages = None
        return self._send(topic, queue, None, body, uniqs, timeout_ms, retries, mode, messages, first)

    async def _send(
        self,
        topic: str,
        queue: MessageQueue | None,
        prepared: Prepared | None,
        body: bytes | memoryview | None,
        uniqs: Sequence[str],
        timeout_ms: int,
        retries: int,
        mode: str,
        messages: Sequence[Message] | None,
        first: Failed | None,
        code: int = SEND_V2,
    ) -> Any:
        total = 1 + max(0, retries)
        error: BaseException | None = None
        stored: Any = None  # the last stored answer that was not SEND_OK
        last_broker: str | None = None
        made = 0
        if first is None:
            deadline = time.monotonic() + timeout_ms / 1000
        else:
            deadline, last_broker, made, error, stored = first.deadline, first.broker, 1, first.error, first.answer
            if error is not None:
                await self._after_error(error, topic, made < total)
        while made < total:
            mq: MessageQueue | None = None
            try:
                if queue is None:
                    mq = self.select(await self.publish_info(topic), last_broker)
                else:
                    mq = queue
                    self.topics.add(topic)
                pause = pause_before(error is not None and mq.broker_name == last_broker, made)
                if pause:
                    await asyncio.sleep(pause)
                remaining = int((deadline - time.monotonic()) * 1000)
                if remaining <= 0:
                    break
                made += 1
                addr = self.routes.master_addr(mq.broker_name) or await self.routes.find_master_addr(
                    mq.broker_name, topic
                )
                # The attempt: its request and answer, hooks around them, the fault strategy told.
                ctxs = self.hooks.before(messages, mode, mq, addr) if messages else None
                start = time.perf_counter()
                answer: Any
                try:
                    if prepared is not None:
                        values = self.fields(topic, mq.queue_id, prepared[1], prepared[4], prepared[2], prepared[5],
                                             False)
                        resp = await self.remoting.invoke_fields(addr, code, SEND_KEYS, values, prepared[0], remaining)
                        answer = send_result(resp, mq, prepared[3])
                    else:
                        assert body is not None
                        resp = await self.remoting.invoke(addr, self.batch_request(topic, mq.queue_id, body), remaining)
                        answer = send_response_fields(resp, mq, len(uniqs))
                except BaseException as exc:
                    self._attempted(mq, start, ctxs, None, exc, uniqs)
                    raise
                if ctxs or self.fault.enabled:
                    self._attempted(mq, start, ctxs, answer, None, uniqs)
            except ApogeeError as exc:
                if mq is None:
                    made += 1  # the route could not be had: that attempt failed too
                else:
                    last_broker = mq.broker_name
                error = exc
                await self._after_error(exc, topic, made < total)
                continue
            last_broker = mq.broker_name
            status = answer.status if prepared is not None else answer[0]
            if after_stored(status is SendStatus.SEND_OK, self.settings.retry_another_broker_when_not_store_ok,
                            total - made):
                stored, error = answer, None
                continue
            return answer
        if stored is not None:
            return stored
        if error is None:
            raise RequestTimeoutError(f"sending to {topic!r} timed out after {timeout_ms} ms ({made} attempts)")
        error.add_note(f"send to topic {topic!r} failed after {made} attempt(s)")
        raise error

    async def _after_error(self, error: BaseException, topic: str, more: bool) -> None:
        """Raise ``error`` when another attempt cannot help; refresh the route when it is
        stale and another attempt will follow (``more``)."""
        kind = classify(error)
        if kind is Retry.RAISE:
            raise error
        if kind is Retry.REFRESH_ROUTE and more:
            await self.refresh_route(topic)

    def _attempted(
        self,
        mq: MessageQueue,
        start: float,
        ctxs: list[SendContext] | None,
        answer: Any,
        exc: BaseException | None,
        uniqs: Sequence[str],
    ) -> None:
        """After an attempt: the fault strategy and the hooks hear how it went."""
        self._report(mq.broker_name, start, exc is not None)
        if ctxs:
            if exc is not None:
                results = None
            elif isinstance(answer, SendResult):
                results = [answer]
            else:
                results = send_results(list(uniqs), *answer)
            self.hooks.after(ctxs, results, exc, start)

    # --- auto-batches: the first attempt without a coroutine ----------------------------------

    def send_batch_soon(self, batch: Batch, body: bytes | memoryview, retries: int, done: BatchDone) -> None:
        """Send an auto-batch; ``done(answer, error)`` runs once it is settled.

        When the topic's route and the broker's connection are at hand, the first attempt is
        written at once and its answer handled in the connection's callback: no coroutine
        per batch.  Otherwise, and after a failure the rule retries, the send goes on in the
        retry loop, in a task.
        """
        topic = batch.topic
        mq = batch.queue
        if mq is None:
            info = self.routes.publish_infos.get(topic)
            if info is None or not info.queues:
                self._spawn_batch(batch, body, retries, None, done)
                return
            mq = self.select(info, None)
        addr = self.routes.master_addr(mq.broker_name)
        conn = self.remoting.connection_if_open(addr) if addr is not None else None
        if conn is None or addr is None:
            self._spawn_batch(batch, body, retries, None, done)
            return
        timeout_ms = self.settings.send_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        req = self.batch_request(topic, mq.queue_id, body)
        hooks = self.hooks
        ctxs = hooks.before(batch.messages, "ASYNC", mq, addr) if hooks.hooks and batch.messages else None
        start = time.perf_counter()
        sent_to = mq

        def answered(resp: RemotingCommand | None, err: BaseException | None) -> None:
            if err is None and resp is not None:
                try:
                    answer = send_response_fields(resp, sent_to, len(batch.uniqs))
                except RemoteError as exc:
                    err = exc
                else:
                    self._report(sent_to.broker_name, start, False)
                    if ctxs:
                        hooks.after(ctxs, send_results(batch.uniqs, *answer), None, start)
                    if not self.closed and after_stored(
                        answer[0] is _SEND_OK, self.settings.retry_another_broker_when_not_store_ok, retries
                    ):
                        first = Failed(None, sent_to.broker_name, deadline, answer)
                        self._spawn_batch(batch, body, retries, first, done)
                        return
                    done(answer, None)
                    return
            assert err is not None
            self._report(sent_to.broker_name, start, True)
            if ctxs:
                hooks.after(ctxs, None, err, start)
            remaining_ms = (deadline - time.monotonic()) * 1000
            if not self.closed and after_failure(err, retries, remaining_ms) is not Retry.RAISE:
                log.debug("batch of %d to %s failed (%s); retrying", len(batch.futures), sent_to, err)
                self._spawn_batch(batch, body, retries, Failed(err, sent_to.broker_name, deadline), done)
                return
            done(None, err)

        try:
            conn.invoke_callback(req, timeout_ms, answered)
        except ApogeeError as exc:
            answered(None, exc)

    def _spawn_batch(
        self, batch: Batch, body: bytes | memoryview, retries: int, first: Failed | None, done: BatchDone
    ) -> None:
        # A failed attempt may still have bytes of the body queued on its connection: the
        # body's pool buffer (accumulator.Batch.wire) is never reused.
        batch.wire = None
        async def run() -> None:
            try:
                answer = await self.send_batch(
                    batch.topic, body, batch.uniqs, self.settings.send_timeout_ms, retries,
                    queue=batch.queue, mode="ASYNC", messages=batch.messages, first=first,
                )
            except asyncio.CancelledError:
                done(None, ClientStateError("the producer shut down before the batch was sent"))
                raise
            except BaseException as exc:
                done(None, exc)
            else:
                done(answer, None)

        self.spawn(run())

    # --- oneway -------------------------------------------------------------------------------

    async def send_oneway(self, msg: Message, mq: MessageQueue, prepared: Prepared, code: int = SEND_V2) -> None:
        """One attempt, no answer (RocketMQ does not retry oneway sends either)."""
        addr = await self.routes.find_master_addr(mq.broker_name, mq.topic)
        ctxs = self.hooks.before([msg], "ONEWAY", mq, addr) if self.hooks.hooks else None
        start = time.perf_counter()
        values = self.fields(mq.topic, mq.queue_id, prepared[1], prepared[4], prepared[2], prepared[5], False)
        try:
            await self.remoting.invoke_oneway(addr, request_command(code, SEND_KEYS, values, prepared[0]))
        except BaseException as exc:
            if ctxs:
                self.hooks.after(ctxs, None, exc, start)
            raise
        if ctxs:
            self.hooks.after(ctxs, None, None, start)

    # --- background sends ---------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop: sends still retrying in the background fail with ``ClientStateError``."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
