"""Client settings: one dataclass per role, with units in the names.

``ClientConfig`` holds what every client needs (NameServers, identity, timers);
``ProducerConfig`` and ``ConsumerConfig`` extend it.  Defaults are RocketMQ's; every timer is
configurable so tests can run rebalance and persistence in fractions of a second.  RocketMQ's
Java property names (``pollNameServerInterval``, ``pullThresholdForQueue``...) are the
camel-cased field names, so ``apogee.common.config.apply`` can load them from a file.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from apogee.client.consumer.allocate import AllocateAveragely, AllocateStrategy
from apogee.client.types import ConsumeFromWhere, MessageModel
from apogee.common import constants as c
from apogee.common.config import rmq_key
from apogee.common.validators import validate_topic
from apogee.errors import ConfigError
from apogee.remoting.config import RemotingConfig
from apogee.remoting.signing import SessionCredentials
from apogee.remoting.tls_config import TlsClientConfig

_instance_counter = itertools.count(1)

DEFAULT_LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
DEFAULT_NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)


# Credentials from the environment when not given (the CLI, the Spark connector and
# applications all read them here).
ACCESS_KEY_ENV = "APOGEE_ACCESS_KEY"
SECRET_KEY_ENV = "APOGEE_SECRET_KEY"
SECURITY_TOKEN_ENV = "APOGEE_SECURITY_TOKEN"


def _env(name: str) -> Callable[[], str]:
    return lambda: os.environ.get(name, "")


def _default_offset_store_dir() -> str:
    return os.environ.get("APOGEE_OFFSET_STORE_DIR") or str(Path.home() / ".rocketmq_offsets")


@dataclass
class ClientConfig:
    # NameServer addresses, "host:port;host:port"; the client fails over between them.
    namesrv_addr: str = field(default="", metadata=rmq_key("namesrvAddr"))
    # Part of the client id ``ip@instance_name``.  Empty: "<pid>#<n>", unique per client
    # object, so several consumers of one group can live in one process.  Set it to a stable
    # name when a broadcasting consumer must find its local offsets after a restart.
    instance_name: str = ""
    # The IP in the client id; empty: detected (first non-loopback IPv4).
    client_ip: str = field(default="", metadata=rmq_key("clientIP"))
    unit_name: str = ""
    # Timeout of every administrative request (routes, heartbeats, offsets, locks).
    request_timeout_ms: int = field(default=3000, metadata=rmq_key("mqClientApiTimeout"))
    # Topic routes are refreshed this often (and on demand).
    poll_name_server_interval_ms: int = field(default=30_000, metadata=rmq_key("pollNameServerInterval"))
    # Heartbeats go to every broker this often (and when a consumer starts).
    heartbeat_broker_interval_ms: int = field(default=30_000, metadata=rmq_key("heartbeatBrokerInterval"))
    # Consumers send their offsets to brokers (or the local file) this often.
    persist_consumer_offset_interval_ms: int = field(default=5_000, metadata=rmq_key("persistConsumerOffsetInterval"))
    remoting: RemotingConfig = field(default_factory=RemotingConfig)
    # TLS to NameServers and brokers (None, or enable=False: plain): docs/security.md, TLS.
    tls: TlsClientConfig | None = None
    # Message traces (RocketMQ's enableMsgTrace): producers write a Pub record per stored
    # message (transaction producers an EndTransaction per decision too), push and lite pull
    # consumers SubBefore/SubAfter per message consumed, to RMQ_SYS_TRACE_TOPIC or
    # ``custom_trace_topic``; ``apogee admin query-msg-trace-by-id`` shows them.
    enable_msg_trace: bool = False
    custom_trace_topic: str = field(default="", metadata=rmq_key("customizedTraceTopic"))
    # ACL (docs/security.md): with an AccessKey and SecretKey every request is signed as
    # RocketMQ's AclClientRPCHook signs it.  Default: $APOGEE_ACCESS_KEY, $APOGEE_SECRET_KEY,
    # $APOGEE_SECURITY_TOKEN.  The secret and token are never shown in repr.
    access_key: str = field(default_factory=_env(ACCESS_KEY_ENV))
    secret_key: str = field(default_factory=_env(SECRET_KEY_ENV), repr=False)
    security_token: str = field(default_factory=_env(SECURITY_TOKEN_ENV), repr=False)

    def credentials(self) -> SessionCredentials | None:
        """The credentials requests are signed with; None: requests are not signed."""
        if not self.access_key:
            return None
        return SessionCredentials(self.access_key, self.secret_key, self.security_token or None)

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]

    def resolve_identity(self, detect_ip: Callable[[], str]) -> None:
        """Fill in the detected IP (``detect_ip``: the client instance passes
        ``common.host.local_ip``, keeping this module free of sockets) and the default
        instance name, once, at start."""
        if not self.client_ip:
            self.client_ip = detect_ip()
        if not self.instance_name:
            self.instance_name = f"{os.getpid()}#{next(_instance_counter)}"

    def client_id(self) -> str:
        """``ip@instanceName[@unitName]``, as Java clients build it."""
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid

    def validate(self) -> None:
        if not self.namesrv_list():
            raise ConfigError("namesrv_addr is empty: give at least one NameServer as host:port")
        for addr in self.namesrv_list():
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(f"NameServer address {addr!r} is not host:port")
        for name in (
            "request_timeout_ms",
            "poll_name_server_interval_ms",
            "heartbeat_broker_interval_ms",
            "persist_consumer_offset_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.tls is not None:
            self.tls.validate()
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("access_key and secret_key go together: give both (or neither) to sign requests")
        if self.custom_trace_topic:
            problem = validate_topic(self.custom_trace_topic)
            if problem is not None:
                raise ConfigError(f"custom_trace_topic: {problem}")


@dataclass
class ProducerConfig(ClientConfig):
    group: str = field(default=c.DEFAULT_PRODUCER_GROUP, metadata=rmq_key("producerGroup"))
    send_timeout_ms: int = field(default=3000, metadata=rmq_key("sendMsgTimeout"))
    # Extra attempts of a failed sync send (on another broker when there is one).
    retry_times_when_send_failed: int = 2
    # Extra attempts of a failed async send.
    retry_times_when_send_async_failed: int = 2
    # Retry when the broker stored the message but answered FLUSH_*_TIMEOUT / SLAVE_NOT_AVAILABLE.
    retry_another_broker_when_not_store_ok: bool = False
    # Bodies of at least this many bytes are zlib-compressed (COMPRESSED sysflag bit).
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    max_message_size: int = 4 * 1024 * 1024
    # Queues of a topic auto-created by the first send (capped by TBW102's queue count).
    default_topic_queue_nums: int = 4
    create_topic_key: str = c.TBW102
    # Avoid brokers that were slow or failed recently (latency fault tolerance).
    send_latency_fault_enable: bool = False
    latency_max_ms: tuple[int, ...] = DEFAULT_LATENCY_MAX_MS
    not_available_duration_ms: tuple[int, ...] = DEFAULT_NOT_AVAILABLE_DURATION_MS
    # Backpressure: ``send_async`` waits while this many messages await their result.
    max_inflight_messages: int = 20_000
    # Coalesce ``send_async`` calls to one topic into SEND_BATCH_MESSAGE requests.
    auto_batch: bool = True
    # How long a partial batch waits for company; 0 sends at the next loop iteration.
    batch_linger_ms: float = 0.0
    batch_max_messages: int = 512
    batch_max_bytes: int = 1024 * 1024

    def validate(self) -> None:
        super().validate()
        if not self.group:
            raise ConfigError("the producer group is empty")
        if self.max_inflight_messages < 1:
            raise ConfigError("max_inflight_messages must be at least 1")
        if self.batch_max_messages < 1 or self.batch_max_bytes < 1:
            raise ConfigError("batch_max_messages and batch_max_bytes must be positive")
        if len(self.latency_max_ms) != len(self.not_available_duration_ms):
            raise ConfigError("latency_max_ms and not_available_duration_ms must have the same length")


@dataclass
class ConsumerConfig(ClientConfig):
    group: str = field(default=c.DEFAULT_CONSUMER_GROUP, metadata=rmq_key("consumerGroup"))
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    # For CONSUME_FROM_TIMESTAMP: epoch ms; 0 means half an hour before start (RocketMQ's default).
    consume_timestamp_ms: int = 0
    allocate_strategy: AllocateStrategy = field(default_factory=AllocateAveragely)
    rebalance_interval_ms: int = 20_000
    # Flow control per queue: stop pulling above this many cached messages / MiB.
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = field(default=100, metadata=rmq_key("pullThresholdSizeForQueue"))
    # Concurrent consumption pauses pulling when the cached offsets span more than this.
    consume_concurrently_max_span: int = 2000
    pull_batch_size: int = 32
    pull_interval_ms: int = 0
    # Messages handed to one listener call.
    consume_message_batch_max_size: int = 1
    # Worker threads for sync listeners; concurrent calls of async listeners.
    consume_thread_max: int = 20
    # Deliveries before a message goes to the DLQ; -1 means 16 (for orderly listeners too).
    max_reconsume_times: int = -1
    # Orderly: pause of a queue after SUSPEND_CURRENT_QUEUE_A_MOMENT.
    suspend_current_queue_time_ms: int = 1000
    # A message consuming longer than this is sent back and released.
    consume_timeout_min: int = field(default=15, metadata=rmq_key("consumeTimeout"))
    # Long polling: how long the broker holds an empty pull; the RPC waits this much more.
    broker_suspend_max_time_ms: int = 15_000
    consumer_timeout_ms_when_suspend: int = 30_000
    # Wait after a failed pull before trying again.
    pull_retry_delay_ms: int = 3000
    # Wait while flow control holds a queue.
    pull_flow_control_delay_ms: int = 50
    # Send the subscription with every pull (the broker filters even without a heartbeat).
    post_subscription_when_pull: bool = True
    # Orderly: queue locks are renewed this often and trusted this long.
    lock_interval_ms: int = 20_000
    lock_max_live_ms: int = 30_000
    # Orderly: a queue whose broker lock was refused is asked for again this soon.
    lock_retry_delay_ms: int = 1000
    # On rebalance hand-off and shutdown, wait this long for in-flight listeners before the
    # final offset commit (so the next owner starts where this one stopped).
    drain_timeout_ms: int = 3000
    # Local retry of messages whose send-back to the broker failed.
    local_retry_delay_ms: int = 5000
    # Lite pull: poll() updates the committed offsets (persisted with the others) when true;
    # otherwise only commit_sync()/commit() do.
    auto_commit: bool = True
    # Lite pull: stop pulling while this many messages wait for poll() in all queues.
    pull_threshold_for_all: int = 10_000
    # Lite pull: default wait of poll().
    poll_timeout_ms: int = 5000
    # Broadcasting offsets live under <offset_store_dir>/<client id>/<group>/offsets.json.
    offset_store_dir: str = field(default_factory=_default_offset_store_dir)

    def max_reconsume(self) -> int:
        return 16 if self.max_reconsume_times < 0 else self.max_reconsume_times

    def validate(self) -> None:
        super().validate()
        if not self.group:
            raise ConfigError("the consumer group is empty")
        if isinstance(self.message_model, str):
            try:
                self.message_model = MessageModel[self.message_model.upper()]
            except KeyError:
                raise ConfigError(f"message_model {self.message_model!r} is not CLUSTERING or BROADCASTING") from None
        if isinstance(self.consume_from_where, str):
            name = self.consume_from_where.upper().removeprefix("CONSUME_FROM_")
            try:
                self.consume_from_where = ConsumeFromWhere[name]
            except KeyError:
                raise ConfigError(
                    f"consume_from_where {self.consume_from_where!r} is not LAST_OFFSET, FIRST_OFFSET or TIMESTAMP"
                ) from None
        if not 1 <= self.pull_batch_size <= 1024:
            raise ConfigError("pull_batch_size must be between 1 and 1024")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise ConfigError("consume_message_batch_max_size must be between 1 and 1024")
        if self.consume_thread_max < 1:
            raise ConfigError("consume_thread_max must be at least 1")
        if self.rebalance_interval_ms <= 0:
            raise ConfigError("rebalance_interval_ms must be positive")


RoleConfig = TypeVar("RoleConfig", "ProducerConfig", "ConsumerConfig")


def with_options(
    cfg: RoleConfig, group: str | None, namesrv_addr: str | None, options: dict[str, Any], role: str
) -> RoleConfig:
    """``cfg`` with a client's constructor arguments applied (``Producer("g", "ns:9876",
    batch_max_messages=7)``), checked: ``TypeError`` for an unknown option, ``ConfigError``
    for a bad value."""
    for key, value in options.items():
        if not hasattr(cfg, key):
            raise TypeError(f"unknown {role} option {key!r}")
        setattr(cfg, key, value)
    if group is not None:
        cfg.group = group
    if namesrv_addr is not None:
        cfg.namesrv_addr = namesrv_addr
    cfg.validate()
    return cfg
