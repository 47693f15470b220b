"""The master's HA port (RocketMQ ``HAService`` + ``HAConnection``): one link per slave.

Each link has a reader (the slave's reports: where to start, how far it holds the log) and
a sender (CommitLog bytes from the store's mapped files, in frames that never span two
files; a header-only heartbeat when idle).  A link that sends nothing for
``haHousekeepingInterval`` is dropped; bytes that break the protocol end that link only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from apogee.store.config import StoreConfig
from apogee.store.ha.protocol import HALinkError, ReportReader, check_report, chunk_size, encode_header, start_offset
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.ha")

READ_SIZE = 64 * 1024


class SlaveLink:
    """One connected slave: what it reported and how far the master has sent."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.acked = -1  # the slave's newest report (its CommitLog max offset)
        self.next_offset = -1  # where the next frame starts; -1 until the first report
        self.wake = asyncio.Event()
        self.closed = asyncio.Event()


class HAMaster:
    """Serves every slave that connects to ``haListenPort``."""

    def __init__(self, store: MessageStore, config: StoreConfig) -> None:
        self._store = store
        self._config = config
        self._server: asyncio.Server | None = None
        self.links: dict[str, SlaveLink] = {}
        # The highest offset any slave holds (RocketMQ push2SlaveMaxOffset).
        self.slave_acked_offset = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self._store.on_appended = self._wake_all
        bound: int = self._server.sockets[0].getsockname()[1]
        log.info("HA port listening on %s:%d", host, bound)
        return bound

    def _wake_all(self) -> None:
        for link in self.links.values():
            link.wake.set()

    async def close(self) -> None:
        self._store.on_appended = None
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        link = SlaveLink(peer)
        self.links[peer] = link
        log.info("slave %s connected to the HA port", peer)
        sender = asyncio.create_task(self._send_loop(link, writer))
        try:
            await self._read_loop(link, reader)
        except HALinkError as exc:
            log.warning("closing HA link of slave %s: %s", peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("HA link of slave %s closed: %s", peer, exc)
        finally:
            link.closed.set()
            link.wake.set()
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            self.links.pop(peer, None)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _read_loop(self, link: SlaveLink, reader: asyncio.StreamReader) -> None:
        reports = ReportReader()
        housekeeping = self._config.ha_housekeeping_interval_ms / 1000
        store = self._store
        while True:
            try:
                data = await asyncio.wait_for(reader.read(READ_SIZE), housekeeping)
            except TimeoutError:
                raise HALinkError(f"nothing read for {housekeeping * 1000:.0f} ms (haHousekeepingInterval)") from None
            if not data:
                raise ConnectionError("the slave closed the link")
            reported = reports.feed(data)
            if reported is None:
                continue
            master_max = store.max_phy_offset
            if link.next_offset < 0:
                link.next_offset = start_offset(
                    reported, store.min_phy_offset, master_max, self._config.mapped_file_size_commitlog
                )
                log.info("slave %s reported %d: streaming from %d", link.peer, reported, link.next_offset)
            else:
                check_report(reported, master_max)
            link.acked = reported
            if reported > self.slave_acked_offset:
                self.slave_acked_offset = reported
            link.wake.set()

    async def _send_loop(self, link: SlaveLink, writer: asyncio.StreamWriter) -> None:
        """Frames of CommitLog bytes from ``next_offset``; a heartbeat header after
        ``haSendHeartbeatInterval`` without a write.  Nothing before the first report."""
        heartbeat = self._config.ha_send_heartbeat_interval_ms / 1000
        batch = self._config.ha_transfer_batch_size
        mfq = self._store.commitlog.mfq
        last_write = time.monotonic()
        try:
            while not link.closed.is_set():
                offset = link.next_offset
                mf = mfq.find(offset) if offset >= 0 else None
                size = chunk_size(offset, mf.start, mf.wrote, batch) if mf is not None else 0
                if mf is not None and size:
                    # A copy: the transport may keep what it cannot send at once, and the
                    # file may be unmapped (cleanup) before then.
                    rel = offset - mf.start
                    writer.write(encode_header(offset, size) + bytes(mf.view[rel : rel + size]))
                    link.next_offset = offset + size
                    last_write = time.monotonic()
                    await writer.drain()
                    continue
                link.wake.clear()
                if offset < 0:  # nothing before the slave's first report
                    await link.wake.wait()
                    continue
                wait = heartbeat - (time.monotonic() - last_write)
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(link.wake.wait(), wait)
                    continue
                writer.write(encode_header(offset, 0))
                last_write = time.monotonic()
                await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.info("HA link of slave %s: write failed: %s", link.peer, exc)
            writer.close()
