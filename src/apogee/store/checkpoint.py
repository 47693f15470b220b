"""Where recovery may start: the checkpoint file (durable) and the ``abort`` mark (this boot).

``StoreCheckpoint``: store times up to which CommitLog, ConsumeQueues and index are on disk
(RocketMQ's three fields) and Apogee's ``safe_offset``, the CommitLog offset below which all of
them are.  The values live in memory and are updated on the owner's thread after each flush;
``persist`` (I/O thread) writes the 4096-byte file atomically: temp file, fsync, rename, fsync
of the directory.  A crash mid-write leaves the previous checkpoint, never a torn one.

``AbortMark``: the ``abort`` file, present while the store runs, holding the boot id and the
dispatched offset (``layout.abort_mark``).  Updated in place without fsync: it only has to
survive the death of the process, not of the machine.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from apogee.store.layout import abort_mark
from apogee.store.layout import checkpoint as lay

log = logging.getLogger("apogee.store.checkpoint")


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old or the new content.  Blocking."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.safe_offset = -1  # CommitLog offset below which everything is on disk; -1 unknown

    def load(self) -> None:
        """Read the file if present (a missing or short file reads as zeros).  Blocking."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            lay.unpack(data)
        )
        self.safe_offset = lay.unpack_safe_offset(data)

    def persist(self) -> None:
        """Blocking."""
        atomic_write(self.path, lay.pack(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
            self.safe_offset,
        ))

    def min_timestamp(self, *, index_safe: bool) -> int:
        return lay.min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp,
                                 self.index_msg_timestamp, index_safe=index_safe)

    def __repr__(self) -> str:
        return (f"StoreCheckpoint(physic={self.physic_msg_timestamp}, "
                f"logics={self.logics_msg_timestamp}, index={self.index_msg_timestamp}, "
                f"safe_offset={self.safe_offset})")


def boot_id() -> bytes:
    """This boot's kernel id (16 bytes), or b"" where the system has none."""
    try:
        return uuid.UUID(Path("/proc/sys/kernel/random/boot_id").read_text().strip()).bytes
    except (OSError, ValueError):
        return b""


class AbortMark:
    """The ``abort`` file of a running store and the dispatched offset it holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.boot = boot_id()
        self.offset = -1  # last offset written
        self._fd: int | None = None

    @staticmethod
    def read(path: Path) -> int:
        """The dispatched offset a process of this boot left, or -1 (no file, no valid mark,
        another boot).  Blocking."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return -1
        mark = abort_mark.unpack_mark(data)
        boot = boot_id()
        if mark is None or not boot or mark[0] != boot:
            return -1
        return mark[1]

    def create(self, offset: int) -> None:
        """Create (or rewrite) the file with ``offset`` and fsync the directory.  Blocking."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.update(offset)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def update(self, offset: int) -> None:
        """Record ``offset`` (36 bytes into the page cache, no fsync: cheap).  A write that
        fails leaves the old mark, an earlier safe point, and stops further updates."""
        if self._fd is None or not self.boot:
            return
        try:
            os.pwrite(self._fd, abort_mark.pack_mark(self.boot, offset), 0)
        except OSError as exc:
            log.error("cannot update the abort mark (%s); a crash recovery will start earlier", exc)
            self.boot = b""
            return
        self.offset = offset

    def invalidate(self) -> None:
        """Forget the mark (the page cache may have lost writes: an fsync failed)."""
        self.boot = b""
        if self._fd is not None:
            try:
                os.pwrite(self._fd, bytes(abort_mark.MARK_SIZE), 0)
            except OSError as exc:
                log.error("cannot clear the abort mark (%s)", exc)

    def close(self, *, remove: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            self.path.unlink(missing_ok=True)
