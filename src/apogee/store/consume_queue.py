"""ConsumeQueues: per (topic, queue) arrays of 20-byte entries pointing into the CommitLog.

Entry n (queue offset n) lives at byte n*20 (layout in ``store.layout.cq_unit``).  Entries are
written only by the dispatcher, in CommitLog order, so physical offsets grow along a queue;
recovery and expiry rely on that.  Placing entries by their queue offset (not "at the end", as
RocketMQ does) keeps offset -> entry exact even if a dispatch is repeated after a crash.

A put that needs a new file returns False; the dispatcher creates the file on the I/O thread
and tries again, so the event loop never creates files.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from apogee.store.layout.cq_unit import BLANK_PHYS_OFFSET, BLANK_SIZE, CQ_UNIT, CQ_UNIT_SIZE
from apogee.store.mapped_file import MappedFile
from apogee.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger("apogee.store.consume_queue")

_pack_unit = CQ_UNIT.pack_into
_unpack_unit = CQ_UNIT.unpack_from
_BLANK_UNIT = CQ_UNIT.pack(BLANK_PHYS_OFFSET, BLANK_SIZE, 0)


class ConsumeQueue:
    __slots__ = ("topic", "queue_id", "mfq", "min_logic_offset", "max_phys_end", "entries_per_file",
                 "verify_below", "missing")

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int,
                 *, preallocate: bool = True) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mfq = MappedFileQueue(directory, file_size, preallocate=preallocate, small_flushes=True)
        self.min_logic_offset = 0  # bytes
        self.max_phys_end = 0  # phys + size of the last entry
        self.entries_per_file = file_size // CQ_UNIT_SIZE
        # Entries below this queue offset were not written by this process (nor rebuilt by its
        # recovery): pulls check that they point at a record (StoreReader._collect).
        self.verify_below = 0
        # Recovery collects here the ranges of queue offsets a put had to skip (see ``put``).
        self.missing: list[tuple[int, int]] | None = None

    # --- offsets ---------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """Number of entries written: the next queue offset."""
        return self.mfq.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        first = self.mfq.first
        if first is None:
            return self.min_logic_offset // CQ_UNIT_SIZE
        return max(self.min_logic_offset, first.start) // CQ_UNIT_SIZE

    def roll_next_file(self, offset: int) -> int:
        """First queue offset of the file after the one holding ``offset``."""
        return offset + self.entries_per_file - offset % self.entries_per_file

    # --- writing (owner thread) -----------------------------------------------------------------

    def put(self, phys: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write entry ``queue_offset``; True if done (or already there), False if a file is needed."""
        pos = queue_offset * CQ_UNIT_SIZE
        files = self.mfq.files
        if files:
            last = files[-1]
            cur = last.start + last.wrote
            if pos < cur:
                return True  # already dispatched (a repeated dispatch after recovery)
            mf = self.mfq.find(pos)
            if mf is None:
                return False
            if pos > cur:
                self._skipped(cur // CQ_UNIT_SIZE, queue_offset)
        else:
            return False
        _pack_unit(mf.mm, pos - mf.start, phys, size, tags_code)
        mf.wrote = pos - mf.start + CQ_UNIT_SIZE
        self.max_phys_end = phys + size
        return True

    def put_run(self, first_queue_offset: int, entries: bytes | memoryview) -> int:
        """Write consecutive entries (20 bytes each) from ``first_queue_offset`` with one copy.

        Returns how many of them are now in place (entries already there count); fewer than
        all means the next one needs a new file.  ``put``'s rules, for a whole batch.
        """
        n = len(entries) // CQ_UNIT_SIZE
        files = self.mfq.files
        if not files:
            return 0
        last = files[-1]
        cur = last.start + last.wrote
        pos = first_queue_offset * CQ_UNIT_SIZE
        done = 0
        if pos < cur:
            done = min(n, (cur - pos) // CQ_UNIT_SIZE)
            if done == n:
                return n
            pos += done * CQ_UNIT_SIZE
        mf = self.mfq.find(pos)
        if mf is None:
            return done
        if pos > cur:
            self._skipped(cur // CQ_UNIT_SIZE, pos // CQ_UNIT_SIZE)
        rel = pos - mf.start
        fit = min(n - done, (mf.size - rel) // CQ_UNIT_SIZE)
        if fit <= 0:
            return done
        with memoryview(entries) as view:
            mf.mm[rel : rel + fit * CQ_UNIT_SIZE] = view[done * CQ_UNIT_SIZE : (done + fit) * CQ_UNIT_SIZE]
        mf.wrote = rel + fit * CQ_UNIT_SIZE
        phys, size, _ = _unpack_unit(entries, (done + fit - 1) * CQ_UNIT_SIZE)
        self.max_phys_end = phys + size
        return done + fit

    def _skipped(self, first: int, stop: int) -> None:
        """Entries ``first .. stop-1`` are left as zeros (holes): no record for them came
        before the one at ``stop``.  Recovery repairs them from the CommitLog if it can."""
        log.warning("%s-%d: entries %d..%d missing; writing %d", self.topic, self.queue_id,
                    first, stop - 1, stop)
        if self.missing is not None:
            self.missing.append((first, stop))

    def fill(self, queue_offset: int, phys: int, size: int, tags_code: int) -> bool:
        """Write entry ``queue_offset`` into a hole below the end (recovery's repair); False
        if it is not a hole.  Blocking (startup)."""
        pos = queue_offset * CQ_UNIT_SIZE
        mf = self.mfq.find(pos)
        if mf is None or pos - mf.start + CQ_UNIT_SIZE > mf.wrote:
            return False
        if _unpack_unit(mf.mm, pos - mf.start)[1] != 0:
            return False
        _pack_unit(mf.mm, pos - mf.start, phys, size, tags_code)
        return True

    def file_start_for(self, queue_offset: int) -> int:
        """Byte start of the next file to create on the way to ``queue_offset``."""
        return self.mfq.next_start(queue_offset * CQ_UNIT_SIZE)

    def attach(self, mf: MappedFile, queue_offset: int) -> None:
        """Add a file created for this queue.

        A queue whose first entry is not at offset 0 (its earlier files are gone) gets
        RocketMQ's pre-blank entries before it, so the file stays densely written.
        """
        if not self.mfq.files:
            pos = min(queue_offset * CQ_UNIT_SIZE, mf.end)
            if pos > mf.start:
                count = (pos - mf.start) // CQ_UNIT_SIZE
                mf.mm[0 : count * CQ_UNIT_SIZE] = _BLANK_UNIT * count
                mf.wrote = count * CQ_UNIT_SIZE
            self.min_logic_offset = max(self.min_logic_offset, pos)
        self.mfq.attach(mf)

    # --- reading ----------------------------------------------------------------------------

    def get_entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        pos = queue_offset * CQ_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mfq.find(pos)
        if mf is None or pos - mf.start + CQ_UNIT_SIZE > mf.wrote:
            return None
        phys, size, tags = _unpack_unit(mf.mm, pos - mf.start)
        return phys, size, tags

    def get_index_buffer(self, queue_offset: int) -> memoryview | None:
        """Entries from ``queue_offset`` to the end of its file (what a pull scans)."""
        pos = queue_offset * CQ_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mfq.find(pos)
        if mf is None:
            return None
        rel = pos - mf.start
        if rel >= mf.wrote:
            return None
        return mf.view[rel : mf.wrote]

    def iter_entries(self, begin: int = 0) -> Iterator[tuple[int, int, int, int]]:
        """``(queue_offset, phys, size, tags)`` from ``begin`` to the end (tests, tools)."""
        offset = max(begin, self.min_offset)
        while offset < self.max_offset:
            buf = self.get_index_buffer(offset)
            if buf is None:
                offset = self.roll_next_file(offset)
                continue
            for phys, size, tags in CQ_UNIT.iter_unpack(buf):
                yield offset, phys, size, tags
                offset += 1
            buf.release()

    # --- recovery, truncation, expiry (startup / I/O thread) ------------------------------------

    def recover(self, commitlog_end: int, *, thorough: bool) -> None:
        """Find the written end of the loaded files.  Blocking.

        Normal restart: the end is where the zero fill starts.  ``thorough`` (after a crash):
        every entry of the last three files must also be sane (size > 0, physical offsets not
        decreasing, inside the CommitLog); the queue ends at the first that is not.
        """
        files = self.mfq.files
        if not files:
            return
        first_idx = max(0, len(files) - 3)
        for mf in files[:first_idx]:
            mf.wrote = mf.flushed = mf.size  # files before the last three are full by construction
        prev_phys = -1
        end_pos = files[first_idx].start
        for mf in files[first_idx:]:
            nz = mf.last_nonzero(0)
            count = -(-nz // CQ_UNIT_SIZE)
            good = 0
            if thorough or count:
                check_from = 0 if thorough else count - 1
                good = check_from
                window = mf.view[check_from * CQ_UNIT_SIZE : count * CQ_UNIT_SIZE]
                for phys, size, _tags in CQ_UNIT.iter_unpack(window):
                    if size == BLANK_SIZE and phys == BLANK_PHYS_OFFSET:
                        good += 1  # pre-blank placeholder
                        continue
                    if phys < 0 or size <= 0 or phys < prev_phys or phys + size > commitlog_end:
                        break
                    prev_phys = phys
                    good += 1
                window.release()
                if not thorough and good < count:  # last entry bad: scan the whole file
                    return self.recover(commitlog_end, thorough=True)
            mf.wrote = mf.flushed = good * CQ_UNIT_SIZE
            end_pos = mf.start + mf.wrote
            if good * CQ_UNIT_SIZE < mf.size:
                break
        self._cut_at(end_pos, zero_tail=thorough)
        self._refresh_max_phys_end()
        self.correct_min_offset(0)

    def recover_from(self, safe_offset: int, commitlog_min: int,
                     verify: Callable[[int, int, int], bool]) -> int:
        """Recovery after a crash: keep the entries of records below ``safe_offset`` and cut
        the rest, which the dispatcher then writes again from the CommitLog.  Blocking.

        The checkpoint guarantees that every entry of a record below ``safe_offset`` was
        written (page cache, or disk for the fsync'd checkpoint); entries after them may be
        torn, zero or garbage.  So walk back from the written end (where the zero fill
        begins) to the last entry that lies below ``safe_offset`` and points at the record of
        this queue and offset (``verify(phys, size, queue_offset)``); entries below the
        CommitLog's minimum (files expired) and RocketMQ's pre-blank entries are kept as
        they are.  The walk is as long as the queue's part of the recovery window.  Returns
        the number of entries cut.
        """
        files = self.mfq.files
        if not files:
            return 0
        for mf in files:
            mf.wrote = mf.flushed = mf.size  # files before the written end are full by construction
        end_pos = files[0].start
        for mf in reversed(files):
            nz = mf.last_nonzero(0)
            if nz:
                end_pos = mf.start + min(mf.size, -(-nz // CQ_UNIT_SIZE) * CQ_UNIT_SIZE)
                break
        floor = max(files[0].start, self.min_logic_offset)
        pos = end_pos
        while pos > floor:
            holder = self.mfq.find(pos - CQ_UNIT_SIZE)
            assert holder is not None
            phys, size, _ = _unpack_unit(holder.mm, pos - CQ_UNIT_SIZE - holder.start)
            if phys == BLANK_PHYS_OFFSET and size == BLANK_SIZE:
                break
            if (size > 0 and phys >= 0 and phys + size <= safe_offset
                    and (phys < commitlog_min or verify(phys, size, pos // CQ_UNIT_SIZE - 1))):
                break
            pos -= CQ_UNIT_SIZE
        cut = (end_pos - pos) // CQ_UNIT_SIZE
        self.truncate_to_pos(pos)
        self.verify_below = pos // CQ_UNIT_SIZE
        self.correct_min_offset(commitlog_min)
        return cut

    def truncate_to_pos(self, pos: int) -> None:
        """Make byte ``pos`` the end: zero what follows, drop later files.  Blocking."""
        self._cut_at(pos)
        self._refresh_max_phys_end()

    def _cut_at(self, end_pos: int, *, zero_tail: bool = True) -> None:
        """Make ``end_pos`` the end: zero what follows in its file, drop later files.  Blocking.

        Zeroing matters: a later restart finds the end where the zeros begin, and stale
        entries left behind would point at whatever the CommitLog holds there by then.
        """
        removed = self.mfq.truncate_to(end_pos)
        self.mfq.destroy_files(removed)
        last = self.mfq.last
        if last is not None and zero_tail:
            tail = last.last_nonzero(last.wrote)
            if tail > last.wrote:
                last.zero_range(last.wrote, tail)

    def _refresh_max_phys_end(self) -> None:
        last = self.mfq.last
        self.max_phys_end = 0
        if last is not None and last.wrote >= CQ_UNIT_SIZE:
            phys, size, _ = _unpack_unit(last.mm, last.wrote - CQ_UNIT_SIZE)
            self.max_phys_end = phys + size

    def truncate_dirty(self, commitlog_end: int) -> int:
        """Drop entries pointing at or past ``commitlog_end``; returns how many.  Blocking."""
        dropped = 0
        end = self.max_offset
        while end > self.min_offset:
            entry = self.get_entry(end - 1)
            if entry is None or entry[0] + entry[1] <= commitlog_end:
                break
            end -= 1
            dropped += 1
        if dropped:
            self._cut_at(end * CQ_UNIT_SIZE)
            self._refresh_max_phys_end()
        return dropped

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Move the min offset past entries whose messages were deleted."""
        if self.mfq.first is not None:
            self.min_logic_offset = max(self.min_logic_offset, self.offset_at(commitlog_min) * CQ_UNIT_SIZE)

    def offset_at(self, commitlog_offset: int) -> int:
        """The first queue offset (from the min) whose message lies at or after
        ``commitlog_offset``; the max offset if none does.  Binary search: the physical
        offsets grow along the queue (a hole is judged by the entry after it)."""
        first = self.mfq.first
        if first is None:
            return self.min_offset
        lo = max(self.min_logic_offset, first.start) // CQ_UNIT_SIZE
        hi = self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            probe = mid
            entry = self.get_entry(probe)
            while entry is not None and entry[1] == 0 and probe + 1 < hi:  # a hole: judge by the next entry
                probe += 1
                entry = self.get_entry(probe)
            if entry is not None and (entry[1] == 0 or (entry[0] >= commitlog_offset and entry[1] != BLANK_SIZE)):
                hi = mid  # (only holes up to hi say nothing: keep them)
            else:
                lo = probe + 1
        return lo

    def expired_files(self, commitlog_min: int) -> int:
        """How many leading files only point below ``commitlog_min`` (never the last file)."""
        count = 0
        for mf in self.mfq.files[:-1]:
            if mf.wrote < mf.size:
                break
            phys, _size, _ = _unpack_unit(mf.mm, mf.size - CQ_UNIT_SIZE)
            if phys >= commitlog_min:
                break
            count += 1
        return count


class ConsumeQueueTable:
    """All ConsumeQueues of the store, by (topic, queue id), under ``<root>/consumequeue``."""

    def __init__(self, directory: Path, file_size: int, *, preallocate: bool = True) -> None:
        self.directory = directory
        self.file_size = file_size
        self.preallocate = preallocate
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue object (its first file is created by the dispatcher when needed)."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self.directory / topic / str(queue_id),
                              self.file_size, preallocate=self.preallocate)
            self.queues[(topic, queue_id)] = cq
        return cq

    def remove_topic(self, topic: str) -> list[ConsumeQueue]:
        """Take a deleted topic's queues out of the table (owner thread); the caller destroys
        their files with ``destroy`` on the I/O thread."""
        doomed = [cq for key, cq in self.queues.items() if key[0] == topic]
        for cq in doomed:
            del self.queues[(cq.topic, cq.queue_id)]
        return doomed

    def destroy(self, queues: list[ConsumeQueue], topic: str) -> None:
        """Delete the files and directories of queues taken out by ``remove_topic``.  Blocking
        (I/O thread: a flush queued before this one has run; none queued later sees them)."""
        for cq in queues:
            mfq = cq.mfq
            mfq.discard_preallocated()
            files = list(mfq.files)
            mfq.files.clear()
            mfq.destroy_files(files)
            mfq.remove_directory_if_empty()
        with contextlib.suppress(OSError):
            (self.directory / topic).rmdir()

    def snapshot(self) -> list[ConsumeQueue]:
        """A list copy, safe to hand to the I/O thread while the owner keeps adding queues."""
        return list(self.queues.values())

    def load(self) -> None:
        """Map every queue file under the directory.  Blocking."""
        if not self.directory.exists():
            return
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not (qdir.is_dir() and qdir.name.lstrip("-").isdigit()):
                    continue
                cq = self.get_or_create(topic_dir.name, int(qdir.name))
                cq.mfq.load()

    def recover(self, commitlog_end: int, *, thorough: bool) -> None:
        """Recover every queue, then drop entries past ``commitlog_end``.  Blocking."""
        for cq in self.snapshot():
            cq.recover(commitlog_end, thorough=thorough)
            dropped = cq.truncate_dirty(commitlog_end)
            if dropped:
                log.warning("%s-%d: dropped %d entries past CommitLog offset %d",
                            cq.topic, cq.queue_id, dropped, commitlog_end)
            cq.verify_below = cq.max_offset

    def recover_from(self, safe_offset: int, commitlog_min: int,
                     record_matches: Callable[[int, int, str, int, int], bool]) -> None:
        """``ConsumeQueue.recover_from`` for every queue (after a crash), collecting the
        queue offsets the re-dispatch has to skip (``missing``).  Blocking."""
        for cq in self.snapshot():
            def verify(phys: int, size: int, queue_offset: int, cq: ConsumeQueue = cq) -> bool:
                return record_matches(phys, size, cq.topic, cq.queue_id, queue_offset)

            cut = cq.recover_from(safe_offset, commitlog_min, verify)
            if cut:
                log.info("%s-%d: %d entries from CommitLog offset %d on are rebuilt from the log",
                         cq.topic, cq.queue_id, cut, safe_offset)
            cq.missing = []

    def correct_min_offsets(self, commitlog_min: int) -> None:
        for cq in self.snapshot():
            cq.correct_min_offset(commitlog_min)

    def max_phys_end(self) -> int:
        """Largest CommitLog end any queue points to (where dispatch resumes, RocketMQ)."""
        return max((cq.max_phys_end for cq in self.queues.values()), default=0)

    def offset_table(self) -> dict[tuple[str, int], int]:
        """Next queue offset of every queue (rebuilds the CommitLog's topic-queue table)."""
        return {key: cq.max_offset for key, cq in self.queues.items() if cq.max_offset > 0}

    @staticmethod
    def flush(queues: list[ConsumeQueue], least_pages: int) -> None:
        """fdatasync queues with at least ``least_pages`` dirty 4 KiB pages.  Blocking."""
        threshold = least_pages * 4096
        for cq in queues:
            if cq.mfq.dirty_bytes() > max(0, threshold - 1):
                cq.mfq.flush()

    def close(self) -> None:
        for cq in self.snapshot():
            cq.mfq.close()
