"""Consumer offsets: kept in memory, persisted to the broker (clustering) or a local file (broadcasting).

``update_offset`` only changes memory (it runs once per consumed batch); ``persist`` sends what
changed since the last persist.  The consumer persists every
``persist_consumer_offset_interval_ms``, when a queue is handed to another consumer, and at
shutdown, so a graceful stop loses nothing and re-delivers nothing.

``read_offset`` from the store returns the committed offset, ``-1`` when the group has none
(a new group: the consumer then applies consume-from-where), and ``-2`` when the store could
not be asked (the caller must not guess: it tries again later rather than jump anywhere).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson

from apogee.common.atomic_file import write_atomic
from apogee.common.message import MessageQueue
from apogee.errors import ApogeeError, QueryNotFoundError

if TYPE_CHECKING:
    from apogee.client.instance import ClientInstance

log = logging.getLogger("apogee.client.consumer.offset_store")

OFFSET_NOT_FOUND = -1
OFFSET_UNKNOWN = -2


class ReadOffsetType(enum.Enum):
    MEMORY = "memory"
    STORE = "store"
    MEMORY_FIRST_THEN_STORE = "memory_first_then_store"


class OffsetStore(Protocol):
    async def load(self) -> None: ...
    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None: ...
    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int: ...
    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None: ...
    async def persist(self, mq: MessageQueue) -> None: ...
    def remove_offset(self, mq: MessageQueue) -> None: ...
    def table(self) -> dict[MessageQueue, int]: ...
    def memory_offset(self, mq: MessageQueue) -> int: ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if offset < 0:
            return
        current = self._offsets.get(mq)
        if current is not None and (current == offset or (increase_only and offset < current)):
            return
        self._offsets[mq] = offset
        self._dirty.add(mq)

    def remove_offset(self, mq: MessageQueue) -> None:
        self._offsets.pop(mq, None)
        self._dirty.discard(mq)

    def table(self) -> dict[MessageQueue, int]:
        return dict(self._offsets)

    def memory_offset(self, mq: MessageQueue) -> int:
        return self._offsets.get(mq, OFFSET_NOT_FOUND)


class RemoteBrokerOffsetStore(_MemoryTable):
    """Clustering: the group's offsets live on the broker of each queue: its master, else
    (the master gone) a slave, as RocketMQ's RemoteBrokerOffsetStore does.  A slave keeps
    what it is sent until its master is back and its next copy of the master's offsets
    replaces them (docs/replication.md, "Reading from slaves")."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        return None

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.STORE:
            offset = self._offsets.get(mq)
            if offset is not None or how is ReadOffsetType.MEMORY:
                return OFFSET_NOT_FOUND if offset is None else offset
        try:
            addr = await self.instance.find_read_addr(mq.broker_name, mq.topic)
            offset = await self.instance.api.query_consumer_offset(addr, self.group, mq.topic, mq.queue_id)
        except QueryNotFoundError:
            return OFFSET_NOT_FOUND
        except ApogeeError as exc:
            log.warning("reading the offset of %s for %s failed: %s", mq, self.group, exc)
            return OFFSET_UNKNOWN
        self._offsets[mq] = offset
        self._dirty.discard(mq)
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        offset = self._offsets.get(mq)
        if offset is None:
            return
        addr = await self.instance.find_read_addr(mq.broker_name, mq.topic)
        await self.instance.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset)
        if self._offsets.get(mq) == offset:
            self._dirty.discard(mq)

    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Send every changed offset (of ``mqs`` when given); failures are logged, kept dirty."""
        wanted = self._dirty if mqs is None else self._dirty & set(mqs)
        if not wanted:
            return

        async def one(mq: MessageQueue) -> None:
            try:
                await self.persist(mq)
            except ApogeeError as exc:
                log.warning("committing offset %s of %s for %s failed: %s", self._offsets.get(mq), mq, self.group, exc)

        await asyncio.gather(*(one(mq) for mq in list(wanted)))


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting: each client keeps its own offsets in
    ``<offset_store_dir>/<client id>/<group>/offsets.json`` (written atomically, with a .bak)."""

    def __init__(self, directory: str | Path, client_id: str, group: str) -> None:
        super().__init__()
        self.path = Path(directory) / _safe(client_id) / _safe(group) / "offsets.json"
        self.group = group

    async def load(self) -> None:
        self._offsets = await asyncio.to_thread(load_offsets_file, self.path)

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        return self._offsets.get(mq, OFFSET_NOT_FOUND)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all()

    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        if not self._dirty:
            return
        data = encode_offsets(self._offsets)
        self._dirty.clear()
        await asyncio.to_thread(write_atomic, self.path, data)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "@#%._-" else "_" for ch in name)


def encode_offsets(offsets: dict[MessageQueue, int]) -> bytes:
    return orjson.dumps(
        {
            "offsetTable": [
                {"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id, "topic": mq.topic}
                for mq, off in sorted(offsets.items())
            ]
        },
        option=orjson.OPT_INDENT_2,
    )


def decode_offsets(data: bytes) -> dict[MessageQueue, int]:
    """Parse an offsets file; ValueError when it is not one."""
    try:
        obj = orjson.loads(data)
        return {
            MessageQueue(str(e["topic"]), str(e["brokerName"]), int(e["queueId"])): int(e["offset"])
            for e in obj["offsetTable"]
        }
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not an offsets file: {exc}") from None


def load_offsets_file(path: Path) -> dict[MessageQueue, int]:
    """The offsets in ``path``, else in its .bak; a corrupt file is reported, never fatal."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if not data:
            continue
        try:
            return decode_offsets(data)
        except ValueError as exc:
            log.warning("ignoring corrupt offsets file %s: %s", candidate, exc)
    return {}
