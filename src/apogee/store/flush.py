"""Flushing: group commit (SYNC_FLUSH), periodic flush (ASYNC_FLUSH), ConsumeQueue/index flush.

Group commit.  A SYNC_FLUSH put appends, then waits on a future for "CommitLog durable up to
my end offset".  At most one fdatasync is in flight, on the CommitLog's flush thread, which
goes on flushing back to back while more is written; the requests that arrive meanwhile wait
for the next one, which covers all of them, so N concurrent writers share one fsync.  The
flusher reads each file's ``wrote`` on its thread *before* each fdatasync, so every put
resolved by a flush had its bytes in the mapping before the fsync.

With the C extension that thread is ``native.Flusher``'s, which never takes the GIL: a put
hands it the file and the offset written so far (the put's bytes are in the mapping by
then), it fdatasyncs at once, again while more was asked, and signals an eventfd that the
loop reads.  A Python thread's flush could start only once the loop released the GIL (84
us at the median and 300-600 us at p90-p99 under W4, docs/performance.md).  The rules stay
here: the native
flusher takes a put only when everything before the file holding its end is durable (so one
file's fdatasync covers it); a put right after a file roll goes to the I/O thread's flush,
``MappedFileQueue.flush``, the reference, until the old file is durable.

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
import os
import time
from collections.abc import Callable

from apogee.common.accel import native
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
    """``native_flusher``: flush through ``native.Flusher`` when the extension is there (the
    default); False keeps every flush on the I/O thread (the reference path)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, io: IOThread, commitlog: CommitLog,
                 timeout_ms: int, on_flushed: FlushedCallback, on_error: ErrorCallback,
                 latency: Histogram | None = None, *, native_flusher: bool = True) -> None:
        self._loop = loop
        self.latency = latency if latency is not None else Histogram(FLUSH_BOUNDS)
        self._io = io
        self._commitlog = commitlog
        self._on_flushed = on_flushed
        self._on_error = on_error
        self._waiters = OffsetWaiters(loop, timeout_ms, PutStatus.FLUSH_DISK_TIMEOUT, "flushed within syncFlushTimeout")
        self._inflight = False
        # The first failed fdatasync, kept: after it the page cache may have dropped dirty
        # pages and a later fdatasync could succeed over the hole, so nothing is flushed
        # again and every request fails at once (the store stops accepting writes too).
        self._failure: BaseException | None = None
        self.fsyncs = 0
        self._durable = commitlog.flushed_offset  # the highest offset the loop knows durable
        self._flusher = native.Flusher() if native_flusher and native is not None else None
        self._native_fsyncs = 0
        if self._flusher is not None:
            loop.add_reader(self._flusher.fileno(), self._native_flushed)

    @property
    def pending(self) -> int:
        return len(self._waiters)

    @property
    def native_fsyncs(self) -> int:
        """fdatasyncs done by the native flusher (of ``fsyncs``)."""
        return self._native_fsyncs

    @property
    def native(self) -> bool:
        """Whether puts are flushed by the native flusher (else on the I/O thread)."""
        return self._flusher is not None

    def request(self, end_offset: int) -> asyncio.Future[PutStatus]:
        """A future resolved with PUT_OK once the CommitLog is durable up to ``end_offset``."""
        if self._failure is not None:
            failed: asyncio.Future[PutStatus] = self._loop.create_future()
            failed.set_result(PutStatus.FLUSH_DISK_FAILED)
            return failed
        fut = self._waiters.add(end_offset)
        if not self._flush_natively(end_offset) and not self._inflight:
            self._start()
        return fut

    def _flush_natively(self, end: int) -> bool:
        """Ask the native flusher for everything written so far (as the I/O thread's flush
        reads ``wrote``) when one fdatasync of the last file covers ``end``: everything before
        that file is durable.  False: the I/O thread's flush takes it."""
        flusher = self._flusher
        if flusher is None:
            return False
        files = self._commitlog.mfq.files
        if not files:
            return False
        last = files[-1]
        if self._durable < last.start or end <= last.start:
            return False
        if flusher.request(last.start, last.fd, last.start + last.wrote, self._commitlog.last_store_ts):
            return True
        # Refused.  After a failed fdatasync the flusher refuses everything and its error is
        # waiting for the eventfd's reader: take it now (it fails every waiter, this one
        # too) rather than have the I/O thread try the same file again.
        self._native_flushed()
        return self._failure is not None

    def _native_flushed(self) -> None:
        """The eventfd's reader: the native flusher finished an fdatasync (or failed)."""
        flusher = self._flusher
        if flusher is None:
            return
        durable, ts, fsyncs, last_ns, err = flusher.take()
        if err:
            self._stop_native()
            self._failed(OSError(err, os.strerror(err)))
            return
        if fsyncs > self._native_fsyncs:
            self.fsyncs += fsyncs - self._native_fsyncs
            self._native_fsyncs = fsyncs
            self.latency.observe(last_ns / 1e9)
        if durable > self._durable:
            mf = self._commitlog.mfq.find(durable - 1)
            if mf is not None and durable - mf.start > mf.flushed:
                mf.flushed = durable - mf.start
            self._durable_to(durable, ts)

    def _stop_native(self) -> None:
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            self._loop.remove_reader(flusher.fileno())
            flusher.close()

    def _start(self) -> None:
        self._inflight = True
        cf = self._io.submit(self._flush_while_written)
        cf.add_done_callback(lambda f: self._loop.call_soon_threadsafe(self._finished, f))

    def _flush_while_written(self) -> int:
        """On the flush thread: fdatasync, hand the durable offset to the loop at once, and
        fdatasync again right away while more was written meanwhile.

        Why not one fdatasync per submission: the next one would start only after the loop
        ran this one's callback and the thread woke again (two cross-thread wake-ups, ~120
        us at the median here and ~800 us at p99 under load), and every put that arrived
        during a flush waited for that too.  A put's bytes are in the mapping before it
        waits, and ``MappedFile.flush`` reads ``wrote`` before its fdatasync, so a flush
        started after the put covers it; the loop resolves waiters from the offsets posted.
        """
        commitlog = self._commitlog
        mfq = commitlog.mfq
        post = self._loop.call_soon_threadsafe
        durable = -1
        while True:
            ts = commitlog.last_store_ts  # read first: at most the last flushed record's
            t0 = time.monotonic()
            before, durable = durable, mfq.flush()
            post(self._flushed, durable, ts, t0)
            # Stop when nothing more was written, or when a flush made no progress (a file
            # closed under it at shutdown): never spin.
            if mfq.max_offset <= durable or durable <= before:
                return durable

    def _flushed(self, durable: int, ts: int, t0: float) -> None:
        self.fsyncs += 1
        self.latency.observe(time.monotonic() - t0)
        self._durable_to(durable, ts)

    def _durable_to(self, durable: int, ts: int) -> None:
        """Either flusher made the CommitLog durable up to ``durable``: tell the owner and
        answer the puts it covers (none after a failure: see ``_failure``)."""
        if self._failure is not None:
            return
        self._durable = max(self._durable, durable)
        self._on_flushed(durable, ts)
        self.resolve(durable)

    def _finished(self, cf: concurrent.futures.Future[int]) -> None:
        self._inflight = False
        exc = cf.exception()
        if exc is not None:
            self._stop_native()
            self._failed(exc)
            return
        if self._waiters and not self._flush_natively(self._commitlog.max_offset):
            self._start()  # a put that came after the thread's last look

    def _failed(self, exc: BaseException) -> None:
        self._waiters.fail_all(PutStatus.FLUSH_DISK_FAILED)
        if self._failure is None:  # the owner hears of the first failure only
            self._failure = exc
            log.error("CommitLog fdatasync failed: %s", exc)
            self._on_error(exc)

    def resolve(self, durable: int) -> None:
        """Complete every request whose end is at or below ``durable`` (any flush counts)."""
        self._waiters.resolve(durable)

    def close(self) -> None:
        """Stop the native flusher (after its fdatasync in progress), then answer every waiter
        SERVICE_NOT_AVAILABLE."""
        self._stop_native()
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
