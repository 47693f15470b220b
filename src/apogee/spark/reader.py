"""Batch reads, and the executor-side read of one queue slice shared with streaming reads.

Planning (driver side, in Spark's planner worker): resolve the topics, the queues and their
bounds, turn ``startingOffsets`` / ``endingOffsets`` / timestamps / a consumer group into one
offset range per queue, narrow it with pushed-down filters, and cut it into ``QueueSlice``
partitions.  Everything ``read()`` needs travels inside the partition: the reader object is
pickled to executors, so it holds no client, socket or cache.

Reading (executor side, ``read_slice``): pulls go straight from the executor to the broker
through the process's runtime client, several pulls of the slice in flight at once, and the
records become Arrow record batches column by column (``apogee.spark.decode``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from apogee.errors import ConnectionClosedError, RequestTimeoutError
from apogee.remoting.codes import ResponseCode
from apogee.remoting.signing import SessionCredentials
from apogee.remoting.tls_config import TlsClientConfig
from apogee.spark import runtime
from apogee.spark.broker import Cluster, PullReply, pull
from apogee.spark.errors import ApogeeSparkError, DataLossError
from apogee.spark.offsets import EARLIEST, LATEST, Flat, OffsetSpec, QueueKey, Slice, plan_slices
from apogee.spark.options import SourceOptions, tag_set
from apogee.spark.schema import SOURCE_COLUMNS

log = logging.getLogger("apogee.spark.reader")

ROWS_PER_BATCH = 8192
NEVER_NULL = frozenset(
    {
        "topic",
        "broker",
        "queue_id",
        "queue_offset",
        "msg_id",
        "body",
        "properties",
        "born_timestamp",
        "store_timestamp",
        "born_host",
        "reconsume_times",
    }
)


@dataclass
class QueueSlice(InputPartition):
    """One Spark task: queue offsets ``[start, end)`` of one queue, and how to pull them."""

    topic: str
    broker: str
    queue_id: int
    addr: str
    start: int
    end: int
    namesrv: str
    group: str
    expression: str = "*"
    expression_type: str | None = None
    pull_batch_size: int = 32
    pull_pipeline: int = 16
    timeout_ms: int = 10_000
    fail_on_data_loss: bool = True
    tls: TlsClientConfig | None = None
    credentials: SessionCredentials | None = dataclasses.field(default=None, repr=False)  # ACL: signs the pulls

    @property
    def key(self) -> QueueKey:
        return QueueKey(self.topic, self.broker, self.queue_id)


def _spark_type(ddl: str) -> Any:
    from pyspark.sql import types as T

    simple = {
        "string": T.StringType(),
        "int": T.IntegerType(),
        "bigint": T.LongType(),
        "binary": T.BinaryType(),
        "timestamp": T.TimestampType(),
        "map<string,string>": T.MapType(T.StringType(), T.StringType(), True),
    }
    return simple[ddl]


def source_schema() -> StructType:
    from pyspark.sql.types import StructField

    return StructType([StructField(name, _spark_type(kind), True) for name, kind in SOURCE_COLUMNS])


def check_schema(schema: StructType) -> None:
    """A user-given schema must be a subset of the source's columns, with the same types."""
    ours = {name: kind for name, kind in SOURCE_COLUMNS}
    for field in schema.fields:
        if field.name not in ours:
            raise ApogeeSparkError(
                f"column {field.name!r} of the given schema is not a column of the apogee source ({', '.join(ours)})"
            )
        expected = _spark_type(ours[field.name])
        if field.dataType != expected:
            raise ApogeeSparkError(
                f"column {field.name!r} must be {expected.simpleString()}, not {field.dataType.simpleString()}"
            )


def arrow_schema(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def make_slices(
    opts: SourceOptions,
    queues: dict[QueueKey, str],
    ranges: dict[QueueKey, tuple[int, int]],
    *,
    tags: str | None = None,
) -> list[QueueSlice]:
    expression, expression_type = (opts.sql_filter, "SQL92") if opts.sql_filter else (tags or opts.tags, "TAG")
    slices = plan_slices(
        ((k, s, e) for k, (s, e) in ranges.items()),
        max_per_slice=opts.max_records_per_partition,
        min_slices=opts.min_partitions,
    )
    return [to_partition(opts, s, queues[s.key], expression, expression_type) for s in slices]


def to_partition(opts: SourceOptions, s: Slice, addr: str, expression: str, expression_type: str) -> QueueSlice:
    return QueueSlice(
        topic=s.key.topic,
        broker=s.key.broker,
        queue_id=s.key.queue_id,
        addr=addr,
        start=s.start,
        end=s.end,
        namesrv=opts.namesrv,
        group=opts.reader_group,
        expression=expression,
        expression_type=expression_type,
        pull_batch_size=opts.pull_batch_size,
        pull_pipeline=opts.pull_pipeline,
        timeout_ms=opts.pull_timeout_ms,
        fail_on_data_loss=opts.fail_on_data_loss,
        tls=opts.tls,
        credentials=opts.credentials,
    )


async def resolve_spec(
    cluster: Cluster,
    spec: OffsetSpec,
    queues: dict[QueueKey, str],
    bounds: dict[QueueKey, tuple[int, int]],
    *,
    default: int,
    name: str,
    topics: Sequence[str],
) -> Flat:
    """Positions of ``spec`` for every queue; ``default`` (EARLIEST/LATEST) where a JSON
    spec names no offset for a queue."""
    if spec.kind == "earliest":
        return {k: bounds[k][0] for k in queues}
    if spec.kind == "latest":
        return {k: bounds[k][1] for k in queues}
    if spec.kind == "timestamp":
        return await cluster.search(queues, spec.timestamp)
    out: Flat = {}
    for key in spec.positions:
        if key.topic not in topics:
            raise ApogeeSparkError(f"option {name} names topic {key.topic!r}, which this query does not read")
        if key not in queues:
            raise ApogeeSparkError(
                f"option {name} names queue {key.queue_id} of broker {key.broker!r}, "
                f"which topic {key.topic!r} does not have"
            )
    for key in queues:
        value = spec.positions.get(key, default)
        out[key] = bounds[key][0] if value == EARLIEST else bounds[key][1] if value == LATEST else value
    return out


def _ms(value: Any, *, upper: bool) -> int | None:
    """Epoch ms of a pushed-down timestamp value: rounded up for lower bounds (``>=``), down + 1
    for ``<=``-style bounds (the caller decides)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        us = int(value.timestamp() * 1_000_000)
    elif isinstance(value, (int, float)):
        us = int(value * 1_000_000)
    else:
        return None
    return math.floor(us / 1000) if upper else math.ceil(us / 1000)


class PushedFilters:
    """What the batch reader learned from ``pushFilters``: exact narrowing of queues and
    offsets, time bounds resolved through search-by-time, and tags for the broker."""

    def __init__(self) -> None:
        self.queue_ids: set[int] | None = None
        self.topics: set[str] | None = None
        self.brokers: set[str] | None = None
        self.offset_lo = 0
        self.offset_hi = sys.maxsize
        self.time_lo: int | None = None  # first store ms wanted (inclusive)
        self.time_hi: int | None = None  # first store ms not wanted (exclusive)
        self.tags: set[str] | None = None

    @staticmethod
    def _values(f: Filter) -> list[Any] | None:
        if isinstance(f, EqualTo):
            return [f.value]
        if isinstance(f, In):
            return list(f.value)
        return None

    def push(self, f: Filter) -> bool:
        """True when ``f`` is applied exactly here (Spark need not re-check it)."""
        attribute: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
        column = attribute[0] if len(attribute) == 1 else None
        if isinstance(f, IsNotNull):
            return column in NEVER_NULL
        if not hasattr(f, "value"):
            return False
        values = self._values(f)
        if column in ("queue_id", "topic", "broker") and values is not None:
            if any(v is None for v in values):
                return False
            current = {"queue_id": self.queue_ids, "topic": self.topics, "broker": self.brokers}[column]
            wanted = set(values)
            merged = wanted if current is None else current & wanted
            setattr(self, {"queue_id": "queue_ids", "topic": "topics", "broker": "brokers"}[column], merged)
            return True
        if column == "queue_offset" and not isinstance(f, In):
            v = f.value
            if not isinstance(v, int):
                return False
            if isinstance(f, EqualTo):
                self.offset_lo, self.offset_hi = max(self.offset_lo, v), min(self.offset_hi, v + 1)
            elif isinstance(f, GreaterThan):
                self.offset_lo = max(self.offset_lo, v + 1)
            elif isinstance(f, GreaterThanOrEqual):
                self.offset_lo = max(self.offset_lo, v)
            elif isinstance(f, LessThan):
                self.offset_hi = min(self.offset_hi, v)
            elif isinstance(f, LessThanOrEqual):
                self.offset_hi = min(self.offset_hi, v + 1)
            else:
                return False
            return True
        if column == "store_timestamp" and not isinstance(f, In):
            # Narrowed through search-by-time, but Spark re-checks: store times follow the
            # CommitLog and only a clock step backwards could break that order.
            if isinstance(f, (GreaterThanOrEqual, EqualTo)):
                lo = _ms(f.value, upper=False)
                if lo is not None:
                    self.time_lo = lo if self.time_lo is None else max(self.time_lo, lo)
            if isinstance(f, GreaterThan):
                lo = _ms(f.value, upper=True)
                if lo is not None:
                    self.time_lo = lo if self.time_lo is None else max(self.time_lo, lo)
            if isinstance(f, (LessThan,)):
                hi = _ms(f.value, upper=False)
                if hi is not None:
                    self.time_hi = hi if self.time_hi is None else min(self.time_hi, hi)
            if isinstance(f, (LessThanOrEqual, EqualTo)):
                hi = _ms(f.value, upper=True)
                if hi is not None:
                    hi += 1
                    self.time_hi = hi if self.time_hi is None else min(self.time_hi, hi)
            return False
        if column == "tags" and values is not None and all(isinstance(v, str) and v for v in values):
            wanted = set(values)
            self.tags = wanted if self.tags is None else self.tags & wanted
            return False  # the broker filters by tag hash; Spark re-checks the strings
        return False


class ApogeeReader(DataSourceReader):
    """Batch reader without ``pushFilters`` (used where Spark's pushdown flag is off)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.pushed = PushedFilters()

    def partitions(self) -> Sequence[InputPartition]:
        return runtime.run(self._plan(), self.opts.request_timeout_ms / 1000 * 4 + 30)

    async def _plan(self) -> list[QueueSlice]:
        opts = self.opts
        cluster = Cluster(runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms)
        topics = await cluster.resolve_topics(opts.topics, opts.topic_pattern)
        if not topics:
            return []
        pushed = self.pushed
        if pushed.topics is not None:
            topics = [t for t in topics if t in pushed.topics]
        queues = await cluster.queues(topics)
        queues = {
            k: a
            for k, a in queues.items()
            if (pushed.queue_ids is None or k.queue_id in pushed.queue_ids)
            and (pushed.brokers is None or k.broker in pushed.brokers)
        }
        if not queues:
            return []
        bounds = await cluster.bounds(queues)
        start = await resolve_spec(
            cluster, opts.starting, queues, bounds, default=EARLIEST, name="startingOffsets", topics=topics
        )
        if opts.starting_from_group:
            committed = await cluster.group_offsets(opts.starting_from_group, queues)
            start = {k: committed[k] if committed.get(k) is not None else v for k, v in start.items()}  # type: ignore[misc]
        end = await resolve_spec(
            cluster, opts.ending, queues, bounds, default=LATEST, name="endingOffsets", topics=topics
        )
        if pushed.time_lo is not None:
            by_time = await cluster.search(queues, pushed.time_lo)
            start = {k: max(v, by_time[k]) for k, v in start.items()}
        if pushed.time_hi is not None:
            by_time = await cluster.search(queues, pushed.time_hi)
            end = {k: min(v, by_time[k]) for k, v in end.items()}
        ranges: dict[QueueKey, tuple[int, int]] = {}
        for key in queues:
            lo_bound, hi_bound = bounds[key]
            s, e = max(start[key], pushed.offset_lo), min(end[key], hi_bound, pushed.offset_hi)
            if s < lo_bound and e > s:
                if opts.fail_on_data_loss and opts.starting.kind == "json":
                    raise DataLossError(
                        f"{key.topic}/{key.broker}/{key.queue_id}: offsets {s}..{min(e, lo_bound)} are no longer "
                        f"stored (the queue starts at {lo_bound}); set failOnDataLoss=false to read from there"
                    )
                s = lo_bound
            if e > s:
                ranges[key] = (s, e)
        tags = None
        if pushed.tags is not None and opts.tags == "*" and not opts.sql_filter:
            if not pushed.tags:
                return []
            tags = " || ".join(sorted(pushed.tags))
        return make_slices(opts, queues, ranges, tags=tags)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, QueueSlice):  # Spark's stand-in when there is nothing to read
            return iter(())
        return read_slice(partition, arrow_schema(self.schema))


class ApogeePushdownReader(ApogeeReader):
    """Batch reader with ``pushFilters``: queue ids, topics, brokers and queue offsets exactly;
    store-time ranges through search-by-time; tags to the broker (both re-checked by Spark)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if not self.pushed.push(f):
                yield f


# --- executor side ----------------------------------------------------------------------------


async def _pull_segment(part: QueueSlice, lo: int, hi: int) -> list[tuple[bytes, int, int]]:
    """Records of ``[lo, hi)``: pulls until the segment is covered; bodies with their bounds."""
    api = runtime.runtime().api_for(part.tls, part.credentials)
    key = part.key
    out: list[tuple[bytes, int, int]] = []
    offset = lo
    attempts = 0
    stalls = 0
    while offset < hi:
        try:
            reply = await pull(
                api,
                part.addr,
                part.group,
                key,
                offset,
                min(hi - offset, part.pull_batch_size),
                part.expression,
                part.expression_type,
                part.timeout_ms,
            )
        except (ConnectionClosedError, RequestTimeoutError) as exc:
            attempts += 1
            if attempts > 3:
                raise ApogeeSparkError(
                    f"cannot pull {key.topic}/{key.broker}/{key.queue_id} from {part.addr}: {exc}"
                ) from None
            await asyncio.sleep(0.2 * attempts)
            continue
        nxt = _next_offset(part, reply, offset, hi)
        if reply.body:
            out.append((reply.body, offset, hi))
        if nxt <= offset:
            stalls += 1
            if stalls > 50:
                raise ApogeeSparkError(
                    f"pulling {key.topic}/{key.broker}/{key.queue_id} makes no progress at offset {offset} "
                    f"(broker answer {reply.code}: {reply.remark})"
                )
            await asyncio.sleep(0.05)
            continue
        offset = nxt
    return out


def _next_offset(part: QueueSlice, reply: PullReply, offset: int, hi: int) -> int:
    code = reply.code
    key = part.key
    if code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
        return reply.next_begin
    if code == ResponseCode.PULL_OFFSET_MOVED or (code == ResponseCode.PULL_NOT_FOUND and reply.min_offset > offset):
        if reply.min_offset > offset:
            lost_to = min(reply.min_offset, hi)
            if part.fail_on_data_loss:
                raise DataLossError(
                    f"{key.topic}/{key.broker}/{key.queue_id}: messages {offset}..{lost_to - 1} expired before they "
                    f"were read (the queue now starts at {reply.min_offset}); set failOnDataLoss=false to skip them"
                )
            log.warning("%s: messages %d..%d expired before they were read; skipped", key, offset, lost_to - 1)
            return lost_to
        # Past the end: the broker lost messages the plan saw (an unflushed tail after a crash).
        if part.fail_on_data_loss:
            raise DataLossError(
                f"{key.topic}/{key.broker}/{key.queue_id}: offset {offset} is beyond the queue's end "
                f"{reply.max_offset}; messages up to {hi} were planned but are gone"
            )
        return hi
    if code == ResponseCode.PULL_NOT_FOUND:
        if reply.max_offset <= offset:
            # Not there (yet): the consume queue may lag the CommitLog by a moment.
            return offset
        return reply.next_begin
    if code == ResponseCode.TOPIC_NOT_EXIST:
        raise ApogeeSparkError(f"topic {key.topic!r} does not exist on broker {key.broker} ({part.addr})")
    if code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
        raise ApogeeSparkError(f"the broker refused the filter {part.expression!r}: {reply.remark}")
    raise ApogeeSparkError(
        f"pulling {key.topic}/{key.broker}/{key.queue_id} failed with code {code}: {reply.remark or 'no remark'}"
    )


def read_slice(part: QueueSlice, schema: Any) -> Iterator[Any]:
    """Arrow record batches of the slice, in queue-offset order.

    Pulls run on the process's runtime loop, ``pull_pipeline`` segments at a time; while one
    window is decoded here the next one is already being fetched.
    """
    from apogee.spark.decode import ColumnBuilder

    rt = runtime.runtime()
    tag_filter = tag_set(part.expression) if part.expression_type == "TAG" else None
    builder = ColumnBuilder(schema, part.topic, part.broker, part.queue_id, tag_filter)
    seg = max(1, part.pull_batch_size)
    window = max(1, part.pull_pipeline)

    async def fetch(lo: int) -> tuple[list[tuple[bytes, int, int]], int]:
        bounds: list[tuple[int, int]] = []
        s = lo
        while s < part.end and len(bounds) < window:
            bounds.append((s, min(part.end, s + seg)))
            s += seg
        parts = await asyncio.gather(*(_pull_segment(part, a, b) for a, b in bounds))
        return [item for p in parts for item in p], s

    nxt = part.start
    pending = rt.submit(fetch(nxt)) if nxt < part.end else None
    try:
        while pending is not None:
            bodies, nxt = pending.result()
            pending = rt.submit(fetch(nxt)) if nxt < part.end else None
            for body, lo, hi in bodies:
                builder.add(body, lo, hi)
                if builder.count >= ROWS_PER_BATCH or builder.full:
                    yield builder.take()
        if builder.count:
            yield builder.take()
    finally:
        if pending is not None:
            pending.cancel()
