"""The master's HA port (RocketMQ ``HAService`` + ``HAConnection`` + ``GroupTransferService``).

Each link has a reader (the slave's reports: where to start, how far it holds the log) and
a sender (CommitLog bytes from the store's mapped files, in frames that never span two
files; a header-only heartbeat when idle).  The sender wakes on every append
(``MessageStore.on_appended``) and the reader resolves SYNC_MASTER waits on every report,
so a synchronous send costs one slave round trip and no polling interval.

A link without a complete report for ``haHousekeepingInterval`` is dropped (a slowloris
dripping bytes too); bytes that break the protocol end that link only.  A slave whose log
cannot continue this master's (longer, or diverged as its own check found and reported
with APOGEE_HA_DIVERGED) is *refused*: its link is parked -- reports read and ignored,
nothing sent -- until ``haHousekeepingInterval`` passes, so a slave that reconnects at once
(RocketMQ's does) retries every housekeeping interval, not in a storm; the reason is logged
once per slave and reason, and listed in ``haSlaves``.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import logging
import time
from typing import Any

import orjson

from apogee.broker.records import record_at
from apogee.common.message_codec import read_store_timestamp
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.server import RequestDispatcher
from apogee.store.config import StoreConfig
from apogee.store.ha.protocol import (
    HALinkError,
    ReportReader,
    check_report,
    chunk_size,
    encode_header,
    lag_ms,
    slave_ok,
    start_offset,
)
from apogee.store.message_store import MessageStore
from apogee.store.results import PutStatus
from apogee.store.waiters import OffsetWaiters

log = logging.getLogger("apogee.broker.ha")

READ_SIZE = 64 * 1024
REFUSED_KEPT = 8  # refused/diverged peers listed in haSlaves
MARKS_KEPT = 65536  # (max offset, time) samples for lagMs of slaves inside a record
REASON_MAX = 512  # characters of a slave's divergence notice kept


class SlaveLink:
    """One connected slave: what it reported and how far the master has sent."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.acked = -1  # the slave's newest report (its CommitLog max offset)
        self.next_offset = -1  # where the next frame starts; -1 until the first report
        self.wake = asyncio.Event()
        self.closed = asyncio.Event()
        self.refused: str | None = None  # why the link is parked


class Refusal:
    """A slave the master refused (or that reported itself diverged), kept for ``haSlaves``."""

    __slots__ = ("addr", "acked", "reason", "at_ms")

    def __init__(self, addr: str, acked: int, reason: str, at_ms: int) -> None:
        self.addr = addr
        self.acked = acked
        self.reason = reason
        self.at_ms = at_ms


class HAMaster:
    """Serves every slave that connects to ``haListenPort``; on a SYNC_MASTER also the
    puts' wait for a slave (``request``, installed as ``store.replica_request``)."""

    def __init__(self, store: MessageStore, config: StoreConfig, *, sync_master: bool = False) -> None:
        self._store = store
        self._config = config
        self._sync_master = sync_master
        self._server: asyncio.Server | None = None
        self.links: dict[str, SlaveLink] = {}
        self.reporting = 0  # links that have sent a valid report (RocketMQ connectionCount)
        # The highest offset any slave holds (RocketMQ push2SlaveMaxOffset).
        self.slave_acked_offset = 0
        self._waiters: OffsetWaiters | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._refused: collections.deque[Refusal] = collections.deque(maxlen=REFUSED_KEPT)
        self._marks_offsets: collections.deque[int] = collections.deque(maxlen=MARKS_KEPT)
        self._marks_ms: collections.deque[int] = collections.deque(maxlen=MARKS_KEPT)

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self._store.on_appended = self._wake_all
        if self._sync_master:
            self._waiters = OffsetWaiters(
                asyncio.get_running_loop(), self._config.slave_timeout_ms, PutStatus.FLUSH_SLAVE_TIMEOUT,
                "held by a slave within slaveTimeout",
            )
            self._store.replica_request = self.request
        bound: int = self._server.sockets[0].getsockname()[1]
        log.info("HA port listening on %s:%d", host, bound)
        return bound

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.APOGEE_HA_DIVERGED, self.diverged_notice)

    async def close(self) -> None:
        self._store.on_appended = None
        self._store.replica_request = None
        if self._waiters is not None:
            self._waiters.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # --- SYNC_MASTER --------------------------------------------------------------------------

    def request(self, end: int) -> asyncio.Future[PutStatus]:
        """RocketMQ ``submitReplicaRequest``: PUT_OK once a slave holds ``end``,
        FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``, SLAVE_NOT_AVAILABLE at once when no slave
        is linked or the best one is ``haSlaveFallbehindMax`` behind."""
        waiters = self._waiters
        assert waiters is not None
        if not slave_ok(self.reporting, end, self.slave_acked_offset, self._config.ha_slave_fallbehind_max):
            fut: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()
            fut.set_result(PutStatus.SLAVE_NOT_AVAILABLE)
            return fut
        return waiters.add(end)

    def _wake_all(self) -> None:
        """After appends (once per loop turn): wake every sender, and note when the log grew
        past its new end (``lagMs`` of a slave inside a record)."""
        links = self.links
        if not links:
            return
        for link in links.values():
            link.wake.set()
        now_ms = time.time_ns() // 1_000_000
        marks = self._marks_ms
        if not marks or marks[-1] != now_ms:
            self._marks_offsets.append(self._store.max_phy_offset)
            marks.append(now_ms)

    # --- links --------------------------------------------------------------------------------

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
            if link.next_offset >= 0 and link.refused is None:
                self.reporting -= 1
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _read_loop(self, link: SlaveLink, reader: asyncio.StreamReader) -> None:
        reports = ReportReader()
        housekeeping = self._config.ha_housekeeping_interval_ms / 1000
        store = self._store
        loop = asyncio.get_running_loop()
        deadline = loop.time() + housekeeping  # moved by complete reports only: a drip does not count
        while True:
            try:
                data = await asyncio.wait_for(reader.read(READ_SIZE), max(0.0, deadline - loop.time()))
            except TimeoutError:
                if link.refused is not None:
                    raise HALinkError(f"refused link parked for {housekeeping * 1000:.0f} ms: {link.refused}") from None
                raise HALinkError(
                    f"no report for {housekeeping * 1000:.0f} ms (haHousekeepingInterval)"
                ) from None
            if not data:
                raise ConnectionError("the slave closed the link")
            reported = reports.feed(data)
            if reported is None or link.refused is not None:
                continue
            deadline = loop.time() + housekeeping
            try:
                self._take_report(link, reported, store.max_phy_offset)
            except HALinkError as exc:
                self._refuse(link, reported, str(exc))

    def _take_report(self, link: SlaveLink, reported: int, master_max: int) -> None:
        if link.next_offset < 0:
            link.next_offset = start_offset(
                reported, self._store.min_phy_offset, master_max, self._config.mapped_file_size_commitlog
            )
            self.reporting += 1
            log.info("slave %s reported %d: streaming from %d", link.peer, reported, link.next_offset)
        else:
            check_report(reported, master_max)
        link.acked = reported
        if reported > self.slave_acked_offset:
            self.slave_acked_offset = reported
            if self._waiters is not None:
                self._waiters.resolve(reported)
        link.wake.set()

    def _refuse(self, link: SlaveLink, reported: int, reason: str) -> None:
        """Park ``link``: no frames, reports ignored, closed after haHousekeepingInterval."""
        if link.next_offset >= 0:
            self.reporting -= 1
        link.refused = reason
        link.next_offset = -1
        link.wake.set()
        self._note_refusal(link.peer, reported, reason)

    def _note_refusal(self, addr: str, acked: int, reason: str) -> None:
        host = addr.rpartition(":")[0]
        known = [r for r in self._refused if r.addr.rpartition(":")[0] == host]
        if not any(r.reason == reason for r in known):  # once per slave and reason
            log.error("refusing slave %s: %s", addr, reason)
        for old in known:
            self._refused.remove(old)
        self._refused.append(Refusal(addr, acked, reason, time.time_ns() // 1_000_000))

    def diverged_notice(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """APOGEE_HA_DIVERGED (Apogee only): an Apogee slave found its log differs from this
        master's (``HASlave``'s check) and says so, so this side's log and ``haSlaves`` show it
        too.  Fields: ``slaveAddr``, ``slaveMaxOffset``, ``reason``; all untrusted text."""
        fields = req.ext_fields or {}
        addr = str(fields.get("slaveAddr") or f"{conn.peer[0]}:{conn.peer[1]}")[:64]
        try:
            acked = int(fields.get("slaveMaxOffset", "-1"))
        except ValueError:
            acked = -1
        reason = str(fields.get("reason", ""))[:REASON_MAX]
        self._note_refusal(addr, acked, f"the slave found its log diverged: {reason}")
        return req.response(ResponseCode.SUCCESS)

    async def _send_loop(self, link: SlaveLink, writer: asyncio.StreamWriter) -> None:
        """Frames of CommitLog bytes from ``next_offset``; a heartbeat header after
        ``haSendHeartbeatInterval`` without a write.  Nothing before the first report, nor
        on a refused link."""
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
                if offset < 0:  # nothing before the slave's first report, nor when refused
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

    # --- operations view ----------------------------------------------------------------------

    def _first_unheld_ts(self, acked: int) -> int | None:
        """Store time of the first record a slave holding up to ``acked`` lacks: exact when a
        record starts there, else when the log first grew past ``acked`` (sampled once per
        appending loop turn), else the store time of the first record of its file."""
        ts = self._record_ts(acked)
        if ts is not None:
            return ts
        offsets = self._marks_offsets
        if offsets and offsets[0] <= acked:
            at = bisect.bisect_right(offsets, acked)
            if at < len(offsets):
                return self._marks_ms[at]
        size = self._config.mapped_file_size_commitlog
        return self._record_ts(acked - acked % size)

    def _record_ts(self, offset: int) -> int | None:
        view = record_at(self._store, offset)
        if view is None:
            return None
        try:
            return read_store_timestamp(view)
        finally:
            view.release()

    def slaves(self, now_ms: int) -> list[dict[str, Any]]:
        """``haSlaves``: linked slaves, then recently refused or diverged ones."""
        master_max = self._store.max_phy_offset
        out: list[dict[str, Any]] = []
        for link in self.links.values():
            if link.next_offset < 0:
                continue  # not reported yet, or refused (listed below)
            acked = max(link.acked, 0)
            out.append({
                "addr": link.peer, "ackOffset": acked, "lagBytes": max(0, master_max - acked),
                "lagMs": lag_ms(acked, master_max, self._first_unheld_ts(acked), now_ms),
                "state": "connected", "reason": "",
            })
        for refusal in self._refused:
            out.append({
                "addr": refusal.addr, "ackOffset": refusal.acked, "lagBytes": max(0, master_max - refusal.acked),
                "lagMs": 0, "state": "diverged", "reason": refusal.reason,
            })
        return out

    def runtime_info(self) -> dict[str, str]:
        """The master's HA keys of GET_BROKER_RUNTIME_INFO (docs/replication.md)."""
        return {
            "haConnectionCount": str(self.reporting),
            "haPush2SlaveMaxOffset": str(self.slave_acked_offset),
            "haSlaves": orjson.dumps(self.slaves(time.time_ns() // 1_000_000)).decode(),
        }
