"""Auto-batching (aiokafka's MessageAccumulator): async sends to one topic coalesced into
SEND_BATCH_MESSAGE bodies, one request and one broker round trip for up to
``batch_max_messages`` messages, each message still getting its own result.

A message is encoded into its open batch as it arrives (``native.batch_append``, or
``encode_batch_item`` in Python): no per-message object waits in the batch, and flushing is
one copy, into a reused buffer for a large batch (``buffer_pool``; ``recycle`` gives it
back).  A batch leaves when it is full or when its linger ends (``batch_linger_ms``; 0: the
next loop iteration); ``ready(batch, body)`` hands it to the sender.

No I/O and no event loop here: the producer gives ``schedule(delay_s, fn, key)`` (the loop's
``call_soon``/``call_later``) and ``ready``, so the batching rules are tested without sockets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from apogee.client.producer.buffer_pool import BufferPool
from apogee.client.producer.validation import properties_text
from apogee.client.types import SendResult
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.message import Message, MessageQueue
from apogee.common.message_codec import encode_batch_item
from apogee.errors import MessageValidationError

if TYPE_CHECKING:  # the producer hands its generator over: no lock or clock is imported here
    from apogee.common.uniq_id import UniqIdGenerator

BatchKey = str | tuple[str, MessageQueue]  # the topic, or (topic, queue) for an explicit queue


class Future(Protocol):
    """The part of ``asyncio.Future[SendResult]`` a batch uses."""

    def done(self) -> bool: ...
    def set_result(self, result: SendResult, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


def batchable(msg: Message, compress_over: int) -> bool:
    """May ``msg`` travel in a batch?  Not with a delay level or to a retry topic (the broker
    refuses both in batches), not as a transaction half or a reply (MSG_TYPE: a reply travels
    as SEND_REPLY_MESSAGE_V2), not when its body is to be compressed (batch items travel
    uncompressed).  The producer's inline fast path checks a narrower condition and may only
    decline more."""
    props = msg.properties
    return (
        len(msg.body) < compress_over
        and c.DELAY not in props
        and c.TRAN_MSG not in props
        and c.PROPERTY_MESSAGE_TYPE not in props
        and not msg.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX)
    )


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


class Batch:
    """Messages waiting to leave in one SEND_BATCH_MESSAGE request."""

    __slots__ = ("topic", "queue", "body", "futures", "uniqs", "handle", "messages", "wire")

    def __init__(self, topic: str, queue: MessageQueue | None) -> None:
        self.topic = topic
        self.queue = queue
        self.body = bytearray()  # the batch body, encoded as messages arrive
        self.futures: list[Any] = []  # one Future per message
        self.uniqs: list[str] = []
        self.messages: list[Message] = []  # kept only while send hooks are registered
        self.handle: Cancellable | None = None
        # The pool buffer its request body is in, until the producer gives it back (None:
        # none, or it must not be reused: Sender._spawn_batch drops it).
        self.wire: bytearray | None = None

    def fail(self, exc: BaseException) -> None:
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(exc)


class Accumulator:
    """The open batches of one producer, by topic (or topic and explicit queue)."""

    def __init__(
        self,
        max_messages: int,
        max_bytes: int,
        linger_s: float,
        schedule: Callable[[float, Callable[[BatchKey], None], BatchKey], Cancellable],
        ready: Callable[[Batch, bytes | memoryview], None],
        hooks: list[Any],
    ) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.linger_s = linger_s
        self._schedule = schedule
        self._ready = ready
        self._hooks = hooks  # the producer's hook list: while it is not empty, batches keep messages
        self.ids: UniqIdGenerator | None = None  # set when the producer starts
        self.pending: dict[BatchKey, Batch] = {}
        self.buffers = BufferPool()

    def append(self, msg: Message, fut: Future, queue: MessageQueue | None) -> None:
        """Add ``msg`` (with its UNIQ_KEY) to its batch; ``MessageValidationError`` when its
        properties cannot go out, and then nothing was added."""
        key: BatchKey = msg.topic if queue is None else (msg.topic, queue)
        batch = self.pending.get(key)
        new = batch is None
        if batch is None:
            batch = Batch(msg.topic, queue)
        ids = self.ids
        assert ids is not None
        uniq = None
        if native is not None and msg.properties.__class__ is dict and msg.body.__class__ is bytes:
            uniq = native.batch_append(batch.body, msg.flag, msg.body, msg.properties,
                                       ids.prefix, ids.start_ms, ids.next_start_ms, next(ids.counter))
        if uniq is None:
            uniq = self.append_py(batch.body, msg)  # may refuse the message: nothing was added
        if new:
            self.pending[key] = batch
            batch.handle = self._schedule(self.linger_s, self.flush_key, key)
        batch.futures.append(fut)
        batch.uniqs.append(uniq)
        self.appended(key, batch, msg)

    def appended(self, key: BatchKey, batch: Batch, msg: Message) -> None:
        """After a message joined ``batch``: keep it for the hooks, send the batch once full."""
        if self._hooks:
            batch.messages.append(msg)
        if len(batch.futures) >= self.max_messages or len(batch.body) >= self.max_bytes:
            self.flush_key(key)

    def append_py(self, body: bytearray, msg: Message) -> str:
        """Give ``msg`` its UNIQ_KEY and add its batch item to ``body`` (the reference of
        native.batch_append, and the path that explains a refusal)."""
        assert self.ids is not None
        uniq = self.ids.ensure(msg.properties)
        props = properties_text(msg)
        try:
            body += encode_batch_item(msg.flag, msg.body, props)
        except ValueError as exc:
            raise MessageValidationError(f"message to {msg.topic}: {exc}") from None
        return uniq

    def flush_key(self, key: BatchKey) -> None:
        batch = self.pending.pop(key, None)
        if batch is None:
            return
        if batch.handle is not None:
            batch.handle.cancel()
        body, batch.wire = self.buffers.take(batch.body)
        batch.body = bytearray()
        self._ready(batch, body)

    def recycle(self, batch: Batch) -> None:
        """The broker answered the batch's only attempt: its body's buffer (if any) may carry
        another batch."""
        wire = batch.wire
        if wire is not None:
            batch.wire = None
            self.buffers.give(wire)

    def flush_all(self) -> None:
        for key in list(self.pending):
            self.flush_key(key)
