"""Writing DataFrames into topics: batch ``df.write`` and streaming ``writeStream``.

Each Spark task sends its own rows straight to the brokers from the executor (Arrow batches
in, SEND_BATCH_MESSAGE requests out, several in flight).  Rows choose their queue by an
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
import datetime
import logging
import random
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

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

from apogee.client.api import parse_send_response
from apogee.client.instance import publish_queues
from apogee.client.selectors import java_hash_code
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.common.message_codec import encode_batch, encode_batch_columns
from apogee.common.message_id import UniqIdGenerator
from apogee.errors import ConnectionClosedError, RemoteError, RequestTimeoutError
from apogee.remoting.bodies.route import QueueData, TopicRouteData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import SendMessageRequestHeaderV2
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.options import SinkOptions
from apogee.spark.schema import SYSTEM_PROPERTIES

log = logging.getLogger("apogee.spark.writer")

SHARDING_KEY_PROPERTY = "__SHARDINGKEY"
STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
RETRY_CODES = frozenset({ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_ERROR, ResponseCode.SERVICE_NOT_AVAILABLE})
ROUTE_TTL_S = 30.0
_BORN_PLACEHOLDER = -4242424242  # values no real header holds, to find their extFields keys
_PROPS_PLACEHOLDER = "\x00properties"

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


# --- routes, cached per process ---------------------------------------------------------------

_routes: dict[tuple[str, str], tuple[float, list[MessageQueue], dict[str, str]]] = {}


async def publish_route(cluster: Cluster, topic: str) -> tuple[list[MessageQueue], dict[str, str]]:
    """Writable queues of ``topic`` and each broker's master address (cached ``ROUTE_TTL_S``).

    An unknown topic borrows TBW102's route, as producers do, so a broker with
    autoCreateTopicEnable creates it on the first send."""
    key = (cluster.namesrvs[0], topic)
    cached = _routes.get(key)
    if cached is not None and time.monotonic() - cached[0] < ROUTE_TTL_S:
        return cached[1], cached[2]
    route: TopicRouteData | None
    try:
        route = await cluster.route(topic)
    except ApogeeSparkError as exc:
        if "does not exist" not in str(exc):
            raise
        base = await cluster.on_namesrv(lambda a: cluster.api.get_route(a, c.TBW102, cluster.timeout_ms))
        if base is None or not base.queue_datas:
            raise ApogeeSparkError(
                f"topic {topic!r} does not exist and the brokers do not create topics on first send "
                "(autoCreateTopicEnable=false): create it first"
            ) from None
        route = TopicRouteData(
            queue_datas=[
                QueueData(
                    q.broker_name,
                    min(8, q.read_queue_nums),
                    min(8, q.write_queue_nums),
                    q.perm & ~c.PERM_INHERIT,
                    q.topic_sys_flag,
                )
                for q in base.queue_datas
            ],
            broker_datas=base.broker_datas,
        )
    queues, _ = publish_queues(topic, route)
    if not queues:
        raise ApogeeSparkError(f"topic {topic!r} has no writable queue on a broker with a master")
    addrs = {bd.broker_name: addr for bd in route.broker_datas if (addr := bd.master_addr())}
    _routes[key] = (time.monotonic(), queues, addrs)
    return queues, addrs


def forget_route(namesrv: str, topic: str) -> None:
    _routes.pop((namesrv.split(";")[0], topic), None)


# --- the sender -------------------------------------------------------------------------------


class _QueueBuffer:
    __slots__ = ("items", "uniqs", "nbytes", "tail")

    def __init__(self) -> None:
        self.items: list[tuple[int, bytes, str]] = []
        self.uniqs: list[str] = []
        self.nbytes = 0
        self.tail: asyncio.Future[None] | None = None  # the previous send to this queue (order)


class BulkIds:
    """UNIQ_KEY values in blocks, in the layout of ``message_id.UniqIdGenerator`` (IPv4, PID,
    a random per-process number, milliseconds since the start of the month, a counter): one
    clock read per block instead of per message, and the hex text built with numpy."""

    def __init__(self) -> None:
        sample = UniqIdGenerator().next_id()
        self._prefix = sample[:20]  # ip4 + pid16 + random32, as hex
        self._ms = -1  # the time field last used, and how many counters of it are gone
        self._used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> list[str]:
        return self.take_array(n).to_pylist()  # type: ignore[no-any-return]

    def take_array(self, n: int) -> pa.Array:
        """``n`` new ids as an Arrow string array."""
        now = datetime.datetime.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        elapsed = int((now - month).total_seconds() * 1000)
        blocks: list[tuple[str, int, int]] = []  # (first 28 hex digits, first counter, count)
        with self._lock:
            if elapsed > self._ms:
                self._ms, self._used = elapsed, 0
            while n > 0:
                if self._used >= 0x10000:  # 65,536 ids in one millisecond: borrow the next one
                    self._ms, self._used = self._ms + 1, 0
                k = min(n, 0x10000 - self._used)
                blocks.append((f"{self._prefix}{self._ms & 0xFFFFFFFF:08X}", self._used, k))
                self._used += k
                n -= k
        total = sum(k for _, _, k in blocks)
        text = np.empty((total, 32), np.uint8)
        at = 0
        for head, first, k in blocks:
            text[at : at + k, :28] = np.frombuffer(head.encode("ascii"), np.uint8)
            text[at : at + k, 28:] = _hex4()[first : first + k].view(np.uint8).reshape(k, 4)
            at += k
        offsets = np.arange(0, (total + 1) * 32, 32, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


_HEX4: Any = None


def _hex4() -> Any:
    """The 4-digit upper-case hex text of 0..65535 (numpy ``S4``), built once per process."""
    global _HEX4
    if _HEX4 is None:
        _HEX4 = np.array([f"{i:04X}".encode("ascii") for i in range(0x10000)], dtype="S4")
    return _HEX4


_bulk: BulkIds | None = None


def bulk_ids() -> BulkIds:
    global _bulk
    if _bulk is None:
        _bulk = BulkIds()
    return _bulk


_ids: UniqIdGenerator | None = None


def uniq_ids() -> UniqIdGenerator:
    global _ids
    if _ids is None:
        _ids = UniqIdGenerator()
    return _ids


class Sender:
    """Sends the rows of one task; lives on the runtime loop (``add`` and ``finish`` are
    coroutines).  ``half_properties`` turns every message into a transactional half message
    (exactly-once); otherwise messages go out in batches."""

    def __init__(
        self, opts: SinkOptions, columns: SinkColumns, *, half_properties: dict[str, str] | None = None
    ) -> None:
        self.opts = opts
        self.columns = columns
        self.cluster = Cluster(runtime.runtime().api, opts.namesrv, opts.request_timeout_ms)
        self.half_properties = half_properties
        self.count = 0
        self.halves: list[tuple[str, str, int]] = []
        self._buffers: dict[tuple[str, MessageQueue], _QueueBuffer] = {}
        self._inflight = asyncio.Semaphore(opts.max_inflight_requests)
        # Sends started and not finished, at most twice the requests in flight: waiting on a
        # semaphore costs O(1) per send (``asyncio.wait`` over the pending set costs O(window)).
        self._window = asyncio.Semaphore(2 * opts.max_inflight_requests)
        self._pending: set[asyncio.Future[Any]] = set()
        self._headers: dict[tuple[str, int, int, bool], tuple[dict[str, str], str, str]] = {}
        self._error: BaseException | None = None
        self._rr = random.randrange(1 << 16)
        self._ids = uniq_ids()
        self._bulk = bulk_ids()

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
        routes: dict[str, tuple[list[MessageQueue], dict[str, str]]] = {}
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
            route = routes.get(topic)
            if route is None:
                route = routes[topic] = await publish_route(self.cluster, topic)
            queues = route[0]
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
                await self._send_single(topic, mq, body, "\x02".join(parts), uniq, route[1], half=True)
            elif level:
                parts.append(f"DELAY\x01{int(level)}")
                await self._send_single(topic, mq, body, "\x02".join(parts), uniq, route[1], half=False)
            else:
                self._append(topic, mq, body, "\x02".join(parts), uniq, route[1], ordered)
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
        queues, addrs = await publish_route(self.cluster, topic)
        nq = len(queues)
        for body, text, uniq in zip(bodies.to_pylist(), texts, ids.to_pylist(), strict=True):
            self._rr += 1
            await self._send_single(topic, queues[self._rr % nq], body, text, uniq, addrs, half=True)
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
        queues, addrs = await publish_route(self.cluster, topic)
        nq = len(queues)
        run = max(1, min(self.opts.batch_max_messages, -(-n // nq)))
        for first in range(0, n, run):
            mq = queues[self._rr % nq]
            self._rr += 1
            for lo, hi in _cuts(ends, first, min(n, first + run), self.opts.batch_max_bytes):
                uniqs = ids.slice(lo, hi - lo).to_pylist()
                fut = asyncio.ensure_future(self._send_batch(topic, mq, data[ends[lo] : ends[hi]], uniqs, addrs, None))
                self._track(fut)
                while len(self._pending) >= self.opts.max_inflight_requests:  # backpressure
                    await asyncio.wait(list(self._pending), return_when=asyncio.FIRST_COMPLETED)
        self.count += n

    def _append(
        self, topic: str, mq: MessageQueue, body: bytes, props: str, uniq: str, addrs: dict[str, str], ordered: bool
    ) -> None:
        buf = self._buffers.get((topic, mq))
        if buf is None:
            buf = self._buffers[(topic, mq)] = _QueueBuffer()
        buf.items.append((0, body, props))
        buf.uniqs.append(uniq)
        buf.nbytes += 22 + len(body) + len(props)
        if len(buf.items) >= self.opts.batch_max_messages or buf.nbytes >= self.opts.batch_max_bytes:
            self._flush(topic, mq, buf, addrs, ordered)

    def _flush(self, topic: str, mq: MessageQueue, buf: _QueueBuffer, addrs: dict[str, str], ordered: bool) -> None:
        if not buf.items:
            return
        body = encode_batch(buf.items)
        uniqs = buf.uniqs
        buf.items, buf.uniqs, buf.nbytes = [], [], 0
        previous = buf.tail if ordered else None
        fut = asyncio.ensure_future(self._send_batch(topic, mq, body, uniqs, addrs, previous))
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

    def _request(
        self, topic: str, mq: MessageQueue, body: Any, props: str | None, *, batch: bool, sysflag: int = 0
    ) -> RemotingCommand:
        key = (topic, mq.queue_id, sysflag, batch)
        template = self._headers.get(key)
        if template is None:
            # The header's extFields once per queue and kind; per message only the born time
            # and the properties change (keys found by their placeholder values).
            fields = SendMessageRequestHeaderV2(
                producer_group=self.opts.producer_group,
                topic=topic,
                default_topic=c.TBW102,
                default_topic_queue_nums=8,
                queue_id=mq.queue_id,
                sys_flag=sysflag,
                born_timestamp=_BORN_PLACEHOLDER,
                flag=0,
                properties=_PROPS_PLACEHOLDER,
                batch=True if batch else None,
            ).encode()
            born_key = next(k for k, v in fields.items() if v == str(_BORN_PLACEHOLDER))
            props_key = next(k for k, v in fields.items() if v == _PROPS_PLACEHOLDER)
            template = self._headers[key] = (fields, born_key, props_key)
        fields, born_key, props_key = template
        ext = dict(fields)
        ext[born_key] = str(int(time.time() * 1000))
        if props is None:
            del ext[props_key]
        else:
            ext[props_key] = props
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        return RemotingCommand.request(code, ext, body)

    async def _invoke(
        self, topic: str, mq: MessageQueue, addrs: dict[str, str], req: RemotingCommand, uniqs: list[str]
    ) -> list[Any]:
        api = self.cluster.api
        attempt = 0
        while True:
            addr = addrs.get(mq.broker_name)
            if addr is None:
                raise ApogeeSparkError(f"broker {mq.broker_name!r} of topic {topic!r} has no master address")
            try:
                async with self._inflight:
                    resp = await api.send(addr, req, self.opts.send_timeout_ms)
                if len(uniqs) > 1:  # a batch: only its status matters
                    if resp.code not in STORED_CODES:
                        raise RemoteError.for_code(resp.code, resp.remark)
                    return []
                return parse_send_response(resp, mq, uniqs)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                error: BaseException = exc
            except RemoteError as exc:
                if exc.code not in RETRY_CODES and exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise ApogeeSparkError(f"the broker refused a send to {topic!r}: {exc}") from None
                error = exc
            attempt += 1
            if attempt > 2:
                raise ApogeeSparkError(f"sending to {topic!r} queue {mq.queue_id} at {addr} failed: {error}") from None
            forget_route(self.opts.namesrv, topic)
            await asyncio.sleep(0.2 * attempt)
            _, addrs = await publish_route(self.cluster, topic)

    async def _send_batch(
        self,
        topic: str,
        mq: MessageQueue,
        body: bytes | memoryview,
        uniqs: list[str],
        addrs: dict[str, str],
        previous: asyncio.Future[None] | None,
    ) -> None:
        if previous is not None:
            await asyncio.shield(previous)
        await self._invoke(topic, mq, addrs, self._request(topic, mq, body, None, batch=True), uniqs)

    async def _send_single(
        self, topic: str, mq: MessageQueue, body: bytes, props: str, uniq: str, addrs: dict[str, str], *, half: bool
    ) -> None:
        if self._error is not None:
            raise self._error
        sysflag = c.TRANSACTION_PREPARED_TYPE if half else 0
        req = self._request(topic, mq, body, props, batch=False, sysflag=sysflag)

        async def send() -> None:
            results = await self._invoke(topic, mq, addrs, req, [uniq])
            if half:
                self.halves.append((addrs[mq.broker_name], results[0].offset_msg_id, results[0].queue_offset))

        await self._start(send())

    async def finish(self) -> None:
        """Send what is buffered and wait until every send is acknowledged."""
        for (topic, mq), buf in list(self._buffers.items()):
            _, addrs = await publish_route(self.cluster, topic)
            self._flush(topic, mq, buf, addrs, buf.tail is not None)
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

    async def make() -> Sender:
        return Sender(opts, columns, half_properties=half_properties)

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
