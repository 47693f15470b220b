"""The master's HA port (RocketMQ ``HAService`` + ``HAConnection`` + ``GroupTransferService``).

Each link (an asyncio Protocol, ``SlaveLink``) reads the slave's reports -- where to start,
how far it holds the log -- and sends CommitLog bytes from the store's mapped files, in
frames that never span two files, or a header-only heartbeat when idle.  Frames are written
a callback after the append notification (``MessageStore.on_appended``), or at once for a
SYNC_MASTER put when the slave holds everything sent to it, while the transport is not
paused, and a report resolves the SYNC_MASTER waits it reaches inside ``data_received``:
a synchronous send costs one slave round trip, no polling interval and no HA task wake-ups.
A slow slave pauses the transport (above its high-water mark) and the master stops reading
the log for it until ``resume_writing``: its memory does not grow with the slave's lag.

A link without a complete report for ``haHousekeepingInterval`` is dropped (a slowloris
dripping bytes too); bytes that break the protocol end that link only.  A slave whose log
cannot continue this master's (longer, or diverged as its own check found and reported
with APOGEE_HA_DIVERGED) is *refused*: its link is parked -- reports read and ignored,
nothing sent -- until ``haHousekeepingInterval`` passes, so a slave that reconnects at once
(RocketMQ's does) retries every housekeeping interval, not in a storm; the reason is logged
once per slave and reason, and listed in ``haSlaves``.

With ``tls`` (``tls.ha.enable``, Apogee's) the port takes TLS only, through the remoting
ports' ``TlsListener`` and certificates: Apogee slaves only, a RocketMQ 4.x slave's HA client
is plain TCP.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import time
from typing import Any, cast

import orjson

from apogee.broker.records import record_at
from apogee.common.message_codec import read_store_timestamp
from apogee.remoting.busy_poll import Kick, kick_for
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.server import RequestDispatcher
from apogee.remoting.tls import TlsContexts, TlsListener
from apogee.remoting.tls_config import TlsMode
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

REFUSED_KEPT = 8  # refused/diverged peers listed in haSlaves
MARKS_KEPT = 65536  # (max offset, time) samples for lagMs of slaves inside a record
REASON_MAX = 512  # characters of a slave's divergence notice kept
MAX_HA_HANDSHAKES = 64  # TLS handshakes in progress on the HA port (a group has few slaves)


class SlaveLink(asyncio.Protocol):
    """One connected slave: what it reported and how far the master has sent.

    An asyncio Protocol, not streams: a report is handled inside ``data_received`` (the
    SYNC_MASTER waits it reaches are resolved there), and frames are written from the append
    notification (``HAMaster.pump``) while the transport is not paused.  One
    timer per link, re-armed only when it fires, keeps the heartbeat and housekeeping."""

    def __init__(self, master: HAMaster) -> None:
        self.master = master
        self.peer = "?"
        self.acked = -1  # the slave's newest report (its CommitLog max offset)
        self.next_offset = -1  # where the next frame starts; -1 until the first report
        self.refused: str | None = None  # why the link is parked
        self.transport: asyncio.WriteTransport | None = None
        self.paused = False  # the transport's buffer is above its high-water mark
        self.closed = False
        self.reports = ReportReader()
        self.last_report = 0.0  # loop time of the last complete report (a drip does not count)
        self.last_write = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)  # uvloop's is not a subclass
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.last_report = self.last_write = self.master.loop.time()
        self.master.linked(self)

    def data_received(self, data: bytes) -> None:
        if self.master.kick is not None:
            self.master.kick()
        try:
            reported = self.reports.feed(data)
        except HALinkError as exc:
            self.fail(str(exc))
            return
        if reported is None or self.refused is not None or self.closed:
            return
        self.last_report = self.master.loop.time()
        self.master.take_report(self, reported)

    def eof_received(self) -> bool:
        log.info("HA link of slave %s closed: the slave closed the link", self.peer)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.info("HA link of slave %s closed: %s", self.peer, exc)
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.master.unlinked(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.master.pump(self)
        self.master.rearm(self)

    def fail(self, reason: str) -> None:
        """End this link only (bytes that break the protocol, a silent or parked peer)."""
        if self.closed:
            return
        log.warning("closing HA link of slave %s: %s", self.peer, reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


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

    def __init__(
        self, store: MessageStore, config: StoreConfig, *, sync_master: bool = False, tls: TlsContexts | None = None,
        busy_poll_us: int = 0,
    ) -> None:
        self._store = store
        self._busy_poll_us = busy_poll_us
        self.kick: Kick | None = None  # the loop's busy poll (remoting/busy_poll.py), set by start()
        self._config = config
        self._sync_master = sync_master
        self._tls = tls
        self._server: asyncio.Server | TlsListener | None = None
        self.links: dict[str, SlaveLink] = {}
        self.reporting = 0  # links that have sent a valid report (RocketMQ connectionCount)
        # The highest offset any slave holds (RocketMQ push2SlaveMaxOffset).
        self.slave_acked_offset = 0
        self._waiters: OffsetWaiters | None = None
        self.loop: asyncio.AbstractEventLoop  # set by start(); links exist only after it
        self._pump_pending = False
        self._heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
        self._housekeeping_s = config.ha_housekeeping_interval_ms / 1000
        self._refused: collections.deque[Refusal] = collections.deque(maxlen=REFUSED_KEPT)
        self._marks_offsets: collections.deque[int] = collections.deque(maxlen=MARKS_KEPT)
        self._marks_ms: collections.deque[int] = collections.deque(maxlen=MARKS_KEPT)

    async def start(self, host: str, port: int) -> int:
        self.loop = asyncio.get_running_loop()
        self.kick = kick_for(self._busy_poll_us, self.loop)
        if self._tls is not None:
            listener = TlsListener(
                lambda: SlaveLink(self), TlsMode.ENFORCING, self._tls, name="HA port",
                room=lambda pending: pending < MAX_HA_HANDSHAKES,
            )
            await listener.start(host, port, 128)
            self._server = listener
        else:
            self._server = await self.loop.create_server(lambda: SlaveLink(self), host, port)
        self._store.on_appended = self._wake_all
        if self._sync_master:
            self._waiters = OffsetWaiters(
                asyncio.get_running_loop(), self._config.slave_timeout_ms, PutStatus.FLUSH_SLAVE_TIMEOUT,
                "held by a slave within slaveTimeout",
            )
            self._store.replica_request = self.request
        bound: int = self._server.sockets[0].getsockname()[1]
        log.info("HA port listening on %s:%d%s", host, bound, " (TLS)" if self._tls is not None else "")
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
        for link in list(self.links.values()):
            link.closed = True
            if link.transport is not None:
                link.transport.abort()
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
        # A slave that holds everything sent to it gets the new bytes now, in the put's own
        # loop turn (one-at-a-time sends); a busy link takes them with the turn's other
        # appends from the append notification (``_wake_all``), in one frame.
        for link in self.links.values():
            if link.acked >= link.next_offset >= 0:
                self.pump(link)
        return waiters.add(end)

    def _wake_all(self) -> None:
        """After appends (once per loop turn): note when the log grew past its new end
        (``lagMs`` of a slave inside a record), and send the new bytes to every slave a
        callback later, after the store's dispatch pass of this turn (as a woken sender task
        did): the producers' answers and the ConsumeQueues come first."""
        if not self.links:
            return
        if not self._pump_pending:
            self._pump_pending = True
            self.loop.call_soon(self._pump_all)
        now_ms = time.time_ns() // 1_000_000
        marks = self._marks_ms
        if not marks or marks[-1] != now_ms:
            self._marks_offsets.append(self._store.max_phy_offset)
            marks.append(now_ms)

    def _pump_all(self) -> None:
        self._pump_pending = False
        for link in self.links.values():
            self.pump(link)

    # --- links --------------------------------------------------------------------------------

    def linked(self, link: SlaveLink) -> None:
        self.links[link.peer] = link
        log.info("slave %s connected to the HA port", link.peer)
        self._arm(link)

    def unlinked(self, link: SlaveLink) -> None:
        if self.links.get(link.peer) is link:
            del self.links[link.peer]
        if link.next_offset >= 0 and link.refused is None:
            self.reporting -= 1
        link.next_offset = -1

    def take_report(self, link: SlaveLink, reported: int) -> None:
        """A complete report: the first one says where streaming starts; each one resolves
        the SYNC_MASTER waits it reaches.  A report this master cannot continue parks the
        link (``_refuse``)."""
        try:
            if link.next_offset < 0:
                link.next_offset = start_offset(
                    reported, self._store.min_phy_offset, self._store.max_phy_offset,
                    self._config.mapped_file_size_commitlog,
                )
                self.reporting += 1
                log.info("slave %s reported %d: streaming from %d", link.peer, reported, link.next_offset)
                self.rearm(link)  # from now on heartbeats are due too
                self.pump(link)
            else:
                check_report(reported, self._store.max_phy_offset)
        except HALinkError as exc:
            self._refuse(link, reported, str(exc))
            return
        link.acked = reported
        if reported > self.slave_acked_offset:
            self.slave_acked_offset = reported
            if self._waiters is not None:
                self._waiters.resolve(reported)

    def _refuse(self, link: SlaveLink, reported: int, reason: str) -> None:
        """Park ``link``: no frames, reports ignored, closed after haHousekeepingInterval."""
        if link.next_offset >= 0:
            self.reporting -= 1
        link.refused = reason
        link.next_offset = -1
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

    def pump(self, link: SlaveLink) -> None:
        """Write frames of CommitLog bytes from ``next_offset`` until the log's end or until
        the transport pauses (a slow slave: the master buffers at most its high-water mark
        and one frame); ``resume_writing`` pumps again.  Nothing before the slave's first
        report, nor on a refused link."""
        transport = link.transport
        if link.paused or link.closed or link.next_offset < 0 or transport is None or transport.is_closing():
            return
        mfq = self._store.commitlog.mfq
        batch = self._config.ha_transfer_batch_size
        while True:
            offset = link.next_offset
            mf = mfq.find(offset)
            if mf is None:
                return
            size = chunk_size(offset, mf.start, mf.wrote, batch)
            if not size:
                return
            # One copy: the transport may keep what it cannot send at once, and the file may
            # be unmapped (cleanup) before then.
            rel = offset - mf.start
            transport.write(encode_header(offset, size) + mf.view[rel : rel + size])
            link.next_offset = offset + size
            link.last_write = self.loop.time()
            if link.paused or link.closed:
                return

    def rearm(self, link: SlaveLink) -> None:
        """Move the link's timer to its deadlines now (heartbeats became due)."""
        if link.timer is not None:
            link.timer.cancel()
            self._arm(link)

    def _arm(self, link: SlaveLink) -> None:
        """The link's one timer, at its next heartbeat or housekeeping deadline (no heartbeat
        while the transport is paused: ``resume_writing`` re-arms)."""
        due = link.last_report + self._housekeeping_s
        if link.next_offset >= 0 and not link.paused:
            due = min(due, link.last_write + self._heartbeat_s)
        link.timer = self.loop.call_at(due, self._tick, link)

    def _tick(self, link: SlaveLink) -> None:
        """Housekeeping: a link without a complete report for ``haHousekeepingInterval`` is
        dropped (a slowloris, or a parked refused link); a heartbeat header after
        ``haSendHeartbeatInterval`` without a write."""
        link.timer = None
        if link.closed:
            return
        now = self.loop.time()
        if now - link.last_report >= self._housekeeping_s:
            ms = self._housekeeping_s * 1000
            link.fail(f"refused link parked for {ms:.0f} ms: {link.refused}" if link.refused is not None
                      else f"no report for {ms:.0f} ms (haHousekeepingInterval)")
            return
        transport = link.transport
        if (link.next_offset >= 0 and not link.paused and now - link.last_write >= self._heartbeat_s
                and transport is not None and not transport.is_closing()):
            transport.write(encode_header(link.next_offset, 0))
            link.last_write = now
        self._arm(link)

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
