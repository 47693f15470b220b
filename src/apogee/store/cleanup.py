"""Expiry and the disk guard (RocketMQ CleanCommitLogService + CleanConsumeQueueService).

Every ``cleanResourceInterval`` ms:

1. Measure disk use of the store's partition (I/O thread).  Above
   ``diskSpaceWarningLevelRatio`` puts are refused (DISK_FULL) until use drops again; above
   ``diskSpaceCleanForciblyRatio`` the oldest files are deleted even if not expired.
2. At a ``deleteWhen`` hour, or when use passes ``diskMaxUsedSpaceRatio``, or when asked
   (``request_delete``), delete CommitLog files last modified more than ``fileReservedTime``
   hours ago, oldest first, at most 10 per pass, stopping at the first one to keep; never the
   newest file and never a file the dispatcher has not finished with.
3. Delete ConsumeQueue and index files that only point below the new CommitLog minimum and
   move each queue's min offset past removed messages.

Only whole files go, from the front: stored data is never rewritten.  Files are taken out of
their queues on the owner's thread (so no new reader finds them) and unlinked on the I/O
thread; a mapping with live slices is closed on a later pass.

What a deletion takes from consumers is logged and counted: for each consumer group and queue
(from ``committed_offsets``, the broker's table), the range of queue offsets deleted before
the group consumed them (``unconsumed_deleted``).  With ``cleanUnconsumedFileEnable=false``
no file holding such a message is deleted at all, and a full disk refuses puts instead.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from apogee.store.mapped_file import MappedFile

if TYPE_CHECKING:
    from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.store.cleanup")

DELETE_FILES_BATCH_MAX = 10
DiskUsage = Callable[[str], float]
CommittedOffsets = Callable[[], Iterable[tuple[str, str, int, int]]]
"""``() -> (group, topic, queue_id, next offset to consume)`` for every committed offset."""


def disk_used_percent(path: str) -> float:
    """Used share of the partition holding ``path``, in percent, as ``df`` shows it:
    used / (used + available to us).  ``total - free`` (Java's formula) counts blocks the file
    system reserves or never hands out, which on thin-provisioned disks reads 70 % on a disk
    ``df`` shows 29 % full and would trigger cleanup for nothing.  Blocking."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    if usage.used + usage.free <= 0:
        return -1.0
    return usage.used * 100.0 / (usage.used + usage.free)


def count_expired(files: list[MappedFile], now_ms: int, reserved_ms: int, force: bool,
                  dispatched_offset: int) -> int:
    """How many leading files may go (never the last).  Blocking: reads file mtimes."""
    count = 0
    for mf in files[:-1]:
        if count >= DELETE_FILES_BATCH_MAX or mf.end > dispatched_offset:
            break
        if force or now_ms >= mf.last_modified_ms() + reserved_ms:
            count += 1
        else:
            break
    return count


class CleanService:
    def __init__(self, store: MessageStore, disk_usage: DiskUsage | None = None,
                 hour_of_day: Callable[[int], int] | None = None) -> None:
        self._store = store
        self._config = store.config
        self._disk_usage = disk_usage or disk_used_percent
        self._hour_of_day = hour_of_day or (lambda ms: time.localtime(ms / 1000).tm_hour)
        self._manual = 0
        self._last_min_offset = -1
        self.disk_full = False
        self.clean_immediately = False
        self.last_usage = 0.0
        self.deleted_files = 0
        self._zombies: list[MappedFile] = []
        # Set by the broker: the store does not know consumer groups.
        self.committed_offsets: CommittedOffsets | None = None
        # Messages deleted before a group consumed them, by (group, topic, queue id), and in all.
        self.unconsumed_deleted: dict[tuple[str, str, int], int] = {}
        self.unconsumed_deleted_total = 0
        self._pass = asyncio.Lock()

    def request_delete(self, times: int = 20) -> None:
        """Delete expired files on the next passes regardless of hour (mqadmin deleteExpiredCommitLog)."""
        self._manual = times

    async def run(self) -> None:
        interval = self._config.clean_resource_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cleanup pass failed")

    def _is_delete_hour(self, now_ms: int) -> bool:
        hour = self._hour_of_day(now_ms)
        return any(p.strip().isdigit() and int(p) == hour for p in self._config.delete_when.split(";"))

    async def check_disk(self) -> float:
        """Update the disk-full and clean-immediately flags; returns the use in percent."""
        store = self._store
        paths = {str(self._config.commitlog_dir), str(self._config.root)}
        usages = [await store.io.run(self._disk_usage, p) for p in paths]
        usage = max(usages)
        self.last_usage = usage
        cfg = self._config
        if usage > cfg.disk_space_warning_level_ratio:
            if not self.disk_full:
                log.error("disk %.1f%% used, above %d%%: refusing writes until files are deleted",
                          usage, cfg.disk_space_warning_level_ratio)
            self.disk_full = True
            self.clean_immediately = True
        else:
            if self.disk_full:
                log.warning("disk %.1f%% used: accepting writes again", usage)
            self.disk_full = False
            self.clean_immediately = usage > cfg.disk_space_clean_forcibly_ratio
        return usage

    async def run_once(self, now_ms: int | None = None) -> int:
        """One pass; returns how many CommitLog files were deleted.  One pass at a time (a
        full disk starts one besides the periodic ones)."""
        async with self._pass:
            return await self._run_once(now_ms)

    async def _run_once(self, now_ms: int | None) -> int:
        store = self._store
        cfg = self._config
        now = store.clock() if now_ms is None else now_ms
        usage = await self.check_disk()
        space_to_delete = usage < 0 or usage > cfg.disk_max_used_space_ratio
        deleted = 0
        if self._is_delete_hour(now) or space_to_delete or self._manual > 0:
            if self._manual > 0:
                self._manual -= 1
            force = cfg.clean_file_forcibly_enable and self.clean_immediately
            mfq = store.commitlog.mfq
            snapshot = list(mfq.files)
            keep_from = store.dispatcher.offset
            if not cfg.clean_unconsumed_file_enable:
                keep_from = min(keep_from, self._first_unconsumed())
            count = await store.io.run(
                count_expired, snapshot, now, cfg.file_reserved_time_h * 3_600_000, force, keep_from,
            )
            if count and mfq.files[:count] == snapshot[:count]:
                self._report_unconsumed(mfq.files[count].start, force)
                removed = mfq.remove_front(count)
                await store.io.run(mfq.destroy_files, removed)
                deleted = len(removed)
                self.deleted_files += deleted
                log.info("deleted %d expired CommitLog file(s) %s; min offset now %d", deleted,
                         [mf.path.name for mf in removed], mfq.min_offset)
        await self.clean_logic_files()
        await store.io.run(store.commitlog.mfq.retry_zombies)
        return deleted

    def _committed(self) -> dict[tuple[str, int], list[tuple[str, int]]]:
        """Committed offsets by (topic, queue id): [(group, next offset)]."""
        out: dict[tuple[str, int], list[tuple[str, int]]] = {}
        if self.committed_offsets is not None:
            for group, topic, queue_id, offset in self.committed_offsets():
                out.setdefault((topic, queue_id), []).append((group, offset))
        return out

    def _first_unconsumed(self) -> int:
        """CommitLog offset of the oldest message some group has not consumed yet."""
        first = 1 << 62
        queues = self._store.consume_queues
        for (topic, queue_id), groups in self._committed().items():
            cq = queues.get(topic, queue_id)
            if cq is None:
                continue
            entry = cq.get_entry(max(cq.min_offset, min(offset for _, offset in groups)))
            if entry is not None and entry[1] > 0:
                first = min(first, entry[0])
        return first

    def _report_unconsumed(self, new_min: int, forced: bool) -> None:
        """Log and count, per group and queue, the messages below CommitLog offset
        ``new_min`` (about to be deleted) that the group has not consumed."""
        queues = self._store.consume_queues
        level = logging.WARNING if forced else logging.INFO
        for (topic, queue_id), groups in self._committed().items():
            cq = queues.get(topic, queue_id)
            if cq is None:
                continue
            low, high = cq.min_offset, cq.offset_at(new_min)
            for group, offset in groups:
                first = max(offset, low)
                if first >= high:
                    continue
                key = (group, topic, queue_id)
                self.unconsumed_deleted[key] = self.unconsumed_deleted.get(key, 0) + high - first
                self.unconsumed_deleted_total += high - first
                log.log(level, "%s deletes %d messages group %s has not consumed: %s-%d queue offsets %d..%d",
                        "forced cleanup (disk full)" if forced else "expiry", high - first, group, topic,
                        queue_id, first, high - 1)

    async def clean_logic_files(self) -> None:
        """Drop ConsumeQueue and index files that only point below the CommitLog minimum."""
        store = self._store
        min_offset = store.commitlog.min_offset
        if min_offset <= self._last_min_offset and not self._zombies:
            return
        self._last_min_offset = min_offset
        doomed: list[MappedFile] = []
        for cq in store.consume_queues.snapshot():
            n = cq.expired_files(min_offset)
            if n:
                doomed.extend(cq.mfq.remove_front(n))
            cq.correct_min_offset(min_offset)
        if doomed or self._zombies:
            self._zombies = await store.io.run(_destroy_all, doomed + self._zombies)
        index = store.index
        if index is not None:
            expired = index.take_expired(min_offset)
            if expired:
                await store.io.run(index.destroy_files, expired)
            await store.io.run(index.retry_zombies)


def _destroy_all(files: list[MappedFile]) -> list[MappedFile]:
    """Delete and unmap; returns the files still mapped by live slices.  Blocking."""
    left = []
    for mf in files:
        if not mf.destroy():
            left.append(mf)
    return left
