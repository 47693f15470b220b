"""MessageStore: the façade the broker owns (RocketMQ DefaultMessageStore).

Threads and ownership.  The store belongs to one asyncio event loop: ``start`` binds it, and
every public method must be called on that loop's thread.  Blocking disk work (recovery,
fdatasync, file creation and deletion, disk checks) runs on the store's single I/O thread.
Background work on the loop: the dispatcher task, the flush tasks and the cleanup task.

Durability.  ASYNC_FLUSH: a put returns once its bytes are in the mapping (page cache).
SYNC_FLUSH: ``put_message`` returns after an fsync covers the record (group commit), and only
fsynced records are dispatched, i.e. visible to consumers and queries.

Crash invariants (``docs/store.md``): the CommitLog is a clean prefix after recovery; every
ConsumeQueue entry and index hit points at a valid record of that prefix; the topic-queue
offsets continue from the ConsumeQueues.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from apogee.common.constants import SCHEDULE_TOPIC
from apogee.common.histogram import DISPATCH_BOUNDS_MS, FLUSH_BOUNDS, Histogram
from apogee.common.message import MessageExt
from apogee.errors import StoreError
from apogee.store.checkpoint import AbortMark, StoreCheckpoint
from apogee.store.cleanup import CleanService, CommittedOffsets, DiskUsage
from apogee.store.commitlog import CommitLog, wall_clock_ms
from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from apogee.store.dispatch import DONE, MORE, ArrivalListener, Dispatcher, FileNeed
from apogee.store.flush import GroupCommit, PeriodicFlush
from apogee.store.index_service import IndexService
from apogee.store.inner import InnerBatch, InnerMessage, PlainMessage
from apogee.store.io_thread import IOThread
from apogee.store.mapped_file_queue import MappedFileQueue
from apogee.store.reads import StoreReader
from apogee.store.recovery import RecoveryReport, recover_commitlog
from apogee.store.results import GetResult, MessageFilter, PutResult, PutStatus, QueryResult
from apogee.store.time_search import Boundary

log = logging.getLogger("apogee.store.message_store")
_PUT_OK = PutStatus.PUT_OK  # read per put (an Enum class attribute read is slow: docs/architecture.md)

DISPATCH_BATCH = 2048

# The abort mark (the recovery start after a process crash) moves on after this much dispatch:
# a crash rescans and re-dispatches at most about this much (and whatever was not dispatched).
MARK_EVERY_BYTES = 1 << 20
MARK_EVERY_RECORDS = 1024

NO_LIMIT = 1 << 62


class MessageStore:
    """CommitLog + ConsumeQueues + index with their background services.

    Lifecycle: ``store = MessageStore(config)``; ``await store.start()`` (recovers, binds the
    running loop); use; ``await store.shutdown()`` (flushes, dispatches the rest, removes the
    ``abort`` file).  Also an async context manager.  ``clock`` (epoch ms), ``disk_usage``
    (percent used for a path) and ``hour_of_day`` are injectable for tests.
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], int] | None = None,
        disk_usage: DiskUsage | None = None,
        hour_of_day: Callable[[int], int] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.clock = clock or wall_clock_ms
        self.io = IOThread()
        # The CommitLog's fdatasyncs (group commit, periodic flush, flush()) have a thread of
        # their own, as RocketMQ's GroupCommitService / FlushRealTimeService do: a SYNC_FLUSH
        # put then waits for one fdatasync, never behind a ConsumeQueue or index flush, a
        # checkpoint, file creation or page warming queued on the I/O thread.  Only this
        # thread flushes the CommitLog, so its flushes stay one at a time.
        self.flush_io = IOThread("apogee-commitlog-flush")
        pre = config.preallocate_mapped_files
        # CommitLog blocks are allocated ahead of the writer in populate-sized steps, so disk
        # use follows the data; ConsumeQueue files (small) are allocated whole; index files
        # (420 MB, written sparsely) are left sparse.
        mfq = MappedFileQueue(config.commitlog_dir, config.mapped_file_size_commitlog,
                              preallocate=pre, executor=self.io.executor,
                              reserve_ahead=config.populate_ahead_bytes or None,
                              small_flushes=config.flush_disk_type is FlushDiskType.SYNC_FLUSH)
        self.commitlog = CommitLog(config, mfq, clock=self.clock)
        self.consume_queues = ConsumeQueueTable(config.consume_queue_dir,
                                                config.mapped_file_size_consume_queue,
                                                preallocate=pre)
        self.index: IndexService | None = None
        if config.message_index_enable:
            self.index = IndexService(config.index_dir, config.max_hash_slot_num,
                                      config.max_index_num, config.max_msgs_num_batch,
                                      preallocate=False)
        self.dispatcher = Dispatcher(self.commitlog, self.consume_queues, self.index,
                                     clock=self.clock)
        self.reader = StoreReader(config, self.commitlog, self.consume_queues, self.index)
        self.checkpoint = StoreCheckpoint(config.checkpoint_path)
        self.abort_mark = AbortMark(config.abort_path)
        self._mark_records = 0  # dispatcher.dispatched when the mark was last moved
        self.cleaner = CleanService(self, disk_usage, hour_of_day)
        self.sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.recovery: RecoveryReport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: GroupCommit | None = None
        self._periodic: PeriodicFlush | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._dispatch_event: asyncio.Event | None = None
        self._wake_pending = False
        self._dispatch_lock = asyncio.Lock()
        self._flushed = 0  # CommitLog offset known durable (SYNC_FLUSH dispatch limit)
        self._running = False
        self._accepting = False
        self._io_failed = False
        self._lock_fd: int | None = None
        # Replication: a slave's store takes only the master's bytes (append_replica);
        # replica_end is the end of its last whole record, as far as dispatch may read.
        self.slave = False
        self.replica_end = 0
        # Called once per loop turn that appended (the HA master wakes its senders).
        self.on_appended: Callable[[], None] | None = None
        # SYNC_MASTER: the HA master's wait for a slave to hold an offset (``_store_waits``).
        self.replica_request: Callable[[int], asyncio.Future[PutStatus]] | None = None
        self._ha_wake_pending = False
        # Latencies for the metrics exporter, observed on the loop: each CommitLog fsync, and
        # store time to ConsumeQueue of the last record of each dispatch pass.  The owner may
        # swap in NullHistograms before ``start`` (brokerStatsEnable=false).
        self.flush_latency = Histogram(FLUSH_BOUNDS)
        self.dispatch_latency = Histogram(DISPATCH_BOUNDS_MS, unit=0.001)

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._loop is not None:
            raise StoreError("store already started")
        self._loop = asyncio.get_running_loop()
        began = time.monotonic()
        try:
            self.recovery = await self.io.run(self._load_blocking)
        except BaseException:
            await self.io.run(self._close_blocking, False)
            self.io.shutdown()
            self.flush_io.shutdown()
            raise
        # What a restart after a crash costs (the soak and recovery_bench report it).
        log.info("store loaded and recovered in %.3f s (%s)", time.monotonic() - began,
                 "clean shutdown" if self.recovery.clean_shutdown else "after crash")
        self._flushed = self.commitlog.flushed_offset
        self._dispatch_event = asyncio.Event()
        self._dispatch_lock = asyncio.Lock()
        on_flushed, on_error = self._on_commitlog_flushed, self._on_flush_error
        if self.sync_flush:
            self._group = GroupCommit(self._loop, self.flush_io, self.commitlog,
                                      self.config.sync_flush_timeout_ms, on_flushed, on_error,
                                      latency=self.flush_latency)
        else:
            self._periodic = PeriodicFlush(self._loop, self.flush_io, self.commitlog, self.config,
                                           on_flushed, on_error, latency=self.flush_latency)
        self._running = True
        self.replica_end = self.commitlog.max_offset
        await self.cleaner.check_disk()
        self._update_accepting()
        self._spawn(self._dispatch_loop(), "dispatch")
        if self._periodic is not None:
            self._spawn(self._periodic.run(), "commitlog-flush")
        self._spawn(self._logic_flush_loop(), "logic-flush")
        self._spawn(self._cleanup_loop(), "cleanup")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"apogee-store-{name}")
        self._tasks.append(task)

    def _load_blocking(self) -> RecoveryReport:
        """Lock, load every file, recover, re-dispatch, create ``abort``.  Blocking."""
        cfg = self.config
        cfg.root.mkdir(parents=True, exist_ok=True)
        cfg.commitlog_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(cfg.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"store {cfg.root} is locked by another process") from None
        os.ftruncate(fd, 0)
        os.write(fd, b"lock")
        self._lock_fd = fd
        clean = not cfg.abort_path.exists()
        self.checkpoint.load()
        # After a crash recovery starts at the latest safe point known: the fsync'd checkpoint,
        # or (same boot, so the page cache survived) the abort mark of the dead process.
        safe = -1 if clean else max(self.checkpoint.safe_offset, AbortMark.read(cfg.abort_path))
        self.commitlog.mfq.load()
        report = recover_commitlog(
            self.commitlog.mfq, clean_shutdown=clean,
            safe_ts=self.checkpoint.min_timestamp(index_safe=cfg.message_index_safe),
            check_crc=cfg.check_crc_on_recover, safe_offset=safe,
        )
        end = report.end_offset
        clog_min = self.commitlog.min_offset
        self.consume_queues.load()
        if clean:
            self.consume_queues.recover(end, thorough=False)
            # Resume dispatch where the queues end.
            start = min(max(self.consume_queues.max_phys_end(), clog_min), end)
        else:
            # Keep the entries of records before the recovery start, rebuild the rest.
            start = min(max(report.start_offset, clog_min), end)
            self.consume_queues.recover_from(start, clog_min, self.commitlog.record_matches)
        self.consume_queues.correct_min_offsets(clog_min)
        if self.index is not None:
            self.index.load(clean_shutdown=clean, commitlog_end=end)
        self.commitlog.mfq.flush()  # the recovered tail may only be in the page cache
        self.dispatcher.offset = start
        redone = self.dispatcher.dispatch_all_inline(end)
        if redone:
            log.info("re-dispatched %d records from offset %d", redone, start)
        self._repair_holes()
        self.commitlog.rebuild_topic_queue_table(self.consume_queues.offset_table())
        mfq = self.commitlog.mfq
        if not mfq.files:
            mfq.add_file(0)  # here on the I/O thread, not on the loop at the first put
        else:
            mfq.preallocate_next()
        self.commitlog.last_store_ts = max(report.last_store_timestamp, self.dispatcher.last_store_ts,
                                           self.checkpoint.physic_msg_timestamp)
        ConsumeQueueTable.flush(self.consume_queues.snapshot(), 0)
        if self.index is not None:
            IndexService.flush(self.index.files)
        self.abort_mark.create(self.dispatcher.offset)  # fsyncs the directory
        self._mark_records = self.dispatcher.dispatched
        return report

    def _repair_holes(self) -> None:
        """After the re-dispatch of a crash recovery: fill the ConsumeQueue entries it had to
        skip from the CommitLog between the records around them; log those no record holds.
        Blocking (startup)."""
        for cq in self.consume_queues.snapshot():
            missing, cq.missing = cq.missing, None
            for first, stop in missing or ():
                before = cq.get_entry(first - 1) if first > cq.min_offset else None
                after = cq.get_entry(stop)
                begin = before[0] + before[1] if before and before[1] > 0 else self.commitlog.min_offset
                end = after[0] if after else self.dispatcher.offset
                filled = self.dispatcher.repair(cq, first, stop, begin, end)
                if filled < stop - first:
                    log.warning("%s-%d: %d of the queue offsets %d..%d hold no message (a put that failed "
                                "after taking them); pulls step over them", cq.topic, cq.queue_id,
                                stop - first - filled, first, stop - 1)
                if filled:
                    log.info("%s-%d: %d missing ConsumeQueue entries rebuilt from the CommitLog",
                             cq.topic, cq.queue_id, filled)

    async def shutdown(self) -> None:
        """Stop, flush and dispatch everything, persist the checkpoint, remove ``abort``."""
        if self._loop is None or not self._running:
            return
        self._running = False
        self._update_accepting()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        clean = not self._io_failed
        try:
            if clean:
                await self.flush()
                await self._dispatch_until_caught_up()
                await self._flush_logic(thorough=True)
        finally:
            if self._group is not None:
                self._group.close()
            await self.flush_io.run(int)  # one worker: every flush queued before is done
            self.flush_io.shutdown()
            await self.io.run(self._close_blocking, clean)
            self.io.shutdown()

    def _close_blocking(self, clean: bool) -> None:
        """Unmap everything; remove ``abort`` only after a clean flush.  Blocking."""
        if self.index is not None:
            self.index.close()
        self.consume_queues.close()
        self.commitlog.mfq.close()
        self.abort_mark.close(remove=clean and self._lock_fd is not None)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def __aenter__(self) -> MessageStore:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- puts ---------------------------------------------------------------------------------

    def _update_accepting(self) -> None:
        self._accepting = self._running and not self._io_failed and not self.cleaner.disk_full and not self.slave

    def serve_as_slave(self) -> None:
        """From now on puts are refused (SLAVE_READ_ONLY) and only ``append_replica`` writes,
        and dispatch stops at the last whole replicated record."""
        self.slave = True
        self._update_accepting()
        self._dispatch_limit = self._replica_dispatch_limit  # type: ignore[method-assign]

    def _replica_dispatch_limit(self) -> int:
        limit = self.replica_end
        return min(limit, self._flushed) if self.sync_flush else limit

    def append_replica(self, offset: int, data: bytes) -> None:
        """A slave writes the master's CommitLog bytes at its own end (see
        ``CommitLog.append_replica``); ConsumeQueues and index follow from them by dispatch.
        Raises StoreError when they do not continue this log."""
        if not self._running or self._io_failed:
            raise StoreError("the store is not running")
        self.commitlog.append_replica(offset, data)
        end = self.commitlog.complete_end(self.replica_end)
        if end != self.replica_end:
            self.replica_end = end
            if self._group is not None:
                self._group.request(end)
            self._wake_dispatch_soon()

    def _refused(self) -> PutResult:
        if self.slave and self._running:
            return PutResult(PutStatus.SLAVE_READ_ONLY)
        if self._running and self.cleaner.disk_full:
            return PutResult(PutStatus.DISK_FULL)
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE)

    def put_message_nowait(self, msg: InnerMessage, wait: bool = True) -> tuple[PutResult, Awaitable[PutStatus] | None]:
        """Append now; when the put must wait (SYNC_FLUSH, SYNC_MASTER) also return an
        awaitable of its final status (``_store_waits``).

        It resolves with PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_DISK_FAILED, FLUSH_SLAVE_TIMEOUT or
        SLAVE_NOT_AVAILABLE.  Under ASYNC_FLUSH on a master that is not SYNC_MASTER, and for
        a message whose WAIT is false (``wait``), it is None and the result is final.
        """
        if not self._accepting:
            return self._refused(), None
        return self._appended(self.commitlog.put_message(msg), wait)

    def put_messages_nowait(
        self, batch: InnerBatch, wait: bool = True
    ) -> tuple[PutResult, Awaitable[PutStatus] | None]:
        """A batch: its records are contiguous and become visible together."""
        if not self._accepting:
            return self._refused(), None
        return self._appended(self.commitlog.put_messages(batch), wait)

    def put_plain_nowait(self, msg: PlainMessage, wait: bool = True) -> tuple[PutResult, Awaitable[PutStatus] | None]:
        """``put_message_nowait`` of a single send ``native.scan_single`` accepted
        (``CommitLog.put_plain``)."""
        if not self._accepting:
            return self._refused(), None
        return self._appended(self.commitlog.put_plain(msg), wait)

    def _appended(self, result: PutResult, wait: bool) -> tuple[PutResult, Awaitable[PutStatus] | None]:
        """After an append: what the put waits for, if anything; else wake dispatch."""
        if result.status is _PUT_OK:
            if self._group is None and self.replica_request is None:
                self._wake_dispatch_soon()
                return result, None
            return result, self._store_waits(result.wrote_offset + result.wrote_bytes, wait)
        elif result.status is PutStatus.DISK_FULL or (
                result.status is PutStatus.CREATE_MAPPED_FILE_FAILED and self.commitlog.no_space):
            result.status = PutStatus.DISK_FULL  # what the client should hear (not "busy or broken")
            self._disk_full_now()
        return result, None

    def _store_waits(self, end: int, wait: bool) -> Awaitable[PutStatus] | None:
        """RocketMQ's ``submitFlushRequest`` + ``submitReplicaRequest`` for a record ending
        at ``end``: under SYNC_FLUSH the group commit's future, on a SYNC_MASTER the HA
        master's (``replica_request``: PUT_OK once a slave holds ``end``, FLUSH_SLAVE_TIMEOUT,
        or SLAVE_NOT_AVAILABLE at once), both combined as CommitLog.java does: any non-OK
        status wins, the replica's last.  A message with WAIT=false waits for neither (its
        flush is still started)."""
        group = self._group
        replica = self.replica_request
        flushed = group.request(end) if group is not None else None
        if group is None:
            self._wake_dispatch_soon()  # it also wakes the HA senders (on_appended)
        elif replica is not None and not self._ha_wake_pending:
            # SYNC_FLUSH dispatches after the fsync, but a slave may take the bytes now.
            self._ha_wake_pending = True
            self._loop.call_soon(self._wake_ha)  # type: ignore[union-attr]
        if not wait:
            return None
        if replica is None:
            return flushed
        replicated = replica(end)
        return replicated if flushed is None else _flushed_and_replicated(flushed, replicated)

    def _wake_ha(self) -> None:
        self._ha_wake_pending = False
        hook = self.on_appended
        if hook is not None:
            hook()

    def _disk_full_now(self) -> None:
        """A put found no disk space before the periodic check did: refuse puts from now on
        (DISK_FULL) and run a cleanup pass at once; the next check decides when to accept
        them again."""
        if self.cleaner.disk_full:
            return
        log.error("no disk space left for the CommitLog: refusing writes until files are deleted")
        self.cleaner.disk_full = self.cleaner.clean_immediately = True
        self._update_accepting()
        if self._running:
            self._spawn(self.run_cleanup(), "cleanup-now")

    def _wake_dispatch_soon(self) -> None:
        """Wake the dispatcher one callback later, not now.

        The broker answers a put in the same loop turn (its response write is scheduled right
        after this), so deferring the wake-up puts the socket write ahead of the ConsumeQueue
        and index work: the producer's latency does not include dispatch.  One pending wake-up
        covers every put of the turn.
        """
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon(self._wake_dispatch)  # type: ignore[union-attr]

    def _wake_dispatch(self) -> None:
        self._wake_pending = False
        hook = self.on_appended
        if hook is not None:
            hook()
        # Dispatch right here when nothing else is dispatching and no file is needed: a held
        # pull is then answered in this loop turn rather than after the dispatch task's own
        # wake-up (two turns later).  Anything else goes to the task.
        if not self._dispatch_lock.locked() and self._running and self._dispatch_pass() == DONE:
            return
        if self._dispatch_event is not None:
            self._dispatch_event.set()

    async def put_message(self, msg: InnerMessage, wait: bool = True) -> PutResult:
        result, durable = self.put_message_nowait(msg, wait)
        if durable is not None:
            status = await durable
            if status is not PutStatus.PUT_OK:
                result.status = status
        return result

    async def put_messages(self, batch: InnerBatch, wait: bool = True) -> PutResult:
        result, durable = self.put_messages_nowait(batch, wait)
        if durable is not None:
            status = await durable
            if status is not PutStatus.PUT_OK:
                result.status = status
        return result

    # --- flushing and dispatch (owner loop) ---------------------------------------------------

    def _on_commitlog_flushed(self, durable: int, store_ts: int) -> None:
        if self._group is not None:
            self._group.resolve(durable)
        if durable > self._flushed:
            self._flushed = durable
            if self.on_appended is not None:
                self.on_appended()
            if store_ts > 0:
                self.checkpoint.physic_msg_timestamp = store_ts
            if self.sync_flush and self._dispatch_event is not None:
                self._dispatch_event.set()

    def _on_flush_error(self, exc: BaseException) -> None:
        log.critical("fsync failed (%s): the store no longer accepts writes", exc)
        self.abort_mark.invalidate()  # the page cache may have dropped writes: trust only the checkpoint
        self._io_failed = True
        self._update_accepting()

    async def flush(self) -> int:
        """fdatasync the CommitLog now; returns the durable offset."""
        ts = self.commitlog.last_store_ts
        try:
            durable = await self.flush_io.run(self.commitlog.mfq.flush)
        except OSError as exc:
            self._on_flush_error(exc)
            raise StoreError(f"CommitLog flush failed: {exc}") from exc
        self._on_commitlog_flushed(durable, ts)
        return durable

    def _dispatch_limit(self) -> int:
        return self._flushed if self.sync_flush else self.commitlog.max_offset

    async def _dispatch_loop(self) -> None:
        event = self._dispatch_event
        assert event is not None
        while True:
            await event.wait()
            event.clear()
            await self._dispatch_until_caught_up()

    async def _dispatch_until_caught_up(self) -> None:
        """Dispatch up to the current limit.  One caller at a time: a file being created
        for one caller must not be created again by another."""
        async with self._dispatch_lock:
            await self._dispatch_locked()

    def _dispatch_pass(self) -> str | FileNeed:
        """One dispatcher pass up to the limit; its latency observed, the abort mark moved."""
        d = self.dispatcher
        before = d.dispatched
        result = d.dispatch(self._dispatch_limit(), DISPATCH_BATCH)
        if d.dispatched != before:
            # The wall clock, not ``self.clock``: an observation must not consume a test's ticks.
            self.dispatch_latency.observe(wall_clock_ms() - d.last_store_ts)
        self._move_mark()
        return result

    def _move_mark(self) -> None:
        """Move the abort mark to the dispatched offset every MARK_EVERY_* of dispatch."""
        d = self.dispatcher
        if (d.offset - self.abort_mark.offset >= MARK_EVERY_BYTES
                or d.dispatched - self._mark_records >= MARK_EVERY_RECORDS):
            self._mark_records = d.dispatched
            self.abort_mark.update(d.offset)

    async def _dispatch_locked(self) -> None:
        while True:
            result = self._dispatch_pass()
            if result == DONE:
                return
            if result == MORE:
                await asyncio.sleep(0)
                continue
            assert isinstance(result, FileNeed)
            try:
                created = await self.io.run(result.create)
            except OSError as exc:
                log.error("dispatch cannot create %s: %s; retrying in 1 s", result.what, exc)
                await asyncio.sleep(1.0)
                continue
            result.attach(created)

    async def wait_dispatched(self) -> None:
        """Dispatch everything currently allowed (tests, admin; the dispatcher does it anyway)."""
        await self._dispatch_until_caught_up()

    async def _logic_flush_loop(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        last_thorough = loop.time()
        while True:
            await asyncio.sleep(cfg.flush_interval_consume_queue_ms / 1000)
            thorough = loop.time() - last_thorough >= cfg.flush_consume_queue_thorough_interval_ms / 1000
            if thorough:
                last_thorough = loop.time()
            try:
                await self._flush_logic(thorough)
            except OSError as exc:
                log.error("ConsumeQueue/index flush failed: %s", exc)

    async def _flush_logic(self, thorough: bool) -> None:
        """Flush ConsumeQueues and index files, then persist the checkpoint.

        A thorough flush writes every dirty ConsumeQueue page: then every entry of a record
        below the offset dispatched when it began is on disk, and so is the CommitLog below
        the durable offset.  The smaller of the two is the checkpoint's safe offset, where
        recovery after a power loss starts (after a process crash: the abort mark)."""
        logics_ts = self.dispatcher.last_store_ts
        safe = min(self.dispatcher.offset, self._flushed)
        queues = self.consume_queues.snapshot()
        least = 0 if thorough else self.config.flush_consume_queue_least_pages
        index_files = self.index.flush_targets() if self.index is not None else []
        index_ts = self.index.last.end_ts if self.index is not None and self.index.last else 0
        await self.io.run(ConsumeQueueTable.flush, queues, least)
        await self.io.run(IndexService.flush, index_files)
        cp = self.checkpoint
        if thorough and logics_ts > 0:
            cp.logics_msg_timestamp = logics_ts
        if thorough and safe > cp.safe_offset:
            cp.safe_offset = safe
        if index_ts > 0:
            cp.index_msg_timestamp = index_ts
        await self.io.run(cp.persist)

    async def _cleanup_loop(self) -> None:
        await self.cleaner.run()

    async def run_cleanup(self, now_ms: int | None = None) -> int:
        """One expiry / disk-guard pass now; returns how many CommitLog files were deleted."""
        deleted = await self.cleaner.run_once(now_ms)
        self._update_accepting()
        return deleted

    async def check_disk(self) -> float:
        """Measure disk use now and refuse or take puts accordingly (the disk guard's check
        without a cleanup pass); returns the use in percent."""
        usage = await self.cleaner.check_disk()
        self._update_accepting()
        return usage

    def set_committed_offsets(self, committed: CommittedOffsets) -> None:
        """Give the store the consumer groups' committed offsets (the broker's table): a
        cleanup logs and counts what it deletes before a group consumed it, and with
        ``cleanUnconsumedFileEnable=false`` keeps it."""
        self.cleaner.committed_offsets = committed

    def disk_util(self) -> str:
        """Disk use as RocketMQ's answer to a refused put shows it: ``CL:  0.91 CQ:  0.91 INDEX:  0.91``
        (fractions of the CommitLog, ConsumeQueue and index partitions, at the last check)."""
        return "CL: {0:5.2f} CQ: {0:5.2f} INDEX: {0:5.2f}".format(self.cleaner.last_usage / 100)

    def request_delete_files(self) -> None:
        """Delete expired files on the next passes whatever the hour."""
        self.cleaner.request_delete()

    # --- listeners ----------------------------------------------------------------------------

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(topic, queue_id, max_offset, tags_code, properties)`` on the loop
        for each message that becomes visible (long polling wakes on it)."""
        self.dispatcher.listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        if listener in self.dispatcher.listeners:
            self.dispatcher.listeners.remove(listener)

    # --- reads --------------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int = NO_LIMIT,
        message_filter: MessageFilter | None = None,
    ) -> GetResult:
        """Up to ``max_msg_nums`` messages of a queue from ``offset`` (RocketMQ getMessage)."""
        if not self._running:
            raise StoreError("store not running")
        return self.reader.get_message(topic, queue_id, offset, max_msg_nums, max_total_bytes,
                                       message_filter)

    async def get_message_async(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int = NO_LIMIT,
        message_filter: MessageFilter | None = None,
    ) -> GetResult:
        """``get_message``, with cold data (far behind the head) paged in on the I/O thread
        first, so the socket write of the slices does not fault on the event loop."""
        result = self.get_message(group, topic, queue_id, offset, max_msg_nums, max_total_bytes,
                                  message_filter)
        if result.suggest_pulling_from_slave and result.buffers:
            await self.io.run(_touch_pages, list(result.buffers))
        return result

    async def delete_topic(self, topic: str) -> int:
        """Remove a deleted topic's ConsumeQueues and queue offsets (RocketMQ's
        cleanUnusedTopic, for one topic), so a topic created again starts empty at offset 0.
        Its CommitLog records and index entries age out as usual.  Returns the queues removed."""
        doomed = self.consume_queues.remove_topic(topic)
        self.commitlog.forget_topic(topic)
        if doomed:
            await self.io.run(self.consume_queues.destroy, doomed, topic)
        return len(doomed)

    async def clean_expired_consume_queues(self) -> int:
        """RocketMQ's cleanExpiredConsumerQueue (CLEAN_EXPIRED_CONSUMEQUEUE): destroy every
        ConsumeQueue whose messages all lie below the CommitLog's first offset (each was
        deleted with its CommitLog file), except the schedule topic's; the queue starts again
        at offset 0 as in RocketMQ.  A queue with a message stored but not yet dispatched is
        kept.  The other queues' files below the minimum go at once (the cleaner's pass).
        Returns how many queues were destroyed."""
        min_offset = self.commitlog.min_offset
        doomed: dict[str, list[ConsumeQueue]] = {}
        for (topic, queue_id), cq in list(self.consume_queues.queues.items()):
            if topic == SCHEDULE_TOPIC or cq.max_phys_end == 0 or cq.max_phys_end > min_offset:
                continue
            if not self.commitlog.forget_queue(topic, queue_id, cq.max_offset):
                continue  # a message of it is stored and about to be dispatched
            del self.consume_queues.queues[(topic, queue_id)]
            log.info("expired ConsumeQueue %s-%d destroyed: its last message ended at %d, the CommitLog starts "
                     "at %d", topic, queue_id, cq.max_phys_end, min_offset)
            doomed.setdefault(topic, []).append(cq)
        for topic, queues in doomed.items():
            await self.io.run(self.consume_queues.destroy, queues, topic)
        await self.cleaner.clean_logic_files()
        return sum(map(len, doomed.values()))

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        return self.reader.commit_log_offset_in_queue(topic, queue_id, queue_offset)

    def get_offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = Boundary.NEAREST
    ) -> int:
        """searchOffset's answer (``time_search``): RocketMQ 4.9.8's nearest entry by default."""
        return self.reader.offset_in_queue_by_time(topic, queue_id, timestamp_ms, boundary)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        return self.reader.store_time_in_queue(topic, queue_id, queue_offset)

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        return self.reader.earliest_message_time(topic, queue_id)

    def select_one_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> memoryview | None:
        return self.reader.select_by_offset(commit_log_offset, size)

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageExt | None:
        return self.reader.look_by_offset(commit_log_offset, size)

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryResult:
        return self.reader.query(topic, key, max_num, begin_ms, end_ms)

    # --- state ----------------------------------------------------------------------------------

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def flushed_phy_offset(self) -> int:
        return self._flushed

    @property
    def dispatch_behind_bytes(self) -> int:
        return self._dispatch_limit() - self.dispatcher.offset

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next put to this queue will get."""
        return self.commitlog.topic_queue_table.get((topic, queue_id), 0)

    def runtime_info(self) -> dict[str, Any]:
        return {
            "flushDiskType": self.config.flush_disk_type.name,
            "commitLogMinOffset": self.commitlog.min_offset,
            "commitLogMaxOffset": self.commitlog.max_offset,
            "commitLogFlushedOffset": self._flushed,
            "dispatchOffset": self.dispatcher.offset,
            "dispatchBehindBytes": self.dispatch_behind_bytes,
            "dispatchedRecords": self.dispatcher.dispatched,
            "consumeQueues": len(self.consume_queues.queues),
            "indexFiles": len(self.index.files) if self.index is not None else 0,
            "commitLogFsyncs": (self._group.fsyncs if self._group else
                                self._periodic.fsyncs if self._periodic else 0),
            "diskUsedPercent": round(self.cleaner.last_usage, 2),
            "diskFull": self.cleaner.disk_full,
            "unconsumedDeleted": self.cleaner.unconsumed_deleted_total,
            "badConsumeQueueEntries": self.reader.bad_entries,
            "writable": self._accepting,
        }


async def _flushed_and_replicated(flushed: Awaitable[PutStatus], replicated: Awaitable[PutStatus]) -> PutStatus:
    """CommitLog.java's thenCombine: the replica's non-OK status wins, then the flush's."""
    flush_status = await flushed
    replica_status = await replicated
    return replica_status if replica_status is not PutStatus.PUT_OK else flush_status


def _touch_pages(buffers: list[memoryview]) -> None:
    """Read one byte per page so the pages are resident.  Blocking."""
    for buf in buffers:
        for pos in range(0, len(buf), 4096):
            buf[pos]
