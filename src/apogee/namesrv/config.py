"""NameServer settings, with RocketMQ's NamesrvConfig names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from apogee.common.config import rmq_key


def _default_home() -> str:
    return str(Path.home() / ".apogee" / "namesrv")


@dataclass
class NamesrvConfig:
    listen_host: str = field(default="0.0.0.0", metadata=rmq_key("listenHost"))
    listen_port: int = field(default=9876, metadata=rmq_key("listenPort"))
    # Where kvConfig.json lives.
    rocketmq_home: str = field(default_factory=_default_home, metadata=rmq_key("rocketmqHome"))
    # How often brokers are checked for silence, and how long silence may last (Java: 10 s, 120 s).
    scan_not_active_broker_interval_ms: int = field(
        default=10_000, metadata=rmq_key("scanNotActiveBrokerInterval")
    )
    broker_channel_expired_time_ms: int = field(
        default=120_000, metadata=rmq_key("brokerChannelExpiredTime")
    )
    # Put orderTopicConf (from the ORDER_TOPIC_CONFIG KV namespace) into routes.
    order_message_enable: bool = False
    # Where UPDATE_NAMESRV_CONFIG persists (RocketMQ's configStorePath): the namesrv.conf given
    # with -c; empty = <rocketmqHome>/namesrv.properties, applied at start when there is no -c.
    config_store_path: str = ""
    # Apogee's: where /metrics (Prometheus) is served, "HOST:PORT" (":PORT" or "PORT": on the
    # listen host); empty: not served.  The --metrics-listen flag sets it.
    metrics_listen: str = ""

    @property
    def kv_config_path(self) -> Path:
        return Path(self.rocketmq_home) / "kvConfig.json"

    @property
    def settings_path(self) -> Path:
        """Where runtime changes persist (``config_store_path`` or its default)."""
        if self.config_store_path:
            return Path(self.config_store_path)
        return Path(self.rocketmq_home) / "namesrv.properties"


# Keys the running NameServer reads on every use (the route answer, the expiry scan).
LIVE_NAMESRV_KEYS = frozenset({"orderMessageEnable", "brokerChannelExpiredTime"})
# RocketMQ's configBlackList: a request may not move where the configuration lives.
NEVER_NAMESRV_KEYS = frozenset({"configStorePath"})
