"""Flushing: group commit (SYNC_FLUSH), periodic flush (ASYNC_FLUSH), ConsumeQueue/index flush.

Group commit.  A SYNC_FLUSH put appends, then waits on a future for "CommitLog durable up to
my end offset".  At most one fdatasync is in flight, on the I/O thread; the requests that
arrive meanwhile wait for the next one, which covers all of them, so N concurrent writers
share one fsync.  The flusher reads each file's ``wrote`` on the I/O thread *after* being
submitted, so every put resolved by a flush had its bytes in the mapping before the fsync.

A request not resolved within ``syncFlushTimeout`` gets FLUSH_DISK_TIMEOUT (one timer for the
oldest request; the waiter table is ``waiters.OffsetWaiters``, shared with SYNC_MASTER's wait
for a slave).  An fdatasync error fails every waiting put with FLUSH_DISK_FAILED and the
store stops taking writes: after a failed fsync Linux may have dropped the dirty pages, so
nothing later can be promised durable.

All callbacks here run on the owner's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable

from apogee.common.histogram import FLUSH_BOUNDS, Histogram
from apogee.store.commitlog import CommitLog
from apogee.store.config import StoreConfig
from apogee.store.io_thread import IOThread
from apogee.store.results import PutStatus
from apogee.store.waiters import OffsetWaiters

log = logging.getLogger("apogee.store.flush")

FlushedCallback = Callable[[int, int], None]
"""``cb(durable_offset, store_timestamp_of_last_flushed_message)``."""
ErrorCallback = Callable[[BaseException], None]

PAGE = 4096


class GroupCommit:
    def __init__(self, loop: asyncio.AbstractEventLoop, io: IOThread, commitlog: CommitLog,
                 timeout_ms: int, on_flushed: FlushedCallback, on_error: ErrorCallback,
                 latency: Histogram | None = None) -> None:
        self._loop = loop
        self.latency = latency if latency is not None else Histogram(FLUSH_BOUNDS)
        self._io = io
        self._commitlog = commitlog
        self._on_flushed = on_flushed
        self._on_error = on_error
        self._waiters = OffsetWaiters(loop, timeout_ms, PutStatus.FLUSH_DISK_TIMEOUT, "flushed within syncFlushTimeout")
        self._inflight = False
        self.fsyncs = 0

    @property
    def pending(self) -> int:
        return len(self._waiters)

    def request(self, end_offset: int) -> asyncio.Future[PutStatus]:
        """A future resolved with PUT_OK once the CommitLog is durable up to ``end_offset``."""
        fut = self._waiters.add(end_offset)
        if not self._inflight:
            self._start()
        return fut

    def _start(self) -> None:
        self._inflight = True
        ts = self._commitlog.last_store_ts
        t0 = self._loop.time()
        cf = self._io.submit(self._commitlog.mfq.flush)
        cf.add_done_callback(lambda f: self._loop.call_soon_threadsafe(self._done, f, ts, t0))

    def _done(self, cf: concurrent.futures.Future[int], ts: int, t0: float) -> None:
        self._inflight = False
        self.fsyncs += 1
        self.latency.observe(self._loop.time() - t0)
        exc = cf.exception()
        if exc is not None:
            log.error("CommitLog fdatasync failed: %s", exc)
            self._waiters.fail_all(PutStatus.FLUSH_DISK_FAILED)
            self._on_error(exc)
            return
        durable = cf.result()
        self._on_flushed(durable, ts)
        self.resolve(durable)
        if self._waiters:
            self._start()

    def resolve(self, durable: int) -> None:
        """Complete every request whose end is at or below ``durable`` (any flush counts)."""
        self._waiters.resolve(durable)

    def close(self) -> None:
        self._waiters.close()


class PeriodicFlush:
    """ASYNC_FLUSH: flush when at least ``flushCommitLogLeastPages`` pages are dirty, checking
    every ``flushIntervalCommitLog`` ms (back to back under load), and everything at least every
    ``flushCommitLogThoroughInterval`` ms."""

    def __init__(self, loop: asyncio.AbstractEventLoop, io: IOThread, commitlog: CommitLog,
                 config: StoreConfig, on_flushed: FlushedCallback, on_error: ErrorCallback,
                 latency: Histogram | None = None) -> None:
        self._loop = loop
        self.latency = latency if latency is not None else Histogram(FLUSH_BOUNDS)
        self._io = io
        self._commitlog = commitlog
        self._interval_s = config.flush_interval_commitlog_ms / 1000
        self._least_bytes = config.flush_commitlog_least_pages * PAGE
        self._thorough_s = config.flush_commitlog_thorough_interval_ms / 1000
        self._on_flushed = on_flushed
        self._on_error = on_error
        self.fsyncs = 0

    async def run(self) -> None:
        last_thorough = self._loop.time()
        eager = False
        while True:
            if not eager:
                await asyncio.sleep(self._interval_s)
            clog = self._commitlog
            dirty = clog.max_offset - clog.flushed_offset
            now = self._loop.time()
            thorough = now - last_thorough >= self._thorough_s
            if dirty <= 0 or (dirty < self._least_bytes and not thorough):
                eager = False
                continue
            if thorough:
                last_thorough = now
            await self.flush_now()
            eager = clog.max_offset - clog.flushed_offset >= self._least_bytes

    async def flush_now(self) -> None:
        ts = self._commitlog.last_store_ts
        t0 = self._loop.time()
        try:
            durable = await self._io.run(self._commitlog.mfq.flush)
        except OSError as exc:
            log.error("CommitLog fdatasync failed: %s", exc)
            self._on_error(exc)
            return
        self.fsyncs += 1
        self.latency.observe(self._loop.time() - t0)
        self._on_flushed(durable, ts)
