"""Broker settings, with RocketMQ's BrokerConfig property names.

A broker.conf holds BrokerConfig, MessageStoreConfig and NettyServerConfig keys side by
side; ``load_broker_conf`` spreads one file over the three objects and reports the keys
none of them knows (``apogee broker`` stops on them, naming the closest known key).
"""

from __future__ import annotations

import enum
import ipaddress
import os
import socket
from dataclasses import dataclass, field

from apogee.common.config import rmq_key
from apogee.common.constants import RMQ_SYS_TRACE_TOPIC
from apogee.common.host import local_ip
from apogee.errors import ConfigError


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


# Listen hosts that mean "every interface": no one address to tell clients.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "*"})


def _ipv4_of(host: str) -> str | None:
    """``host`` as an IPv4 address (a literal, an IPv4-mapped IPv6 literal, or a name that
    resolves to one); None when it has none (STOREHOST holds IPv4 only)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            return None
        return str(infos[0][4][0]) if infos else None
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ip.ipv4_mapped) if ip.ipv4_mapped is not None else None
    return str(ip)


def advertised_ip(broker_ip1: str, listen_host: str) -> tuple[str, str]:
    """The IP registered with NameServers and written into STOREHOST, and why it was chosen.

    ``brokerIP1`` wins; a broker listening on one specific address can only be reached
    there, so that address comes next (a broker on 127.0.0.1 advertising the machine's LAN
    address sends every client where nothing listens); a wildcard listen host leaves the
    first non-loopback IPv4 of the host (``local_ip``), as RocketMQ does.
    """
    if broker_ip1:
        return broker_ip1, "brokerIP1 (--broker-ip) is set"
    if listen_host not in WILDCARD_HOSTS:
        ip = _ipv4_of(listen_host)
        if ip is not None:
            return ip, f"the broker listens on {listen_host} only"
        return local_ip(), (
            f"detected: the listen address {listen_host} has no IPv4 address for STOREHOST; set brokerIP1 to choose"
        )
    return local_ip(), f"detected: the listen address {listen_host or '*'} is a wildcard; set brokerIP1 to choose"


class BrokerAddress:
    """The address this broker advertises: registered with NameServers, written into every
    stored record's STOREHOST, named in refusals.  Its port is known only once the listener
    is bound (port 0 picks a free one), so the processors and services share this object
    and read it when they need it rather than keep a copy."""

    __slots__ = ("addr", "ip", "port", "store_host")

    def __init__(self, ip: str, port: int) -> None:
        self.ip = ip
        self.bind(port)

    def bind(self, port: int) -> None:
        """The port the listener is bound to."""
        self.port = port
        self.store_host: tuple[str, int] = (self.ip, port)
        self.addr = f"{self.ip}:{port}"


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
    # The IP of the HA address registered with NameServers (slaves connect there); empty = brokerIP1's.
    broker_ip2: str = field(default="", metadata=rmq_key("brokerIP2"))
    listen_host: str = field(default="0.0.0.0", metadata=rmq_key("listenHost"))
    listen_port: int = 10911
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    # Create the topic of clients' message traces (msg_trace_topic_name, 1 queue) at start.
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = RMQ_SYS_TRACE_TOPIC
    register_name_server_period_ms: int = field(
        default=30_000, metadata=rmq_key("registerNameServerPeriod")
    )
    register_broker_timeout_ms: int = field(default=6_000, metadata=rmq_key("registerBrokerTimeoutMills"))
    notify_consumer_ids_changed_enable: bool = True
    long_polling_enable: bool = True
    # Pulls one connection may have held by long polling at once; one more is answered
    # SYSTEM_BUSY (Apogee's: a client holds one per queue it consumes from this broker).
    max_held_pulls_per_connection: int = 256
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
    # Replies (SEND_REPLY_MESSAGE) are stored in their topic too, after the push to the requester.
    store_reply_message_enable: bool = True
    # Pull answers may send consumers to a slave (suggestWhichBrokerId) when this is set.
    slave_read_enable: bool = False
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # Apogee's: where /metrics (Prometheus) is served, "HOST:PORT" (":PORT" or "PORT": on the
    # listen host); empty: not served.  The --metrics-listen flag sets it.
    metrics_listen: str = ""
    # Apogee's, for measuring what statistics cost (RocketMQ's are always on): false counts
    # nothing (runtime info, VIEW_BROKER_STATS_DATA and /metrics then report zeros).
    broker_stats_enable: bool = True
    # ACL 1.0 (docs/security.md): every request is checked against plain_acl.yml, found under
    # rocketmqHome (RocketMQ's key; default $ROCKETMQ_HOME), else beside the -c broker.conf,
    # else under <storePathRootDir>/conf.  aclPlainFile (Apogee's, RocketMQ's
    # -Drocketmq.acl.plain.file) names another default file: absolute or relative to the home.
    acl_enable: bool = False
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    acl_plain_file: str = ""

    def validate_role(self) -> None:
        """RocketMQ's rule (BrokerStartup): a master is brokerId 0, a slave has an id > 0.

        RocketMQ silently forces a master's id to 0; Apogee refuses it instead, so an operator
        who meant a slave does not get a second master in the group."""
        if self.broker_role is BrokerRole.SLAVE:
            if self.broker_id <= 0:
                raise ConfigError(f"Slave's brokerId must be > 0 (brokerRole=SLAVE, brokerId={self.broker_id})")
        elif self.broker_id != 0:
            raise ConfigError(
                f"a master's brokerId must be 0 (brokerRole={self.broker_role.value}, brokerId={self.broker_id}); "
                "set brokerRole=SLAVE for a slave"
            )

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]
