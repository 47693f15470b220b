"""Settings of the remoting transport, shared by servers and clients.

The limits a server enforces on its connections (``remoting/limits.py``) live here too, so a
broker.conf or namesrv.conf sets them for the broker's and the NameServer's port alike.
Names are RocketMQ's where the concept exists (NettyServerConfig, NettySystemConfig); the
others are Apogee's own, in the same style.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from apogee.common.config import rmq_key
from apogee.errors import ConfigError
from apogee.remoting.codec import DEFAULT_MAX_FRAME_SIZE

BUSY_POLL_ENV = "APOGEE_BUSY_POLL_US"


def busy_poll_from_env() -> int:
    """``busy_poll_us``'s default: $APOGEE_BUSY_POLL_US, microseconds, or 0 when unset."""
    text = os.environ.get(BUSY_POLL_ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise ConfigError(f"{BUSY_POLL_ENV} must be a whole number of microseconds, not {text!r}")
    return int(text)


@dataclass
class RemotingConfig:
    # Largest frame accepted from a peer (Java: com.rocketmq.remoting.frameMaxLength); it is
    # also the most one connection may hold for an incomplete frame.
    max_frame_size: int = field(default=DEFAULT_MAX_FRAME_SIZE, metadata=rmq_key("frameMaxLength"))
    # A connection with no traffic in either direction for this long is closed (Java: 120 s).
    channel_max_idle_time_s: int = field(
        default=120, metadata=rmq_key("serverChannelMaxIdleTimeSeconds")
    )
    # How long a client waits for TCP connect before failing the request (Java: 3000 ms).
    connect_timeout_ms: int = field(default=3000, metadata=rmq_key("connectTimeoutMillis"))
    # Cap on requests awaiting a response per connection; beyond it invoke fails fast.
    max_pending_requests: int = field(default=65535, metadata=rmq_key("clientAsyncSemaphoreValue"))
    # Connections the kernel queues for a server before it accepts them (Java: 1024).
    server_socket_backlog: int = 1024
    # Connections a server keeps open; one more is closed as soon as it is accepted (Apogee's;
    # lowered at start to what the process's descriptor limit allows).
    server_max_connections: int = 4096
    # Bytes all of a server's connections may hold together for frames not yet complete; past
    # it, the connections whose frame started first are closed (Apogee's).
    server_max_incomplete_frame_bytes: int = 64 * 1024 * 1024
    # Once the first byte of a frame arrived, the whole frame must arrive within this time, or
    # its connection is closed (Apogee's; 16 MiB at 1 MB/s takes 17 s; 0: no deadline).
    server_frame_receive_timeout_ms: int = field(
        default=30_000, metadata=rmq_key("serverFrameReceiveTimeoutMillis")
    )
    # Above the high mark of answers waiting for the peer, a server stops reading and
    # processing that connection's requests until they drain below the low mark (Java names;
    # 0 keeps the event loop's default, 64 KiB and a quarter of the high mark).
    write_buffer_high_water_mark: int = 1024 * 1024
    write_buffer_low_water_mark: int = 256 * 1024
    # Busy polling (remoting/busy_poll.py): after data arrives or a request goes out, the
    # event loop keeps polling instead of sleeping for this many microseconds, trading CPU
    # for latency (Apogee's; 0: off; 50-200 suits request/reply traffic).  Default:
    # $APOGEE_BUSY_POLL_US, else 0, so a client's can be set without touching its code.
    busy_poll_us: int = field(default_factory=busy_poll_from_env)


def parse_listen(value: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST`` or ``:PORT`` -> (host, port): a server's ``--listen``."""
    host, sep, port = value.rpartition(":")
    if not sep:
        return value or "0.0.0.0", default_port
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad port in {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)
