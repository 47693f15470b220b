"""Committed consumer offsets (RocketMQ's ConsumerOffsetManager), in config/consumerOffset.json.

Keys are ``"<topic>@<group>"`` mapping queue id to the next offset to consume, the file shape
RocketMQ tools read.  Commits change memory only (and mark ``file`` dirty); the broker writes
the file every 5 s and at shutdown, so a crash loses at most a few seconds of commits, which
consumers re-deliver (at-least-once), never skip.  A write that fails leaves the file dirty
and is retried at the next save.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson

from apogee.broker.persistence import TableFile
from apogee.common.atomic_file import load_json_table

log = logging.getLogger("apogee.broker.offsets")

SEPARATOR = "@"


def _parse_table(obj: dict[str, Any]) -> dict[str, dict[int, int]]:
    """The ``offsetTable`` of a ConsumerOffsetSerializeWrapper (a file or a master's answer)."""
    raw = obj.get("offsetTable") or {}
    return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in raw.items()}


class ConsumerOffsetManager:
    def __init__(self, path: Path | None) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.file = TableFile(path, self.encode)
        self._load()

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.table = _parse_table(obj)

        load_json_table(self.file.path, parse, log)

    def merge_from_master(self, obj: dict[str, Any]) -> bool:
        """A slave's copy of its master's GET_ALL_CONSUMER_OFFSET answer (RocketMQ
        SlaveSynchronize.syncConsumerOffset, ``putAll``): each topic@group the master holds
        replaces ours; what only this slave holds (commits made here while the master was
        away) stays.  True when anything changed (the file is then behind)."""
        changed = {k: v for k, v in _parse_table(obj).items() if self.table.get(k) != v}
        if changed:
            self.table.update(changed)
            self.file.version += 1
        return bool(changed)

    def encode(self) -> bytes:
        return orjson.dumps(
            {"offsetTable": {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(self.table.items())}},
            option=orjson.OPT_INDENT_2,
        )

    def persist(self) -> None:
        """Write the file now if commits are unsaved (raises on failure; it stays dirty)."""
        self.file.persist()

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{SEPARATOR}{group}", {})[queue_id] = offset
        self.file.version += 1  # a pull's commit: no call, the periodic save writes it

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on that queue."""
        return self.table.get(f"{topic}{SEPARATOR}{group}", {}).get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}{SEPARATOR}{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        return {k.split(SEPARATOR, 1)[1] for k in self.table if k.split(SEPARATOR, 1)[0] == topic}

    def topics_of_group(self, group: str) -> set[str]:
        return {k.split(SEPARATOR, 1)[0] for k in self.table if k.split(SEPARATOR, 1)[1] == group}

    def remove_group(self, group: str) -> None:
        """Every committed offset of ``group`` (RocketMQ's removeOffset: deleteSubGroup -r)."""
        for key in [k for k in self.table if k.split(SEPARATOR, 1)[1] == group]:
            del self.table[key]
            self.file.version += 1

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(SEPARATOR, 1)[0] == topic]:
            del self.table[key]
            self.file.version += 1
