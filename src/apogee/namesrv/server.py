"""NameServer lifecycle: bind, serve, scan for silent brokers, stop.

NameServers never talk to each other; brokers register with each of them, so several can
run side by side and any one of them answers clients.
"""

from __future__ import annotations

import asyncio
import logging
import time

from apogee.common.config_update import LiveConfig
from apogee.common.exposure import open_port_warning
from apogee.common.metrics_http import MetricsServer, metrics_address
from apogee.namesrv.config import LIVE_NAMESRV_KEYS, NEVER_NAMESRV_KEYS, NamesrvConfig
from apogee.namesrv.kv_config import KVConfig
from apogee.namesrv.metrics import SPECS as METRIC_SPECS
from apogee.namesrv.metrics import NamesrvMetrics
from apogee.namesrv.processor import NamesrvProcessor
from apogee.namesrv.routes import RouteTable
from apogee.remoting.codes import RequestCode
from apogee.remoting.config import RemotingConfig
from apogee.remoting.config_requests import ConfigRequestProcessor
from apogee.remoting.connection import Connection
from apogee.remoting.server import RemotingServer, RequestDispatcher
from apogee.remoting.tls import TlsContexts

log = logging.getLogger("apogee.namesrv")


class NameServer:
    def __init__(
        self,
        config: NamesrvConfig | None = None,
        remoting: RemotingConfig | None = None,
        *,
        persist_kv: bool = True,
        tls: TlsContexts | None = None,
    ) -> None:
        self.config = config or NamesrvConfig()
        remoting = remoting or RemotingConfig()
        self.routes = RouteTable()
        self.kv = KVConfig(self.config.kv_config_path if persist_kv else None)
        self.processor = NamesrvProcessor(self.config, self.routes, self.kv)
        self.settings = LiveConfig(
            (self.config, remoting), self.config.settings_path,
            live=LIVE_NAMESRV_KEYS, never=NEVER_NAMESRV_KEYS, now_ms=int(time.time() * 1000),
        )
        dispatcher = RequestDispatcher()
        self.processor.register_with(dispatcher)
        ConfigRequestProcessor(
            self.settings, get_code=RequestCode.GET_NAMESRV_CONFIG, update_code=RequestCode.UPDATE_NAMESRV_CONFIG,
            version_header=False,
        ).register_with(dispatcher)
        self.tls = tls
        self.server = RemotingServer(dispatcher, remoting, on_connection_closed=self._connection_closed, tls=tls)
        self.address: tuple[str, int] | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self.metrics: MetricsServer | None = None

    def _connection_closed(self, conn: Connection) -> None:
        # A broker's connection closing means the broker is gone (RocketMQ's
        # BrokerHousekeepingService); its next registration brings it back.
        for addr in self.routes.remove_brokers_of_connection(conn):
            log.info("broker %s removed: its connection closed", addr)

    def reload_tls(self) -> None:
        """SIGHUP: new certificates for connections accepted from now on (``TlsContexts.reload``)."""
        if self.tls is None:
            log.info("SIGHUP: no TLS configured, nothing to reload")
        else:
            self.tls.reload()

    async def start(self) -> tuple[str, int]:
        self.kv.load()
        self.address = await self.server.start(self.config.listen_host, self.config.listen_port)
        warning = open_port_warning("NameServer", self.config.listen_host, acl=False)
        if warning is not None:
            log.warning("%s", warning)
        self._scan_task = asyncio.create_task(self._scan_loop())
        where = metrics_address(self.config.metrics_listen, self.config.listen_host)
        if where is not None:
            source = NamesrvMetrics(self.routes, self.server, self.processor.requests)
            self.metrics = MetricsServer(METRIC_SPECS, source.parts)
            await self.metrics.start(*where)
        return self.address

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            for addr in self.routes.scan_expired(now_ms, self.config.broker_channel_expired_time_ms):
                log.warning(
                    "broker %s expired: no registration for %d ms",
                    addr,
                    self.config.broker_channel_expired_time_ms,
                )

    async def stop(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        if self._scan_task is not None:
            self._scan_task.cancel()
            await asyncio.gather(self._scan_task, return_exceptions=True)
        await self.server.close()
