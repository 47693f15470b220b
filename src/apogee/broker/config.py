"""Broker settings, with RocketMQ's BrokerConfig property names.

A broker.conf holds BrokerConfig, MessageStoreConfig and NettyServerConfig keys side by
side; ``load_broker_conf`` spreads one file over the three objects and reports the keys
none of them knows.
"""

from __future__ import annotations

import enum
import socket
from dataclasses import dataclass, field

from apogee.common.config import rmq_key


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def local_ip() -> str:
    """The address clients should use for this host: the first non-loopback IPv4 if any."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this only picks a route
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return str(ip)
    except OSError:
        pass
    return "127.0.0.1"


@dataclass
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=lambda: socket.gethostname().split(".")[0] or "broker-a")
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    # NameServer addresses, separated by ';'.
    namesrv_addr: str = ""
    # The IP written into STOREHOST and registered with the NameServers; empty = detect.
    broker_ip1: str = field(default="", metadata=rmq_key("brokerIP1"))
    listen_host: str = field(default="0.0.0.0", metadata=rmq_key("listenHost"))
    listen_port: int = 10911
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    register_name_server_period_ms: int = field(
        default=30_000, metadata=rmq_key("registerNameServerPeriod")
    )
    register_broker_timeout_ms: int = field(default=6_000, metadata=rmq_key("registerBrokerTimeoutMills"))
    notify_consumer_ids_changed_enable: bool = True
    long_polling_enable: bool = True
    # Pulls one connection may have held by long polling at once; one more is answered
    # SYSTEM_BUSY (Apogee's: a client holds one per queue it consumes from this broker).
    max_held_pulls_per_connection: int = 1024
    short_polling_time_ms: int = field(default=1_000, metadata=rmq_key("shortPollingTimeMills"))
    # Consumer offsets, subscription groups and delay progress are written this often.
    flush_consumer_offset_interval_ms: int = field(
        default=5_000, metadata=rmq_key("flushConsumerOffsetInterval")
    )
    # Clients silent this long are dropped (Java CHANNEL_EXPIRED_TIMEOUT).
    channel_expired_timeout_ms: int = field(default=120_000, metadata=rmq_key("channelExpiredTimeout"))
    # A queue lock not renewed within this time is free again.
    rebalance_lock_max_live_time_ms: int = field(
        default=60_000, metadata=rmq_key("rebalanceLockMaxLiveTime")
    )
    max_reconsume_times: int = 16
    # How many bytes/messages one pull may return (Java maxTransfer*OnMessageInMemory).
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    transaction_time_out_ms: int = field(default=6_000, metadata=rmq_key("transactionTimeOut"))
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = field(default=60_000, metadata=rmq_key("transactionCheckInterval"))
    enable_property_filter: bool = False
    reject_transaction_message: bool = False
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]

    def store_ip(self) -> str:
        return self.broker_ip1 or local_ip()
