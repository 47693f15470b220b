"""Delay levels (RocketMQ's ScheduleMessageService).

A delayed message is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``; its ConsumeQueue
entry's tag code holds the time it is due.  One task per level walks its queue in order:
while the head entry is due, the message is re-put to its ``REAL_TOPIC``/``REAL_QID`` and the
level's offset advances; otherwise the task sleeps until the head is due (or a new message
arrives, which cannot be due earlier than the head since every message of a level has the
same delay).

Progress is ``config/delayOffset.json`` (``{"offsetTable": {level: offset}}``), written soon
after every batch of deliveries (``file``, saved by the broker's ``TableWriter``) and at
shutdown: a restart neither loses a pending message nor, after a clean stop, delivers one
twice.  After a crash at most the last batches may be delivered again (at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from apogee.broker import rewrite
from apogee.broker.config import BrokerAddress
from apogee.broker.persistence import TableFile
from apogee.broker.reput import reput
from apogee.broker.send_rules import waits_for_store
from apogee.common import constants as c
from apogee.common.aio import wait_event
from apogee.common.atomic_file import load_json_table
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.schedule")

MAX_BATCH = 256


def _parse_table(obj: dict[str, Any]) -> dict[int, int]:
    """The ``offsetTable`` (level -> offset) of delayOffset.json or a master's answer."""
    return {int(k): int(v) for k, v in (obj.get("offsetTable") or {}).items()}


class ScheduleService:
    """The delay levels' delivery tasks and their progress.  ``delay_levels_ms``: the delay of
    each level (level n is ``delay_levels_ms[n - 1]``)."""

    def __init__(
        self, store: MessageStore, delay_levels_ms: Sequence[int], address: BrokerAddress, path: Path | None
    ) -> None:
        self._store = store
        self._delay_levels_ms = tuple(delay_levels_ms)
        self._address = address
        self.offsets: dict[int, int] = {}
        self.file = TableFile(path, self.encode)
        self._tasks: list[asyncio.Task[None]] = []
        self._wake: dict[int, asyncio.Event] = {}
        self._load()

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.offsets = _parse_table(obj)

        load_json_table(self.file.path, parse, log)

    def replace_from_master(self, obj: dict[str, Any]) -> bool:
        """A slave's copy of its master's GET_ALL_DELAY_OFFSET answer (RocketMQ writes it to
        delayOffset.json as it came): the delay progress a slave switched to master resumes.
        True when it changed."""
        offsets = _parse_table(obj)
        if offsets == self.offsets:
            return False
        self.offsets = offsets
        self.file.changed()
        return True

    def encode(self) -> bytes:
        return orjson.dumps({"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}})

    def persist(self) -> None:
        """Write the progress now if it is unsaved (raises on failure; it stays dirty)."""
        self.file.persist()

    def start(self) -> None:
        for level in range(1, len(self._delay_levels_ms) + 1):
            self._wake[level] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._run_level(level)))

    def notify_arrival(self, queue_id: int) -> None:
        event = self._wake.get(queue_id + 1)
        if event is not None:
            event.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _sleep(self, level: int, seconds: float) -> None:
        event = self._wake[level]  # cleared before each delivery pass, so no arrival is missed
        await wait_event(event, max(0.001, seconds))

    async def _run_level(self, level: int) -> None:
        queue_id = level - 1
        while True:
            self._wake[level].clear()
            try:
                wait_s = await self._deliver_due(level, queue_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delay level %d: delivery failed; retrying in 1 s", level)
                wait_s = 1.0
            await self._sleep(level, wait_s)

    async def _deliver_due(self, level: int, queue_id: int) -> float:
        """Deliver what is due at the head of the level's queue; return seconds to sleep."""
        store = self._store
        offset = self.offsets.get(level, 0)
        min_offset = store.get_min_offset_in_queue(c.SCHEDULE_TOPIC, queue_id)
        if offset < min_offset:
            log.warning("delay level %d: offset %d expired, skipping to %d", level, offset, min_offset)
            offset = min_offset
        delivered = 0
        wait_s = 3600.0
        while delivered < MAX_BATCH:
            queue = store.consume_queues.get(c.SCHEDULE_TOPIC, queue_id)
            entry = queue.get_entry(offset) if queue is not None else None
            if entry is None:
                break
            phys_offset, _size, deliver_ms = entry
            now_ms = int(time.time() * 1000)
            # Clamp absurd deliver times (clock moved back): never wait longer than the delay.
            deliver_ms = min(deliver_ms, now_ms + self._delay_levels_ms[level - 1])
            if deliver_ms > now_ms:
                wait_s = (deliver_ms - now_ms) / 1000
                break
            message = store.look_message_by_offset(phys_offset)
            if message is not None:
                real = rewrite.due(rewrite.Placement.of(message))
                if real is None:
                    log.error("delayed message without REAL_TOPIC/REAL_QID dropped: %r", message.properties)
                else:
                    # Waits for flush and slave as RocketMQ does; but a record stored without
                    # them (FLUSH_*_TIMEOUT, SLAVE_NOT_AVAILABLE) counts as delivered: RocketMQ
                    # would put it again and again, a duplicate each time.
                    result = await store.put_message(
                        reput(message, real, self._address.store_host), waits_for_store(real.properties.get(c.WAIT))
                    )
                    if not result.status.stored:
                        log.warning("delay level %d: re-put failed (%s); retrying", level, result.status.name)
                        wait_s = 1.0
                        break
            offset += 1
            delivered += 1
        else:
            wait_s = 0.0
        if delivered:
            self.offsets[level] = offset
            self.file.changed()  # written soon, off the loop
        elif self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self.file.version += 1
        return wait_s
