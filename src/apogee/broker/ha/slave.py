"""The slave's HA client (RocketMQ ``HAService.HAClient``).

It connects to the master's HA address, reports its CommitLog max offset (at connect, every
``haSendHeartbeatInterval`` and after each append) and appends the master's frames at the
master's offsets, so its CommitLog files are byte-identical to the master's; the store
dispatches ConsumeQueues and index from those bytes.  A frame that does not continue the
slave's log ends the link; the slave reconnects and reports again, as RocketMQ does.  It
survives the master's absence: it retries the connection every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from apogee.errors import StoreError
from apogee.store.config import StoreConfig
from apogee.store.ha.protocol import FrameReader, HALinkError, check_frame, encode_report
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.ha")

READ_SIZE = 256 * 1024
RETRY_S = 1.0  # RocketMQ waits 5 s after a failed connect; Apogee retries sooner


class HASlave:
    """``master_address`` gives the master's HA address (``host:port``), or None while it is
    unknown (the NameServer's registration answer brings it)."""

    def __init__(self, store: MessageStore, config: StoreConfig, master_address: Callable[[], str | None]) -> None:
        self._store = store
        self._config = config
        self._master_address = master_address
        self._task: asyncio.Task[None] | None = None
        self.connected_to: str | None = None
        self.address_known = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="apogee-ha-slave")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            addr = self._master_address()
            if not addr:
                self.address_known.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.address_known.wait(), RETRY_S)
                continue
            host, _, port = addr.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5.0)
            except (OSError, ValueError, TimeoutError) as exc:
                log.warning("cannot connect to the master's HA port %s: %s", addr, exc)
                await asyncio.sleep(RETRY_S)
                continue
            self.connected_to = addr
            log.info("connected to the master's HA port %s; reporting max offset %d", addr, self._store.max_phy_offset)
            try:
                await self._follow(reader, writer)
            except HALinkError as exc:
                log.warning("HA link to master %s closed: %s", addr, exc)
            except StoreError as exc:
                log.error("HA link to master %s: cannot append: %s", addr, exc)
                await asyncio.sleep(RETRY_S)
            except (ConnectionError, OSError) as exc:
                log.info("HA link to master %s closed: %s", addr, exc)
                await asyncio.sleep(RETRY_S)
            finally:
                self.connected_to = None
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()

    async def _follow(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self._store
        heartbeat = self._config.ha_send_heartbeat_interval_ms / 1000
        housekeeping = self._config.ha_housekeeping_interval_ms / 1000
        file_size = self._config.mapped_file_size_commitlog
        frames = FrameReader()
        reported = store.max_phy_offset
        writer.write(encode_report(reported))
        await writer.drain()
        last_report = last_read = time.monotonic()
        while True:
            try:
                data = await asyncio.wait_for(reader.read(READ_SIZE), heartbeat)
            except TimeoutError:
                data = None
            now = time.monotonic()
            if data is not None:
                if not data:
                    raise ConnectionError("the master closed the link")
                last_read = now
                for offset, body in frames.feed(data):
                    check_frame(store.max_phy_offset, offset, len(body), file_size)
                    if body:
                        store.append_replica(offset, body)
            elif now - last_read > housekeeping:
                raise HALinkError(f"nothing from the master for {housekeeping * 1000:.0f} ms (haHousekeepingInterval)")
            current = store.max_phy_offset
            if current != reported or now - last_report >= heartbeat:
                writer.write(encode_report(current))
                reported, last_report = current, now
                await writer.drain()
