"""Streaming reads: micro-batches over per-queue offset ranges kept in Spark's checkpoint.

Spark's offset log holds, per batch, the end position of every queue (``{"topic": {"broker":
{"queueId": offset}}}``, pure positions).  A restarted query re-plans an unfinished batch from
the same start and end, so ``partitions(start, end)`` must be a pure function of its
arguments: it is (same slices, the broker address only says where to pull).  With an
idempotent sink every message is then read exactly once.

``latestOffset`` runs once per trigger in Spark's long-lived source runner process.  It
re-reads the routes, so queues added to a topic, brokers added to the cluster and (with
``topicPattern``) new topics are picked up between micro-batches; a queue seen for the first
time enters the position map at its earliest offset (it is read from the next batch on, like
Kafka's new partitions).  Rate limits (``maxMessagesPerTrigger``, ``maxBytesPerTrigger``) cut
the end, also under ``Trigger.AvailableNow``, whose target is the latest position taken in
``prepareForTriggerAvailableNow``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from apogee.spark import runtime
from apogee.spark.broker import Cluster
from apogee.spark.errors import DataLossError
from apogee.spark.offsets import EARLIEST, Flat, QueueKey, clamp, from_json, limit_bytes, limit_rows, to_json
from apogee.spark.options import SourceOptions
from apogee.spark.reader import QueueSlice, arrow_schema, make_slices, read_slice, resolve_spec

log = logging.getLogger("apogee.spark.stream_reader")


class ApogeeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        # Driver-side caches (plain data: the reader is also pickled to executors).
        self._queues: dict[QueueKey, str] = {}
        self._latest: Flat | None = None
        self._target: Flat | None = None
        self._group_committed: Flat = {}

    # --- driver side --------------------------------------------------------------------------

    def _cluster(self) -> Cluster:
        opts = self.opts
        return Cluster(runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms)

    def _run(self, coro: Any) -> Any:
        return runtime.run(coro, self.opts.request_timeout_ms / 1000 * 6 + 30)

    async def _discover(self, cluster: Cluster) -> tuple[dict[QueueKey, str], dict[QueueKey, tuple[int, int]]]:
        topics = await cluster.resolve_topics(self.opts.topics, self.opts.topic_pattern)
        queues = await cluster.queues(topics) if topics else {}
        bounds = await cluster.bounds(queues) if queues else {}
        self._queues = queues
        return queues, bounds

    def initialOffset(self) -> dict[str, Any]:
        return to_json(self._run(self._initial()))

    async def _initial(self) -> Flat:
        opts = self.opts
        cluster = self._cluster()
        queues, bounds = await self._discover(cluster)
        topics = sorted({k.topic for k in queues}) or list(opts.topics)
        start = await resolve_spec(
            cluster, opts.starting, queues, bounds, default=EARLIEST, name="startingOffsets", topics=topics
        )
        if opts.starting_from_group:
            committed = await cluster.group_offsets(opts.starting_from_group, queues)
            start = {k: c if c is not None else start[k] for k, c in committed.items()}
        return {k: min(max(v, bounds[k][0]), bounds[k][1]) for k, v in start.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if self.opts.max_bytes_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return to_json(self._run(self._latest_offset(from_json(start, "the start offset"), limit)))

    async def _latest_offset(self, start: Flat, limit: ReadLimit) -> Flat:
        opts = self.opts
        cluster = self._cluster()
        queues, bounds = await self._discover(cluster)
        end: Flat = dict(start)  # queues that vanished from the route keep their position
        latest: Flat = dict(start)
        for key in queues:
            lo, hi = bounds[key]
            latest[key] = hi
            if key not in start:
                log.info("new queue %s/%s/%d: read from its earliest offset %d", *key, lo)
                end[key] = lo
                continue
            position = start[key]
            if position < lo:
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"{key.topic}/{key.broker}/{key.queue_id}: messages {position}..{lo - 1} expired before the "
                        f"query read them (the queue now starts at {lo}); set failOnDataLoss=false to skip them"
                    )
                log.warning("%s: messages %d..%d expired unread; skipped", key, position, lo - 1)
            end[key] = max(position, hi)
        for key in start:
            if key not in queues:
                log.warning("queue %s/%s/%d is no longer in the route; keeping its position", *key)
        self._latest = latest
        if opts.group and start:
            # Spark asks for new offsets only once the previous batch is done, so ``start`` is
            # processed data: commit it now too (``commit()`` of the last batch of a quiet
            # stream only comes with the next batch).
            await self._commit_group(cluster, start)
        if self._target is not None:
            end = clamp(end, self._target, start)
        if not isinstance(limit, ReadAllAvailable):
            begin = {k: start.get(k, end[k]) for k in end}
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else opts.max_messages_per_trigger
            max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else opts.max_bytes_per_trigger
            if max_rows:
                end = limit_rows(begin, end, max_rows)
            if max_bytes:
                pending = {k: begin[k] for k in end if end[k] > begin[k]}
                sizes = await cluster.sample_sizes(queues, pending, opts.reader_group) if pending else {}
                end = limit_bytes(begin, end, sizes, max_bytes)
        return end

    def prepareForTriggerAvailableNow(self) -> None:
        async def target() -> Flat:
            _, bounds = await self._discover(self._cluster())
            return {k: hi for k, (_, hi) in bounds.items()}

        self._target = self._run(target())

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json(start, "the start offset"), from_json(end, "the end offset")
        ranges = {k: (begin.get(k, e), e) for k, e in stop.items() if e > begin.get(k, e)}
        if not ranges:
            return []
        missing = {k.topic for k in ranges if k not in self._queues}
        if missing:  # a restarted query re-plans a batch before asking for new offsets
            self._run(self._refresh_addresses(sorted(missing)))
        known = {k: a for k, a in self._queues.items() if k in ranges}
        lost = [k for k in ranges if k not in known]
        if lost:
            raise DataLossError(
                f"queues {', '.join(f'{k.topic}/{k.broker}/{k.queue_id}' for k in lost)} are no longer in the "
                "route; their messages of this batch cannot be read"
            )
        return make_slices(self.opts, known, ranges)

    async def _refresh_addresses(self, topics: list[str]) -> None:
        queues = await self._cluster().queues(topics)
        self._queues = {**self._queues, **queues}

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished everything up to ``end``: with option ``group``, store it as the
        group's consumer offsets so broker tools show the query's lag (monitoring only: the
        checkpoint, not the group, decides where a restarted query continues)."""
        if not self.opts.group:
            return
        self._run(self._commit_group(self._cluster(), from_json(end, "the committed offset")))

    async def _commit_group(self, cluster: Cluster, positions: Flat) -> None:
        changed = {k: v for k, v in positions.items() if self._group_committed.get(k) != v}
        if not changed:
            return
        if any(k not in self._queues for k in changed):
            await self._refresh_addresses(sorted({k.topic for k in changed}))
        await cluster.commit_group(self.opts.group or "", changed, self._queues)
        self._group_committed.update(changed)

    def stop(self) -> None:
        self._queues = {}

    # --- executor side ------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, QueueSlice)
        return read_slice(partition, arrow_schema(self.schema))
