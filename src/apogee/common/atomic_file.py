"""Crash-safe replacement of small metadata files (offsets, topics, KV config).

Write to a temporary file in the same directory, fsync it, rename it over the target and
fsync the directory: after a crash the file holds either the old or the new content, never
a mix.  A ``.bak`` copy of the previous content is kept, as RocketMQ's ConfigManager does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apogee.common.lenient_json import loads


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


def load_json_table(path: Path | str | None, parse: Callable[[dict[str, Any]], None], log: logging.Logger) -> None:
    """Read a persisted JSON table (or its ``.bak``) and hand the object to ``parse``.

    The shared start-up path of every table that persists itself (topics, offsets, groups,
    delay progress, KV config): a missing file is an empty table; an unreadable one is
    logged and skipped, so one damaged file never keeps a server from starting.  Files
    written by Java RocketMQ (unquoted integer keys) are accepted.
    """
    if path is None:
        return
    data = read_with_backup(path)
    if data is None:
        return
    try:
        obj = loads(data)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        parse(obj)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.error("cannot read %s (%s); starting without it", path, exc)
