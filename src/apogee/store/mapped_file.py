"""One fixed-size, memory-mapped segment file, named by the global offset of its first byte.

Threads: ``create``/``open_existing``, ``flush`` (fdatasync), ``destroy`` and ``advise_cold``
block and run on the store's I/O thread; appends (slice assignment into ``mm``) and reads
(``slice``) run on the owner's thread.  ``wrote`` is advanced only *after* the bytes are in
the mapping, so a flusher that reads ``wrote`` and then fdatasyncs covers every byte below it.

Why fdatasync and not ``mmap.flush``: CPython's ``mmap.flush`` holds the GIL during msync,
stalling the event loop; on Linux fdatasync of the file writes back pages dirtied through a
shared mapping just the same, and releases the GIL.

Lifetime: readers receive ``memoryview`` slices of the mapping (zero copy).  While one is
alive the mapping cannot be closed (CPython raises BufferError), so ``destroy`` unlinks the
file at once but may leave the mapping open; the owner retries ``close`` later.  A slice
therefore stays valid even after its file is deleted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("apogee.store.mapped_file")

OS_PAGE_SIZE = 4096
_ZERO_CHUNK = bytes(1 << 20)

# madvise through ctypes: unlike mmap.madvise it releases the GIL while the kernel works.
_MADV_NORMAL = 0
_MADV_RANDOM = 1
_MADV_WILLNEED = 3
_MADV_DONTNEED = 4
_MADV_POPULATE_READ = 22  # Linux >= 5.14
_madvise: Any = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _madvise = _libc.madvise
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover - not Linux/glibc
    _madvise = None
_populate_advice = _MADV_POPULATE_READ


def _buffer_address(mm: mmap.mmap) -> int:
    holder = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(holder)
    finally:
        del holder  # drop the buffer export at once, or the mapping could never close


def file_name(offset: int) -> str:
    """RocketMQ's ``offset2FileName``: 20-digit zero-padded decimal."""
    return f"{offset:020d}"


class MappedFile:
    __slots__ = ("path", "start", "size", "fd", "mm", "view", "wrote", "flushed", "closed",
                 "populated", "reserved", "_address")

    def __init__(self, path: Path, start: int, size: int, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.fd = fd
        self.mm = mm
        self.view = memoryview(mm)
        self.wrote = 0  # bytes of valid data from the file start
        self.flushed = 0  # bytes known to be on disk
        self.closed = False
        self.populated = 0  # bytes from the start whose pages were faulted in ahead of writes
        self.reserved = size  # bytes from the start whose disk blocks are known allocated
        self._address = 0

    # --- creation (I/O thread) --------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, start: int, size: int, *, preallocate: bool = True,
               reserve: int | None = None, advise_random: bool = False) -> MappedFile:
        """Create (or reuse an empty) file of ``size`` bytes and map it.  Blocking.

        With ``preallocate`` the first ``reserve`` bytes (all by default) get their disk blocks
        with posix_fallocate; the writer reserves the rest ahead of itself (``reserve``).  On a
        full disk that fails with OSError(ENOSPC) instead of a write into the mapping killing
        the process with SIGBUS (or writeback losing it).  Without it the file is sparse.
        ``advise_random``: see ``advise_random``, for a file flushed after small appends.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:  # e.g. pre-created by a run that stopped before using it
            fd = os.open(path, os.O_RDWR)
            created = False
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            reserved = size
            if preallocate:
                reserved = size if reserve is None else max(0, min(size, reserve))
                if reserved and not _fallocate(fd, 0, reserved):
                    reserved = size
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if created:  # never delete a file we did not make
                _unlink_quietly(path)
            raise
        mf = cls(path, start, size, fd, mm)
        mf.reserved = reserved
        if advise_random:
            mf.advise_random()
        return mf

    @classmethod
    def open_existing(cls, path: Path, start: int, size: int) -> MappedFile:
        """Map a file found at startup; ``wrote``/``flushed`` are set later by recovery."""
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                if actual > size:
                    raise OSError(f"{path}: size {actual} differs from configured {size}")
                os.ftruncate(fd, size)  # a short file (crash during creation): extend with zeros
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, start, size, fd, mm)

    # --- state ------------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Global offset just past this file."""
        return self.start + self.size

    @property
    def is_full(self) -> bool:
        return self.wrote >= self.size

    @property
    def wrote_offset(self) -> int:
        return self.start + self.wrote

    def slice(self, pos: int, size: int) -> memoryview:
        """Zero-copy view of ``size`` bytes at file position ``pos``."""
        return self.view[pos : pos + size]

    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except OSError:
            return 0

    # --- blocking operations (I/O thread) ------------------------------------------------------

    def flush(self) -> int:
        """fdatasync the file; returns the position now known durable.  Blocking."""
        target = self.wrote
        if target > self.flushed and not self.closed:
            os.fdatasync(self.fd)
            self.flushed = max(self.flushed, target)  # the native flusher may have gone further
        return self.flushed

    def zero_range(self, begin: int, end: int) -> None:
        """Overwrite ``[begin, end)`` with zeros (recovery clears torn tails)."""
        pos = begin
        while pos < end:
            n = min(len(_ZERO_CHUNK), end - pos)
            self.mm[pos : pos + n] = _ZERO_CHUNK[:n]
            pos += n

    def last_nonzero(self, begin: int) -> int:
        """Position just past the last non-zero byte at or after ``begin`` (``begin`` if none).

        Scans backwards in 1 MiB chunks with C-speed comparisons; used by recovery to report
        how many bytes a truncation drops and to clear them.  Only the file's data ranges are
        read (SEEK_DATA / SEEK_HOLE): a hole reads as zeros by definition, and reading the
        never-written rest of a 1 GiB file through the mapping would fault in every page of it.
        """
        for low, high in reversed(self._data_ranges(begin)):
            pos = high
            while pos > low:
                start = max(low, pos - len(_ZERO_CHUNK))
                chunk = self.view[start:pos]
                try:
                    if chunk != _ZERO_CHUNK[: pos - start]:
                        data = bytes(chunk).rstrip(b"\x00")
                        return start + len(data)
                finally:
                    chunk.release()
                pos = start
        return begin

    def _data_ranges(self, begin: int) -> list[tuple[int, int]]:
        """The ranges of ``[begin, size)`` that may hold data (the whole range where the file
        system cannot tell)."""
        ranges: list[tuple[int, int]] = []
        pos = begin
        try:
            while pos < self.size:
                try:
                    data = os.lseek(self.fd, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # no data after pos
                        break
                    raise
                if data >= self.size:
                    break
                hole = min(os.lseek(self.fd, data, os.SEEK_HOLE), self.size)
                ranges.append((data, hole))
                pos = hole
        except (OSError, AttributeError):
            return [(begin, self.size)]
        return ranges

    def reserve(self, end: int) -> None:
        """Allocate disk blocks up to ``end`` (posix_fallocate).  Blocking; OSError(ENOSPC)."""
        end = min(end, self.size)
        if end <= self.reserved or self.closed:
            return
        if not _fallocate(self.fd, self.reserved, end - self.reserved):
            end = self.size  # the filesystem cannot preallocate: nothing to track
        self.reserved = end

    def populate(self, begin: int, end: int) -> None:
        """Fault pages ``[begin, end)`` into the page cache ahead of the writer.  Blocking.

        Allocating a page-cache page on first touch is the dominant cost of a write into a
        fresh mapping (~3 us per KiB on the reference VM).  MADV_POPULATE_READ on the I/O
        thread, with the GIL released, takes it off the appending thread, which then only
        takes a cheap write-protect fault.  Read-populating does not dirty pages, so nothing
        is written twice.  Falls back to MADV_WILLNEED on older kernels.
        """
        global _populate_advice
        if self.closed:
            return
        try:
            self.reserve(end)
        except OSError as exc:
            log.warning("cannot reserve disk space in %s: %s", self.path.name, exc)
            return
        if _madvise is None:
            return
        begin -= begin % OS_PAGE_SIZE
        end = min(end, self.size)
        if end <= begin:
            return
        address = self._mapping_address()
        if _madvise(address + begin, end - begin, _populate_advice) != 0:
            err = ctypes.get_errno()
            if _populate_advice == _MADV_POPULATE_READ and err == errno.EINVAL:  # old kernel
                _populate_advice = _MADV_WILLNEED
                _madvise(address + begin, end - begin, _populate_advice)
            else:
                log.debug("madvise populate failed: errno %d", err)
        self.populated = max(self.populated, end)

    def advise_random(self) -> None:
        """Turn off fault readahead on this mapping: for a file flushed after small appends
        (the SYNC_FLUSH CommitLog, ConsumeQueues) while it is written, and index files for good.
        Cheap; any thread.

        Why: Linux (6.x, large folios) answers a page fault with readahead, whose page-cache
        folios grow to 2 MiB as faults go on in order, and writeback writes a dirty folio
        whole.  An append of 1 KiB followed by fdatasync then wrote up to 2 MiB: on the
        reference VM a SYNC_FLUSH put's fdatasync wrote 1,092 KiB on average past the first
        ~40 MiB of a file, against 5 KiB with this advice, whose faults (and
        MADV_POPULATE_READ) make single pages (``benchmarks/store_bench.py --only synclong``).
        Not for the ASYNC_FLUSH CommitLog: its flushes are large anyway, and single-page
        faults cost its writer ~10 % of its appends.  ``advise_cold`` gives readahead back
        once the writer has left, for lagging consumers' sequential reads.
        """
        self._advise(_MADV_RANDOM)

    def advise_cold(self) -> None:
        """Drop this mapping's resident pages; the page cache keeps them.  Blocking.

        Keeps the process RSS flat while the log grows: a file the writer has left is
        only read by lagging consumers, who fault pages back in from the page cache (with
        readahead again: see ``advise_random``).  On a shared file mapping MADV_DONTNEED
        loses nothing, dirty pages included.
        """
        self._advise(_MADV_DONTNEED)
        self._advise(_MADV_NORMAL)

    def _advise(self, advice: int) -> None:
        if self.closed or _madvise is None:
            return
        if _madvise(self._mapping_address(), self.size, advice) != 0:
            log.debug("madvise(%d) failed on %s: errno %d", advice, self.path.name, ctypes.get_errno())

    def _mapping_address(self) -> int:
        if not self._address:
            self._address = _buffer_address(self.mm)
        return self._address

    def close(self) -> bool:
        """Unmap and close.  False while slices are still exported (call again later)."""
        if self.closed:
            return True
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            return False
        os.close(self.fd)
        self.closed = True
        return True

    def destroy(self) -> bool:
        """Delete the file and unmap it; False if the unmap has to wait for live slices."""
        _unlink_quietly(self.path)
        return self.close()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote}, flushed={self.flushed})"


def _fallocate(fd: int, offset: int, length: int) -> bool:
    """posix_fallocate; False if the filesystem does not support it.  Raises on ENOSPC."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in (95, 22):  # EOPNOTSUPP / EINVAL
            return False
        raise
    return True


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot delete %s: %s", path, exc)
