"""Writing DataFrames into topics: batch ``df.write`` and streaming ``writeStream``.

Each Spark task sends its own rows straight to the brokers from the executor (Arrow batches
in, SEND_BATCH_MESSAGE requests out, several in flight), through the client's sender
(``apogee.client.producer.sender``): the producer's route cache, request header and retry
rule.  What stays here is the columnar part: rows to batch bodies with Arrow kernels.  Rows choose their queue by an
explicit ``queue_id`` (optionally with ``broker``), by ``sharding_key`` (RocketMQ's hash
selector, so rows with one key stay in one queue, in order), or round robin (runs of
consecutive rows per queue, one batch request each).

Delivery guarantees:

* ``atLeastOnce`` (batch writes; streaming with ``deliveryGuarantee=atLeastOnce``): a task
  finishes when every send was acknowledged; a failed task is retried by Spark and may send
  its rows again.
* ``exactlyOnce`` (streaming default): see ``apogee.spark.txn``: the tasks send transactional
  half messages that the driver's commit of the micro-batch makes visible, once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from apogee.client.producer.sender import Prepared, Sender, SendSettings
from apogee.client.selectors import java_hash_code
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.common.message_codec import BATCH_ITEM_OVERHEAD, encode_batch, encode_batch_columns
from apogee.common.uniq_id import UniqIdGenerator, default_generator
from apogee.errors import ApogeeError, RemoteError
from apogee.spark import runtime
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.options import SinkOptions
from apogee.spark.schema import SYSTEM_PROPERTIES

log = logging.getLogger("apogee.spark.writer")

T = TypeVar("T")

SHARDING_KEY_PROPERTY = "__SHARDINGKEY"
ROUTE_TTL_S = 30.0  # the sink's routes are fetched again when older (no periodic refresh here)
SEND_RETRIES = 2  # attempts after the first, as a producer's retry_times_when_send_failed
DEFAULT_TOPIC_QUEUE_NUMS = 8  # queues of a topic the first send auto-creates

_INTS = (IntegerType, LongType, ShortType)


def _column(schema: StructType, names: tuple[str, ...]) -> str | None:
    found = [n for n in names if n in schema.names]
    if len(found) > 1:
        raise ApogeeSparkError(f"give only one of the columns {' and '.join(found)}")
    return found[0] if found else None


@dataclass(frozen=True)
class SinkColumns:
    body: str
    topic: str | None
    keys: str | None
    tags: str | None
    properties: str | None
    queue_id: str | None
    broker: str | None
    sharding_key: str | None
    delay_level: str | None


def check_sink_schema(schema: StructType, opts: SinkOptions) -> SinkColumns:
    """The columns to write from, checked against what the sink understands."""
    allowed = {
        "body",
        "value",
        "topic",
        "keys",
        "key",
        "tags",
        "properties",
        "headers",
        "queue_id",
        "broker",
        "sharding_key",
        "delay_level",
    }
    extra = [n for n in schema.names if n not in allowed]
    if extra:
        raise ApogeeSparkError(
            f"the apogee sink does not know the column(s) {', '.join(extra)}; it writes body (or value), topic, keys "
            "(or key), tags, properties (or headers), queue_id, broker, sharding_key and delay_level"
        )
    types = {f.name: f.dataType for f in schema.fields}
    body = _column(schema, ("body", "value"))
    if body is None:
        raise ApogeeSparkError("the apogee sink needs a body (or value) column, binary or string")

    def need(name: str | None, ok: tuple[type, ...], what: str) -> None:
        if name is not None and not isinstance(types[name], ok):
            raise ApogeeSparkError(f"column {name} must be {what}, not {types[name].simpleString()}")

    need(body, (BinaryType, StringType), "binary or string")
    topic = "topic" if "topic" in schema.names else None
    need(topic, (StringType,), "string")
    if topic is None and not opts.topic:
        raise ApogeeSparkError("give the target topic: option topic, or a topic column")
    keys = _column(schema, ("keys", "key"))
    if keys is not None and not (
        isinstance(types[keys], (StringType, BinaryType))
        or (isinstance(types[keys], ArrayType) and isinstance(types[keys].elementType, StringType))  # type: ignore[attr-defined]
    ):
        raise ApogeeSparkError(f"column {keys} must be string, binary or array<string>")
    tags = "tags" if "tags" in schema.names else None
    need(tags, (StringType,), "string")
    props = _column(schema, ("properties", "headers"))
    if props is not None:
        kind = types[props]
        ok = (
            isinstance(kind, MapType)
            and isinstance(kind.keyType, StringType)
            and isinstance(kind.valueType, (StringType, BinaryType))
        )
        ok = ok or (
            isinstance(kind, ArrayType)
            and isinstance(kind.elementType, StructType)
            and {"key", "value"} <= set(kind.elementType.names)
        )
        if not ok:
            raise ApogeeSparkError(
                f"column {props} must be map<string,string> or Kafka's array<struct<key:string,value:binary>>"
            )
    need("queue_id" if "queue_id" in schema.names else None, _INTS, "an integer")
    need("broker" if "broker" in schema.names else None, (StringType,), "string")
    need("sharding_key" if "sharding_key" in schema.names else None, (StringType, *_INTS), "string or integer")
    need("delay_level" if "delay_level" in schema.names else None, _INTS, "an integer")
    if "queue_id" in schema.names and "sharding_key" in schema.names:
        raise ApogeeSparkError("give only one of the columns queue_id and sharding_key")
    return SinkColumns(
        body=body,
        topic=topic,
        keys=keys,
        tags=tags,
        properties=props,
        queue_id="queue_id" if "queue_id" in schema.names else None,
        broker="broker" if "broker" in schema.names else None,
        sharding_key="sharding_key" if "sharding_key" in schema.names else None,
        delay_level="delay_level" if "delay_level" in schema.names else None,
    )


@dataclass
class SentCommit(WriterCommitMessage):
    """What one task reports to the driver: how many rows it sent (and, for exactly-once,
    the half messages the driver's commit must decide)."""

    partition: int
    count: int
    task: str = ""
    halves: list[tuple[str, str, int]] = field(default_factory=list)  # (broker addr, offset msg id, half offset)
    skipped: bool = False


# --- sending ----------------------------------------------------------------------------------


def sink_sender(opts: SinkOptions) -> Sender:
    """The client's sender for this sink: the process's route cache and connections, the
    producer's retry rule, the sink's group and timeouts."""
    rt = runtime.runtime()
    settings = SendSettings(
        opts.producer_group,
        opts.send_timeout_ms,
        c.TBW102,
        DEFAULT_TOPIC_QUEUE_NUMS,
        max_route_age_s=ROUTE_TTL_S,
    )
    api = rt.api_for(opts.tls, opts.credentials)
    return Sender(rt.routes(opts.namesrv, opts.request_timeout_ms, opts.tls, opts.credentials), api.remoting, settings)


async def sent(send: Awaitable[T], topic: str) -> T:
    """``send``'s outcome, its failure as the sink's one-line error."""
    try:
        return await send
    except ApogeeSparkError:
        raise
    except RemoteError as exc:
        raise ApogeeSparkError(f"the broker refused a send to {topic!r}: {exc}") from None
    except ApogeeError as exc:
        raise ApogeeSparkError(f"sending to {topic!r} failed: {exc}") from None


class _QueueBuffer:
    __slots__ = ("items", "uniqs", "nbytes", "tail")

    def __init__(self) -> None:
        self.items: list[tuple[int, bytes, str]] = []
        self.uniqs: list[str] = []
        self.nbytes = 0
        self.tail: asyncio.Future[None] | None = None  # the previous send to this queue (order)


class BulkIds:
    """UNIQ_KEYs by the thousand, from the process's one generator
    (``uniq_id.default_generator``): its reserved blocks (one clock read each) turned into
    an Arrow string column by numpy, with no Python work per id."""

    def __init__(self, ids: UniqIdGenerator | None = None) -> None:
        self._ids = ids or default_generator()

    def take(self, n: int) -> list[str]:
        return self.take_array(n).to_pylist()  # type: ignore[no-any-return]

    def take_array(self, n: int) -> pa.Array:
        """``n`` new ids as an Arrow string array."""
        text = np.empty((n, 32), np.uint8)
        at = 0
        for head, first, k in self._ids.reserve(n):
            text[at : at + k, :28] = np.frombuffer(head.encode("ascii"), np.uint8)
            text[at : at + k, 28:] = _hex4()[first : first + k].view(np.uint8).reshape(k, 4)
            at += k
        offsets = np.arange(0, (n + 1) * 32, 32, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


_HEX4: Any = None


def _hex4() -> Any:
    """The 4-digit upper-case hex text of 0..65535 (numpy ``S4``), built once per process."""
    global _HEX4
    if _HEX4 is None:
        _HEX4 = np.array([f"{i:04X}".encode("ascii") for i in range(0x10000)], dtype="S4")
    return _HEX4


class PartitionWriter:
    """Turns the rows of one task into messages and hands them to the client's sender; lives
    on the runtime loop (``add`` and ``finish`` are coroutines).  What is left here is the
    sink's own part: rows to batch bodies column by column, the queue of each row, order
    per queue, and how many requests are in flight.  ``half_properties`` turns every message
    into a transactional half message (exactly-once); otherwise messages go out in batches."""

    def __init__(
        self, opts: SinkOptions, columns: SinkColumns, *, half_properties: dict[str, str] | None = None
    ) -> None:
        self.opts = opts
        self.columns = columns
        self.sender = sink_sender(opts)
        self.half_properties = half_properties
        self.count = 0
        self.halves: list[tuple[str, str, int]] = []
        self._buffers: dict[tuple[str, MessageQueue], _QueueBuffer] = {}
        self._inflight = asyncio.Semaphore(opts.max_inflight_requests)
        # Sends started and not finished, at most twice the requests in flight: waiting on a
        # semaphore costs O(1) per send (``asyncio.wait`` over the pending set costs O(window)).
        self._window = asyncio.Semaphore(2 * opts.max_inflight_requests)
        self._pending: set[asyncio.Future[Any]] = set()
        self._error: BaseException | None = None
        self._rr = random.randrange(1 << 16)
        self._ids = default_generator()
        self._bulk = BulkIds(self._ids)

    # --- rows to messages ---------------------------------------------------------------------

    async def add(self, batch: pa.RecordBatch) -> None:
        if self._error is not None:
            raise self._error
        cols = self.columns
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names

        def col(name: str | None) -> list[Any] | None:
            return batch.column(names.index(name)).to_pylist() if name is not None else None

        if cols.topic is None and cols.delay_level is None and cols.queue_id is None and cols.sharding_key is None:
            if self.half_properties is None:
                await self._add_round_robin(batch, col)
            else:
                await self._add_halves(batch, col)
            return
        bodies = col(cols.body)
        assert bodies is not None
        topics = col(cols.topic)
        keys = col(cols.keys)
        tags = col(cols.tags)
        props = col(cols.properties)
        queue_ids = col(cols.queue_id)
        brokers = col(cols.broker)
        shard = col(cols.sharding_key)
        delays = col(cols.delay_level)
        default_topic = self.opts.topic
        ordered = queue_ids is not None or shard is not None
        routes: dict[str, list[MessageQueue]] = {}
        half = self.half_properties
        next_id = self._ids.next_id
        for i in range(n):
            topic = (topics[i] if topics is not None else None) or default_topic
            if not topic:
                raise ApogeeSparkError("a row has no topic (null topic column and no topic option)")
            body = bodies[i]
            if body is None:
                raise ApogeeSparkError("a row has a null body")
            if isinstance(body, str):
                body = body.encode("utf-8")
            if not body:
                raise ApogeeSparkError("a row has an empty body (RocketMQ refuses empty messages)")
            queues = routes.get(topic)
            if queues is None:
                queues = routes[topic] = await self._queues(topic)
            uniq = next_id()
            parts = [f"UNIQ_KEY\x01{uniq}"]
            tag = tags[i] if tags is not None else None
            if tag:
                parts.append(f"TAGS\x01{_clean(tag, 'tags')}")
            key = keys[i] if keys is not None else None
            if key is not None:
                key = _keys_text(key)
                if key:
                    parts.append(f"KEYS\x01{key}")
            if props is not None and props[i]:
                parts.append(_user_properties(props[i]))
            if shard is not None and shard[i] is not None:
                mq = queues[abs(java_hash_code(shard[i])) % len(queues)]
                parts.append(f"{SHARDING_KEY_PROPERTY}\x01{_clean(str(shard[i]), 'sharding_key')}")
            elif queue_ids is not None and queue_ids[i] is not None:
                mq = _explicit_queue(topic, queues, queue_ids[i], brokers[i] if brokers is not None else None)
            else:
                self._rr += 1
                mq = queues[self._rr % len(queues)]
            level = delays[i] if delays is not None else None
            if half is not None:
                parts.extend(f"{k}\x01{v}" for k, v in half.items())
                if level:
                    parts.append(f"DELAY\x01{int(level)}")
                await self._send_single(topic, mq, body, "\x02".join(parts), uniq, half=True)
            elif level:
                parts.append(f"DELAY\x01{int(level)}")
                await self._send_single(topic, mq, body, "\x02".join(parts), uniq, half=False)
            else:
                self._append(topic, mq, body, "\x02".join(parts), uniq, ordered)
            self.count += 1

    def _columns(self, batch: pa.RecordBatch, col: Any) -> tuple[pa.Array, pa.Array, pa.Array]:
        """Bodies (binary, checked), new UNIQ_KEYs and each row's properties string (UNIQ_KEY,
        TAGS, KEYS, user properties) of a batch, built by Arrow kernels; Python runs per row
        only for binary or list ``keys`` and for ``properties``."""
        cols = self.columns
        names = batch.schema.names
        bodies = batch.column(names.index(cols.body))
        if not pa.types.is_binary(bodies.type):
            bodies = bodies.cast(pa.binary())
        if bodies.null_count:
            raise ApogeeSparkError("a row has a null body")
        if pc.min(pc.binary_length(bodies)).as_py() == 0:
            raise ApogeeSparkError("a row has an empty body (RocketMQ refuses empty messages)")
        ids = self._bulk.take_array(batch.num_rows)
        parts: list[Any] = [pc.binary_join_element_wise("UNIQ_KEY\x01", ids, "")]
        if cols.tags is not None:
            parts.append(_property_part(c.TAGS, batch.column(names.index(cols.tags)), "tags"))
        if cols.keys is not None:
            keys = batch.column(names.index(cols.keys))
            if not pa.types.is_string(keys.type):
                keys = pa.array([_keys_text(k) if k is not None else None for k in keys.to_pylist()], pa.string())
            parts.append(_property_part(c.KEYS, keys, "keys"))
        user = col(cols.properties)
        if user is not None:
            extra = pa.array([_user_properties(u) if u else "" for u in user], pa.string())
            parts.append(pc.if_else(pc.equal(extra, ""), "", pc.binary_join_element_wise("\x02", extra, "")))
        return bodies, ids, pc.binary_join_element_wise(*parts, "")

    async def _add_halves(self, batch: pa.RecordBatch, col: Any) -> None:
        """Rows of one topic as transactional half messages, round robin over the queues.
        The broker takes half messages one per request only, so the requests are pipelined
        (``_send_single``); properties are built column-wise and the sink's transaction tag
        is joined once per batch."""
        assert self.half_properties is not None
        bodies, ids, props = self._columns(batch, col)
        half = "".join(f"\x02{k}\x01{v}" for k, v in self.half_properties.items())
        texts = pc.binary_join_element_wise(props, half, "").to_pylist()
        topic = self.opts.topic
        assert topic is not None
        queues = await self._queues(topic)
        nq = len(queues)
        for body, text, uniq in zip(bodies.to_pylist(), texts, ids.to_pylist(), strict=True):
            self._rr += 1
            await self._send_single(topic, queues[self._rr % nq], body, text, uniq, half=True)
            self.count += 1

    async def _add_round_robin(self, batch: pa.RecordBatch, col: Any) -> None:
        """Rows of one topic spread over the queues in runs of consecutive rows, one batch
        request per run: column at a time, the batch bodies built by Arrow kernels
        (``message_codec.encode_batch_columns``), no Python work per row unless ``keys`` is
        binary or a list, or ``properties`` is set."""
        n = batch.num_rows
        bodies, ids, props = self._columns(batch, col)
        props = props.cast(pa.binary())
        try:
            items: Any = encode_batch_columns(bodies, props)
        except ValueError as exc:
            raise ApogeeSparkError(f"a row's properties are too long: {exc}") from None
        ends = np.frombuffer(items.buffers()[1], np.int32)[items.offset : items.offset + n + 1].astype(np.int64)
        data = memoryview(items.buffers()[2])
        topic = self.opts.topic
        assert topic is not None
        queues = await self._queues(topic)
        nq = len(queues)
        run = max(1, min(self.opts.batch_max_messages, -(-n // nq)))
        for first in range(0, n, run):
            mq = queues[self._rr % nq]
            self._rr += 1
            for lo, hi in _cuts(ends, first, min(n, first + run), self.opts.batch_max_bytes):
                uniqs = ids.slice(lo, hi - lo).to_pylist()
                fut = asyncio.ensure_future(self._send_batch(topic, mq, data[ends[lo] : ends[hi]], uniqs, None))
                self._track(fut)
                while len(self._pending) >= self.opts.max_inflight_requests:  # backpressure
                    await asyncio.wait(list(self._pending), return_when=asyncio.FIRST_COMPLETED)
        self.count += n

    async def _queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues, from the route cache (``sent`` explains a failure)."""
        return (await sent(self.sender.publish_info(topic), topic)).queues

    def _append(self, topic: str, mq: MessageQueue, body: bytes, props: str, uniq: str, ordered: bool) -> None:
        buf = self._buffers.get((topic, mq))
        if buf is None:
            buf = self._buffers[(topic, mq)] = _QueueBuffer()
        buf.items.append((0, body, props))
        buf.uniqs.append(uniq)
        buf.nbytes += BATCH_ITEM_OVERHEAD + len(body) + len(props)
        if len(buf.items) >= self.opts.batch_max_messages or buf.nbytes >= self.opts.batch_max_bytes:
            self._flush(topic, mq, buf, ordered)

    def _flush(self, topic: str, mq: MessageQueue, buf: _QueueBuffer, ordered: bool) -> None:
        if not buf.items:
            return
        body = encode_batch(buf.items)
        uniqs = buf.uniqs
        buf.items, buf.uniqs, buf.nbytes = [], [], 0
        previous = buf.tail if ordered else None
        fut = asyncio.ensure_future(self._send_batch(topic, mq, body, uniqs, previous))
        if ordered:
            buf.tail = fut
        self._track(fut)

    async def _start(self, send: Coroutine[Any, Any, Any]) -> None:
        """Run ``send`` in the background once the window has room (backpressure)."""
        await self._window.acquire()
        fut = asyncio.ensure_future(send)
        fut.add_done_callback(lambda _: self._window.release())
        self._track(fut)

    def _track(self, fut: asyncio.Future[Any]) -> None:
        self._pending.add(fut)

        def done(f: asyncio.Future[Any]) -> None:
            self._pending.discard(f)
            if not f.cancelled() and f.exception() is not None and self._error is None:
                self._error = f.exception()

        fut.add_done_callback(done)

    # --- requests -----------------------------------------------------------------------------

    async def _send_batch(
        self,
        topic: str,
        mq: MessageQueue,
        body: bytes | memoryview,
        uniqs: list[str],
        previous: asyncio.Future[None] | None,
    ) -> None:
        if previous is not None:
            await asyncio.shield(previous)
        timeout = self.opts.send_timeout_ms
        async with self._inflight:
            await sent(self.sender.send_batch(topic, body, uniqs, timeout, SEND_RETRIES, queue=mq), topic)

    async def _send_single(
        self, topic: str, mq: MessageQueue, body: bytes, props: str, uniq: str, *, half: bool
    ) -> None:
        if self._error is not None:
            raise self._error
        prepared: Prepared = (body, c.TRANSACTION_PREPARED_TYPE if half else 0, props, uniq, 0, None)

        async def send() -> None:
            async with self._inflight:
                result = await sent(
                    self.sender.send_message(topic, prepared, self.opts.send_timeout_ms, SEND_RETRIES, queue=mq), topic
                )
            if half:
                addr = self.sender.routes.master_addr(result.message_queue.broker_name) or ""
                self.halves.append((addr, result.offset_msg_id, result.queue_offset))

        await self._start(send())

    async def finish(self) -> None:
        """Send what is buffered and wait until every send is acknowledged."""
        for (topic, mq), buf in list(self._buffers.items()):
            self._flush(topic, mq, buf, buf.tail is not None)
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        if self._error is not None:
            raise self._error

    async def cancel(self) -> None:
        for fut in list(self._pending):
            fut.cancel()
        await asyncio.gather(*list(self._pending), return_exceptions=True)


def _clean(text: str, what: str) -> str:
    if "\x01" in text or "\x02" in text:
        raise ApogeeSparkError(f"a {what} value contains a \\x01 or \\x02 character")
    return text


def _property_part(name: str, values: pa.Array, what: str) -> pa.Array:
    """``\x02NAME\x01value`` per row of a string column, ``""`` where it is null or empty."""
    for bad in ("\x01", "\x02"):
        if pc.any(pc.match_substring(values, bad)).as_py():
            raise ApogeeSparkError(f"a {what} value contains a \\x01 or \\x02 character")
    present = pc.fill_null(pc.greater(pc.utf8_length(values), 0), False)
    return pc.if_else(present, pc.binary_join_element_wise(f"\x02{name}\x01", values, ""), "")


def _cuts(ends: Any, first: int, stop: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """Rows ``[first, stop)`` cut into runs whose items (item ``i`` spans ``ends[i]..ends[i+1]``)
    take at most ``max_bytes`` (a run holds at least one row)."""
    lo = first
    while lo < stop:
        hi = int(np.searchsorted(ends, ends[lo] + max_bytes, side="right")) - 1
        hi = min(max(hi, lo + 1), stop)
        yield lo, hi
        lo = hi


def _keys_text(key: Any) -> str:
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    elif isinstance(key, list):
        key = c.KEY_SEPARATOR.join(k for k in key if k)
    return _clean(str(key), "keys")


def _user_properties(value: Any) -> str:
    """``properties`` (map: list of (k, v)) or Kafka ``headers`` (list of {key, value})."""
    parts = []
    for item in value:
        if isinstance(item, dict):
            name, val = item.get("key"), item.get("value")
        else:
            name, val = item
        if val is None or name is None:
            continue
        if isinstance(val, bytes):
            val = val.decode("utf-8", "replace")
        name, val = str(name), str(val)
        if not name or not val:
            continue
        if name in SYSTEM_PROPERTIES:
            raise ApogeeSparkError(
                f"property {name!r} is reserved by RocketMQ; use the tags/keys/delay_level columns instead"
            )
        parts.append(f"{_clean(name, 'property name')}\x01{_clean(val, 'property value')}")
    return "\x02".join(parts)


def _explicit_queue(topic: str, queues: list[MessageQueue], queue_id: int, broker: str | None) -> MessageQueue:
    if broker is not None:
        mq = MessageQueue(topic, broker, int(queue_id))
        if mq not in queues:
            raise ApogeeSparkError(f"queue {queue_id} of broker {broker!r} is not a writable queue of {topic!r}")
        return mq
    if not 0 <= queue_id < len(queues):
        raise ApogeeSparkError(
            f"queue_id {queue_id} is out of range: topic {topic!r} has {len(queues)} writable queues"
        )
    return queues[queue_id]


def send_partition(
    opts: SinkOptions,
    columns: SinkColumns,
    batches: Iterator[pa.RecordBatch],
    half_properties: dict[str, str] | None = None,
) -> tuple[int, list[tuple[str, str, int]]]:
    """Send every row of one task; returns (rows sent, half messages)."""
    rt = runtime.runtime()

    async def make() -> PartitionWriter:
        return PartitionWriter(opts, columns, half_properties=half_properties)

    timeout = opts.send_timeout_ms / 1000 * 4 + 30
    sender = rt.run(make())
    try:
        for batch in batches:
            rt.run(sender.add(batch), timeout)
        rt.run(sender.finish(), timeout * 4)
    except BaseException:
        rt.run(sender.cancel(), 30)
        raise
    return sender.count, sender.halves


def partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class ApogeeWriter(DataSourceArrowWriter):
    """Batch ``df.write``: at least once."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = check_sink_schema(schema, opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        count, _ = send_partition(self.opts, self.columns, iterator)
        return SentCommit(partition_id(), count)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.count for m in messages if isinstance(m, SentCommit))
        log.info("batch write of %d messages committed", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.count for m in messages if isinstance(m, SentCommit))
        log.warning("batch write aborted; %d messages of the successful tasks were sent and stay", sent)


class ApogeeStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink; exactly-once by default (``apogee.spark.txn``), or at least once."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = check_sink_schema(schema, opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.delivery_guarantee == "exactlyOnce":
            from apogee.spark.txn import write_halves

            return write_halves(self.opts, self.columns, iterator)
        count, _ = send_partition(self.opts, self.columns, iterator)
        return SentCommit(partition_id(), count)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.opts.delivery_guarantee == "exactlyOnce":
            from apogee.spark.txn import commit_batch

            commit_batch(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.opts.delivery_guarantee == "exactlyOnce":
            from apogee.spark.txn import abort_batch

            abort_batch(self.opts, messages, batchId)
