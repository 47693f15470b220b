"""The slave's HA client (RocketMQ ``HAService.HAClient``).

It connects to the master's HA address, reports its CommitLog max offset (at connect, every
``haSendHeartbeatInterval`` and after each append) and appends the master's frames at the
master's offsets, so its CommitLog files are byte-identical to the master's; the store
dispatches ConsumeQueues and index from those bytes.  A frame that does not continue the
slave's log ends the link; the slave reconnects and reports again, as RocketMQ does.  It
survives the master's absence: it retries the connection every second.

Before each link a slave that holds data checks that the master's log continues its own
(``_divergence``), over remoting requests a RocketMQ 4.9 master answers too:
GET_BROKER_RUNTIME_INFO (the master's ``commitLogMaxOffset``: a longer slave log diverged)
and VIEW_MESSAGE_BY_ID of the slave's last whole record (``store.ha.tail``): the master's
record there must be byte-identical.  A diverged slave never streams: it logs why once,
tells the master (APOGEE_HA_DIVERGED, Apogee only), and checks again every
``DIVERGED_RETRY_S`` until the operator acts (docs/replication.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import cast

import orjson

from apogee.errors import ApogeeError, StoreError
from apogee.remoting.busy_poll import Kick, kick_for
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.tls import ClientTls
from apogee.store.config import StoreConfig
from apogee.store.ha.protocol import FrameReader, HALinkError, check_frame, encode_report
from apogee.store.ha.tail import log_tail
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.ha")

RETRY_S = 1.0  # RocketMQ waits 5 s after a failed connect; Apogee retries sooner
DIVERGED_RETRY_S = 30.0  # a diverged slave checks again this rarely
CHECK_TIMEOUT_MS = 5000


class Diverged(Exception):
    """The master's log does not continue this slave's; the text says where and how."""


class HASlave:
    """``master_address`` gives the master's HA address (``host:port``), or None while it is
    unknown (the NameServer's registration answer brings it); ``master_broker`` the master's
    remoting address for the divergence check (None: HA port - 1, RocketMQ's layout);
    ``own_addr`` this broker's address, named in the notice to the master; ``tls`` the TLS of
    the HA link (``tls.ha.enable``), read at each connect, or None for plain TCP."""

    def __init__(
        self,
        store: MessageStore,
        config: StoreConfig,
        master_address: Callable[[], str | None],
        *,
        outbound: RemotingClient,
        master_broker: Callable[[], str | None] = lambda: None,
        own_addr: Callable[[], str] = lambda: "",
        tls: Callable[[], ClientTls | None] = lambda: None,
        busy_poll_us: int = 0,
    ) -> None:
        self._store = store
        self._busy_poll_us = busy_poll_us
        self._config = config
        self._master_address = master_address
        self._outbound = outbound
        self._master_broker = master_broker
        self._own_addr = own_addr
        self._tls = tls
        self._task: asyncio.Task[None] | None = None
        self.connected_to: str | None = None
        self.address_known = asyncio.Event()
        self.link_state = "connecting"  # connected | connecting | diverged
        self.diverged_reason = ""
        self.last_frame_ms = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="apogee-ha-slave")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def runtime_info(self) -> dict[str, str]:
        """The slave's HA keys of GET_BROKER_RUNTIME_INFO (docs/replication.md)."""
        return {
            "haMasterAddress": self._master_address() or "",
            "haLinkState": self.link_state,
            "haDivergedReason": self.diverged_reason,
            "haLastFrameTimestamp": str(self.last_frame_ms),
        }

    async def _run(self) -> None:
        kick = kick_for(self._busy_poll_us, asyncio.get_running_loop())
        while True:
            addr = self._master_address()
            if not addr:
                self.address_known.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.address_known.wait(), RETRY_S)
                continue
            if not await self._checked(addr):
                continue
            host, _, port = addr.rpartition(":")
            loop = asyncio.get_running_loop()
            tls = self._tls()

            def link_factory() -> MasterLink:
                return MasterLink(self._store, self._config, self, kick)

            try:
                if tls is None:
                    connecting = loop.create_connection(link_factory, host, int(port))
                else:
                    connecting = loop.create_connection(
                        link_factory, host, int(port), ssl=tls.context, server_hostname=tls.server_name or host
                    )
                transport, link = await asyncio.wait_for(connecting, 5.0)
            except (OSError, ValueError, TimeoutError) as exc:
                log.warning("cannot connect to the master's HA port %s: %s", addr, exc)
                await asyncio.sleep(RETRY_S)
                continue
            self.connected_to = addr
            self.link_state = "connected"
            log.info("connected to the master's HA port %s; reporting max offset %d", addr, self._store.max_phy_offset)
            try:
                await link.ended
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
                if self.link_state == "connected":
                    self.link_state = "connecting"
                transport.close()

    # --- divergence ---------------------------------------------------------------------------

    async def _checked(self, ha_addr: str) -> bool:
        """True when the link may start: the master's log continues this one.  A diverged
        slave waits ``DIVERGED_RETRY_S``; one that cannot ask the master, ``RETRY_S``."""
        broker = self._master_broker() or _remoting_of(ha_addr)
        try:
            await self._divergence(broker)
        except Diverged as exc:
            reason = str(exc)
            if reason != self.diverged_reason:
                log.error("refusing to follow master %s: %s; the slave needs the operator "
                          "(docs/replication.md, a diverged slave)", broker, reason)
                await self._tell_master(broker, reason)
            self.link_state, self.diverged_reason = "diverged", reason
            await asyncio.sleep(DIVERGED_RETRY_S)
            return False
        except (ApogeeError, OSError, TimeoutError, ValueError, KeyError) as exc:
            log.warning("cannot check the master %s's log against this slave's: %s", broker, exc)
            self.link_state = "diverged" if self.diverged_reason else "connecting"
            await asyncio.sleep(RETRY_S)
            return False
        if self.diverged_reason:
            log.warning("master %s's log continues this slave's again: following it", broker)
        self.diverged_reason = ""
        return True

    async def _divergence(self, broker: str) -> None:
        """Raise Diverged when the master at ``broker`` does not hold this slave's log."""
        store = self._store
        mine = store.max_phy_offset
        if mine == 0:
            return  # an empty slave takes whatever the master has
        resp = await self._outbound.invoke(
            broker, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), CHECK_TIMEOUT_MS
        )
        if resp.code != ResponseCode.SUCCESS:
            raise ApogeeError(f"runtime info: code {resp.code} {resp.remark}")
        master_max = int(orjson.loads(resp.body_bytes())["table"]["commitLogMaxOffset"])
        if mine > master_max:
            raise Diverged(
                f"the slave's log is longer than the master's: slave max offset {mine}, master max offset {master_max}"
            )
        tail = await store.io.run(log_tail, store.commitlog.mfq, mine)
        checks = [(tail.record, True)] if tail.record is not None else []
        if tail.partial is not None:
            checks.append((tail.partial, False))
        for (offset, data), whole in checks:
            what = "last record" if whole else "unfinished record"
            theirs = await self._record(broker, offset)
            if theirs is None:
                raise Diverged(f"the master has no record at offset {offset}, where the slave's {what} starts "
                               f"(slave max offset {mine}, master max offset {master_max})")
            if not (theirs == data if whole else theirs.startswith(data)):
                raise Diverged(f"the master's record at offset {offset} differs from the slave's {what} "
                               f"(slave max offset {mine}, master max offset {master_max})")

    async def _record(self, broker: str, offset: int) -> bytes | None:
        resp = await self._outbound.invoke(
            broker, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}), CHECK_TIMEOUT_MS
        )
        return resp.body_bytes() if resp.code == ResponseCode.SUCCESS else None

    async def _tell_master(self, broker: str, reason: str) -> None:
        """APOGEE_HA_DIVERGED: the master logs and lists it too (a RocketMQ master refuses the
        code; nothing else changes)."""
        fields = {"slaveAddr": self._own_addr(), "slaveMaxOffset": str(self._store.max_phy_offset), "reason": reason}
        try:
            await self._outbound.invoke(broker, RemotingCommand.request(RequestCode.APOGEE_HA_DIVERGED, fields),
                                        CHECK_TIMEOUT_MS)
        except (ApogeeError, OSError, TimeoutError) as exc:
            log.info("could not tell master %s about the divergence: %s", broker, exc)


class MasterLink(asyncio.Protocol):
    """The slave's end of one HA link, an asyncio Protocol: frames are checked and appended,
    and the new max offset reported, inside ``data_received`` -- before anything else runs
    (the store dispatches them a loop turn later) -- so a SYNC_MASTER send waits for no task
    wake-up here.  One timer, re-armed only when it fires, keeps the heartbeat report and
    the housekeeping check.  ``ended`` fails with why the link ended."""

    def __init__(self, store: MessageStore, config: StoreConfig, slave: HASlave, kick: Kick | None = None) -> None:
        self._store = store
        self._kick = kick  # the loop's busy poll (remoting/busy_poll.py), or None
        self._slave = slave
        self._file_size = config.mapped_file_size_commitlog
        self._heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
        self._housekeeping_s = config.ha_housekeeping_interval_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._frames = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self._timer: asyncio.TimerHandle | None = None
        self.reported = -1
        self.last_report = self.last_read = self._loop.time()
        self.ended: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._report(self._store.max_phy_offset, self._loop.time())
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        if self._kick is not None:
            self._kick()
        store = self._store
        self.last_read = now = self._loop.time()
        self._slave.last_frame_ms = time.time_ns() // 1_000_000
        try:
            for offset, body in self._frames.feed(data):
                check_frame(store.max_phy_offset, offset, len(body), self._file_size)
                if body:
                    store.append_replica(offset, body)
        except (HALinkError, StoreError) as exc:
            self._end(exc)
            return
        current = store.max_phy_offset
        if current != self.reported:
            self._report(current, now)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.ended.done():
            self.ended.set_exception(exc or ConnectionError("the master closed the link"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._report(self._store.max_phy_offset, self._loop.time())
        if self._timer is not None:  # heartbeats are due again
            self._timer.cancel()
            self._arm()

    def _report(self, offset: int, now: float) -> None:
        """Only the newest report counts, so a master that does not read gets none while the
        transport is paused (the slave's memory does not grow); ``resume_writing`` sends it."""
        if self._paused or self._transport is None or self._transport.is_closing():
            return
        self._transport.write(encode_report(offset))
        self.reported, self.last_report = offset, now

    def _arm(self) -> None:
        due = self.last_read + self._housekeeping_s
        if not self._paused:
            due = min(due, self.last_report + self._heartbeat_s)
        self._timer = self._loop.call_at(due, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.ended.done():
            return
        now = self._loop.time()
        if now - self.last_read >= self._housekeeping_s:
            ms = self._housekeeping_s * 1000
            self._end(HALinkError(f"nothing from the master for {ms:.0f} ms (haHousekeepingInterval)"))
            return
        if now - self.last_report >= self._heartbeat_s:
            self._report(self._store.max_phy_offset, now)
        self._arm()

    def _end(self, exc: Exception) -> None:
        if not self.ended.done():
            self.ended.set_exception(exc)
        if self._transport is not None:
            self._transport.abort()


def _remoting_of(ha_addr: str) -> str:
    """RocketMQ's layout: the HA port is the listen port + 1."""
    host, _, port = ha_addr.rpartition(":")
    return f"{host}:{int(port) - 1}"
