"""The trace dispatcher (RocketMQ's AsyncTraceDispatcher): trace records leave the send and
consume paths at once and travel later, many to a message, with a producer of their own.

``append`` is all a traced send or listener call pays beyond building its record: one length
test and a deque append, never a wait.  The queue is bounded (``capacity`` records); when it
is full the record is dropped and counted (``dropped``, logged at WARNING at the 1st, 2nd,
4th, 8th... drop), so a broker that cannot take traces never slows or blocks the client.

Records wait at most ``linger_s`` (RocketMQ's 500 ms), or until ``drain_at`` are queued; then
a task encodes them (``records.BatchBuilder``: bodies up to 118,000 bytes, as RocketMQ's
128,000-byte trace producer flushes 10,000 bytes early; KEYS up to 16,000 characters),
yielding to the event loop every few records so a send waiting on it is not held up, and
sends each message asynchronously.  A failed trace send is logged and counted (``failed_messages``); it
is not retried beyond the producer's own retries.

The producer is a ``Producer`` of group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>``
with instance name ``PID_CLIENT_INNER_TRACE_PRODUCER_<namesrv>`` (RocketMQ's names), so all
trace producers of a process share one client instance and its connections.  It copies the
traced client's NameServers and timers, sends with a 5 s timeout and never traces itself.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging

from apogee.client.config import ClientConfig, ProducerConfig
from apogee.client.producer.producer import Producer
from apogee.client.trace.records import TRACE_TOPIC, BatchBuilder, TraceBatch, TraceRecord
from apogee.client.types import SendResult
from apogee.common import constants as c
from apogee.common.message import Message
from apogee.errors import ApogeeError

log = logging.getLogger("apogee.client.trace")

GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"  # TraceConstants.GROUP_NAME_PREFIX
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"  # TraceConstants.TRACE_INSTANCE_NAME
TRACE_MAX_MESSAGE_SIZE = 128_000  # the trace producer's maxMessageSize
MAX_BODY_BYTES = TRACE_MAX_MESSAGE_SIZE - 10_000
MAX_KEYS_CHARS = 16_000
SEND_TIMEOUT_MS = 5000
CAPACITY = 10_000  # records: an auto-batch of 512 messages appends 512 at once
DRAIN_AT = 512
DRAIN_SLICE = 32  # records encoded between yields to the loop (~3 us each)
LINGER_S = 0.5
CLOSE_TIMEOUT_MS = 5000

_counter = itertools.count(1)


def trace_producer_config(host: ClientConfig, group: str, role: str) -> ProducerConfig:
    """The trace producer's settings, from the traced client's (``role``: PRODUCE or CONSUME)."""
    shared = {f.name: getattr(host, f.name) for f in dataclasses.fields(ClientConfig)}
    shared.update(
        instance_name=f"{TRACE_INSTANCE_NAME}_{host.namesrv_addr}", enable_msg_trace=False, custom_trace_topic=""
    )
    return ProducerConfig(
        **shared,
        group=f"{GROUP_NAME_PREFIX}-{group}-{role}-{next(_counter)}",
        send_timeout_ms=SEND_TIMEOUT_MS,
        max_message_size=TRACE_MAX_MESSAGE_SIZE,
        auto_batch=False,
        max_inflight_messages=64,
    )


class TraceDispatcher:
    def __init__(
        self,
        producer: Producer,
        topic: str = TRACE_TOPIC,
        *,
        capacity: int = CAPACITY,
        drain_at: int = DRAIN_AT,
        linger_s: float = LINGER_S,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.capacity = capacity
        self.drain_at = drain_at
        self.linger_s = linger_s
        self.dropped = 0
        self.sent_messages = 0
        self.failed_messages = 0
        self._queue: collections.deque[TraceRecord] = collections.deque()
        self._builder = BatchBuilder(MAX_BODY_BYTES, MAX_KEYS_CHARS)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = True

    @classmethod
    async def start_for(cls, host: ClientConfig, group: str, role: str) -> TraceDispatcher:
        """A started dispatcher for a client with ``host``'s settings, to its trace topic."""
        producer = Producer(config=trace_producer_config(host, group, role))
        dispatcher = cls(producer, host.custom_trace_topic or TRACE_TOPIC)
        await dispatcher.start()
        return dispatcher

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.producer.start()
        self._closed = False

    async def close(self, timeout_ms: int = CLOSE_TIMEOUT_MS) -> None:
        """Send what is queued, wait for the sends (up to ``timeout_ms``), stop the producer."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self._drain()
        await self.producer.shutdown(timeout_ms)

    # --- the traced paths ---------------------------------------------------------------------

    def append(self, record: TraceRecord) -> bool:
        """Queue ``record`` for sending; False (and counted) when the queue is full or closed."""
        queue = self._queue
        if len(queue) >= self.capacity or self._closed:
            self._drop()
            return False
        queue.append(record)
        if len(queue) >= self.drain_at:
            self._kick()
        elif self._timer is None and (self._task is None or self._task.done()):
            self._timer = self._loop.call_later(self.linger_s, self._lingered)  # type: ignore[union-attr]
        return True

    def _drop(self) -> None:
        self.dropped += 1
        if self.dropped & (self.dropped - 1) == 0:
            log.warning("%d trace record(s) dropped: the queue of %d was full", self.dropped, self.capacity)

    # --- sending ------------------------------------------------------------------------------

    def _lingered(self) -> None:
        self._timer = None
        self._kick()

    def _kick(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        """Send every queued record; records queued meanwhile go too.  Encoding yields to the
        loop every ``DRAIN_SLICE`` records, so a drain delays a send by ~0.1 ms at most."""
        queue, builder = self._queue, self._builder
        done = 0
        while queue:
            batch = builder.add(queue.popleft())
            if batch is not None:
                await self._send(batch)
            done += 1
            if done % DRAIN_SLICE == 0:
                await asyncio.sleep(0)
        last = builder.take()
        if last is not None:
            await self._send(last)

    async def _send(self, batch: TraceBatch) -> None:
        msg = Message(self.topic, batch.body, properties={c.KEYS: c.KEY_SEPARATOR.join(batch.keys)})
        try:
            await self.producer.send_async(msg, self._sent)
        except ApogeeError as exc:
            self._failed(exc)

    def _sent(self, result: SendResult | None, exc: BaseException | None) -> None:
        if exc is not None:
            self._failed(exc)
        else:
            self.sent_messages += 1

    def _failed(self, exc: BaseException) -> None:
        self.failed_messages += 1
        if self.failed_messages & (self.failed_messages - 1) == 0:
            log.warning("%d trace message(s) not sent to %s; last: %s", self.failed_messages, self.topic, exc)
