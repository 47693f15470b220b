"""Crash-safe replacement of small metadata files (offsets, topics, KV config).

Write to a temporary file in the same directory, fsync it, rename it over the target and
fsync the directory: after a crash the file holds either the old or the new content, never
a mix.  A ``.bak`` copy of the previous content is kept, as RocketMQ's ConfigManager does.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: str | Path, data: bytes, *, keep_backup: bool = True) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if keep_backup and target.exists():
        os.replace(target, target.with_name(target.name + ".bak"))
    os.replace(tmp, target)
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_with_backup(path: str | Path) -> bytes | None:
    """The file's content, else its ``.bak`` copy, else None when neither exists."""
    target = Path(path)
    for candidate in (target, target.with_name(target.name + ".bak")):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if data:
            return data
    return None
