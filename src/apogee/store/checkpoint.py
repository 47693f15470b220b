"""The checkpoint file: store times up to which CommitLog, ConsumeQueues and index are on disk.

The values live in memory and are updated on the owner's thread after each flush; ``persist``
(I/O thread) writes the 4096-byte file atomically: temp file, fsync, rename, fsync of the
directory.  A crash mid-write leaves the previous checkpoint, never a torn one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

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

    def load(self) -> None:
        """Read the file if present (a missing or short file reads as zeros).  Blocking."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            lay.unpack(data)
        )

    def persist(self) -> None:
        """Blocking."""
        atomic_write(self.path, lay.pack(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        ))

    def min_timestamp(self, *, index_safe: bool) -> int:
        return lay.min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp,
                                 self.index_msg_timestamp, index_safe=index_safe)

    def __repr__(self) -> str:
        return (f"StoreCheckpoint(physic={self.physic_msg_timestamp}, "
                f"logics={self.logics_msg_timestamp}, index={self.index_msg_timestamp})")
