"""An ordered run of equally sized MappedFiles in one directory (RocketMQ MappedFileQueue).

Files follow each other exactly: file k starts at ``first.start + k * size``, so finding the
file of an offset is arithmetic.  Only the owner's thread changes the list (append, roll,
removal of expired files); blocking work is handed to the I/O executor: pre-creating the next
file (RocketMQ's AllocateMappedFileService), fdatasync and unlinking.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from apogee.store.mapped_file import MappedFile, file_name

log = logging.getLogger("apogee.store.mapped_file_queue")


class MappedFileQueue:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        preallocate: bool = True,
        executor: concurrent.futures.Executor | None = None,
        reserve_ahead: int | None = None,
        small_flushes: bool = False,
    ) -> None:
        self.directory = directory
        # Flushed after small appends (the SYNC_FLUSH CommitLog, ConsumeQueues): the file being
        # written gets MappedFile.advise_random, which says why.
        self.small_flushes = small_flushes
        self.file_size = file_size
        self.preallocate = preallocate
        self.reserve_ahead = reserve_ahead  # None: allocate whole files when created
        self.executor = executor
        self.files: list[MappedFile] = []
        self._next: tuple[int, concurrent.futures.Future[MappedFile]] | None = None
        self.zombies: list[MappedFile] = []  # destroyed but still mapped (live slices)

    # --- loading (startup, I/O thread) ---------------------------------------------------------

    def load(self) -> None:
        """Map every segment file of the directory, in offset order.  Blocking."""
        if not self.directory.exists():
            return
        names = sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit())
        for path in names:
            start = int(path.name)
            if start % self.file_size:
                log.warning("ignoring %s: not aligned to the file size %d", path, self.file_size)
                continue
            if self.files and start != self.files[-1].end:
                log.warning("gap before %s; files after the gap are ignored", path)
                break
            mf = MappedFile.open_existing(path, start, self.file_size)
            if self.preallocate and self.reserve_ahead is not None:
                mf.reserved = 0  # unknown: the writer reserves again from where it writes
            self.files.append(mf)
        if self.files and self.small_flushes:
            self.files[-1].advise_random()  # the one the writer goes on appending to

    # --- lookup ------------------------------------------------------------------------------

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        """Global offset just past the last written byte."""
        last = self.files[-1] if self.files else None
        return last.start + last.wrote if last is not None else 0

    @property
    def flushed_offset(self) -> int:
        for mf in reversed(self.files):
            if mf.flushed:
                return mf.start + mf.flushed
        return self.files[0].start if self.files else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file holding global ``offset``, or None if it is not (or no longer) stored."""
        files = self.files
        if not files:
            return None
        idx = (offset - files[0].start) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.start <= offset < mf.end:
                return mf
        return None

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(list(self.files))

    def __len__(self) -> int:
        return len(self.files)

    # --- growth --------------------------------------------------------------------------------

    def path_for(self, start: int) -> Path:
        return self.directory / file_name(start)

    def create_file(self, start: int) -> MappedFile:
        """Create this queue's file starting at ``start``, as the queue's settings say (not yet
        appended: ``add_file`` or ``attach`` does that).  Blocking."""
        return MappedFile.create(self.path_for(start), start, self.file_size, preallocate=self.preallocate,
                                 reserve=self.reserve_ahead, advise_random=self.small_flushes)

    def add_file(self, start: int, *, inline: bool = True) -> MappedFile:
        """Create the file starting at ``start`` and append it.

        Uses the pre-created file if the I/O thread made it; otherwise creates it here (a
        short blocking call: open, ftruncate, fallocate, mmap) and logs it.  Then asks the
        I/O thread to pre-create the following one.  Raises OSError if creation fails.
        """
        if self.files and start != self.files[-1].end:
            raise ValueError(f"file at {start} would not follow {self.files[-1].path.name}")
        mf: MappedFile | None = None
        if self._next is not None and self._next[0] == start:
            fut = self._next[1]
            self._next = None
            if not fut.cancel():
                mf = fut.result()  # already done, or being created right now: short wait
        if mf is None:
            if not inline:
                raise BlockingIOError("next mapped file not ready")
            mf = self.create_file(start)
        self.files.append(mf)
        self.preallocate_next()
        if self.executor is not None and len(self.files) >= 3:
            self.executor.submit(self.files[-3].advise_cold)  # the writer has left it
        return mf

    def attach(self, mf: MappedFile) -> None:
        """Append a file the I/O thread created for this queue."""
        if self.files and mf.start != self.files[-1].end:
            raise ValueError(f"file at {mf.start} would not follow {self.files[-1].path.name}")
        self.files.append(mf)

    def next_start(self, wanted: int) -> int:
        """Start of the file to create so that ``wanted`` (a byte offset) is eventually covered."""
        if self.files:
            return self.files[-1].end
        return wanted - wanted % self.file_size

    def preallocate_next(self) -> None:
        """Have the I/O thread create the file after the last one, ready for the roll."""
        if self.executor is None or not self.files:
            return
        start = self.files[-1].end
        if self._next is not None:
            return
        self._next = (start, self.executor.submit(self.create_file, start))

    def discard_preallocated(self) -> None:
        """Delete a pre-created file that was never used (shutdown)."""
        if self._next is None:
            return
        _, fut = self._next
        self._next = None
        if fut.cancel():
            return
        try:
            mf = fut.result()
        except OSError:
            return
        if mf.wrote == 0:
            mf.destroy()
        else:  # pragma: no cover - never written to before being appended
            mf.close()

    # --- truncation and removal (startup / owner thread + I/O thread) --------------------------

    def truncate_to(self, offset: int) -> list[MappedFile]:
        """Drop every file that starts after ``offset`` and set the file holding it to end there.

        Returns the removed files; the caller destroys them (blocking).
        """
        removed: list[MappedFile] = []
        while self.files and self.files[-1].start > offset:
            removed.append(self.files.pop())
        if self.files:
            last = self.files[-1]
            pos = min(offset - last.start, last.size)
            last.wrote = pos
            last.flushed = min(last.flushed, pos)
        return removed

    def remove_front(self, count: int) -> list[MappedFile]:
        """Take the first ``count`` files out of the queue (the last file always stays)."""
        count = min(count, len(self.files) - 1)
        if count <= 0:
            return []
        removed = self.files[:count]
        del self.files[:count]
        return removed

    def retry_zombies(self) -> int:
        """Close destroyed files whose slices are gone; returns how many remain."""
        self.zombies = [mf for mf in self.zombies if not mf.close()]
        return len(self.zombies)

    def destroy_files(self, files: list[MappedFile]) -> None:
        """Delete ``files`` (blocking); mappings with live slices become zombies."""
        for mf in files:
            if not mf.destroy():
                self.zombies.append(mf)

    def flush(self) -> int:
        """fdatasync every file with unflushed bytes; returns the durable end offset.  Blocking."""
        durable = self.files[0].start if self.files else 0
        for mf in list(self.files):
            if mf.flushed < mf.wrote:
                mf.flush()
            if mf.flushed:
                durable = mf.start + mf.flushed
            if mf.flushed < mf.size:
                break
        return durable

    def dirty_bytes(self) -> int:
        return sum(mf.wrote - mf.flushed for mf in self.files if mf.wrote > mf.flushed)

    def close(self) -> None:
        """Unmap everything (shutdown).  Files with live slices are left to the GC."""
        self.discard_preallocated()
        for mf in self.files:
            if not mf.close():
                log.debug("%s still has live slices at close", mf.path)
        self.files.clear()
        self.retry_zombies()

    def total_disk_bytes(self) -> int:
        return len(self.files) * self.file_size

    def remove_directory_if_empty(self) -> None:
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)
