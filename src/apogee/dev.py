"""An embedded NameServer + Broker in one process: ``apogee dev``, the demo and examples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from apogee.broker.config import BrokerConfig
from apogee.common.config import apply
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.server import NameServer
from apogee.remoting.config import parse_listen
from apogee.store.config import StoreConfig

if TYPE_CHECKING:
    from apogee.dashboard.server import DashboardServer


@dataclass
class DevCluster:
    root: Path
    namesrv: NameServer
    broker_config: BrokerConfig
    store_config: StoreConfig
    dashboard_listen: str = ""

    @classmethod
    def from_options(
        cls, root: Path, namesrv_listen: str, broker_listen: str, flush: str = "ASYNC_FLUSH", metrics_listen: str = "",
        dashboard_listen: str = "",
    ) -> DevCluster:
        """``metrics_listen``: the broker's /metrics (HOST:PORT), the NameServer's on the next
        port (port 0: both on free ports); empty: none.  ``dashboard_listen``: the web
        dashboard (HOST:PORT, port 0: a free one); empty: none."""
        root = root.resolve()
        ns_config = NamesrvConfig(rocketmq_home=str(root / "namesrv"))
        ns_config.listen_host, ns_config.listen_port = parse_listen(namesrv_listen, 9876)
        broker = BrokerConfig(
            broker_name="broker-a", broker_ip1="127.0.0.1", auto_create_topic_enable=True, enable_property_filter=True,
            metrics_listen=metrics_listen,
        )
        if metrics_listen:
            host, port = parse_listen(metrics_listen, 5557)
            ns_config.metrics_listen = f"{host}:{port + 1 if port else 0}"
        broker.listen_host, broker.listen_port = parse_listen(broker_listen, 10911)
        store = StoreConfig()
        apply(store, {"storePathRootDir": str(root / "store"), "flushDiskType": flush})
        if dashboard_listen:
            parse_listen(dashboard_listen, 8080)  # a bad value is refused before anything starts
        return cls(root, NameServer(ns_config), broker, store, dashboard_listen)

    async def start(self) -> tuple[str, str]:
        from apogee.broker.controller import BrokerController

        host, port = await self.namesrv.start()
        self.broker_config.namesrv_addr = f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
        self.broker = BrokerController(self.broker_config, self.store_config)
        bhost, bport = await self.broker.start()
        if self.dashboard_listen:
            from apogee.dashboard.server import DashboardServer
            from apogee.dashboard.settings import DashboardSettings

            self.dashboard: DashboardServer | None = DashboardServer(
                DashboardSettings(namesrv_addr=self.broker_config.namesrv_addr, listen=self.dashboard_listen)
            )
            await self.dashboard.start()
        return f"{host}:{port}", f"{bhost}:{bport}"

    def metrics_note(self) -> str:
        """Where /metrics is served, for the ready line; "" when it is not."""
        urls = [m.url for m in (self.namesrv.metrics, getattr(self, "broker", None) and self.broker.metrics) if m]
        return f" metrics {' '.join(urls)}" if urls else ""

    def dashboard_note(self) -> str:
        """Where the dashboard is served, for the ready line; "" when it is not."""
        dashboard = getattr(self, "dashboard", None)
        return f" dashboard {dashboard.url}" if dashboard is not None else ""

    async def stop(self) -> None:
        dashboard = getattr(self, "dashboard", None)
        if dashboard is not None:
            await dashboard.stop()
        broker = getattr(self, "broker", None)
        if broker is not None:
            await broker.stop()
        await self.namesrv.stop()
