"""Settings of the remoting transport, shared by servers and clients."""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.common.config import rmq_key
from apogee.remoting.codec import DEFAULT_MAX_FRAME_SIZE


@dataclass
class RemotingConfig:
    # Largest frame accepted from a peer (Java: com.rocketmq.remoting.frameMaxLength).
    max_frame_size: int = field(default=DEFAULT_MAX_FRAME_SIZE, metadata=rmq_key("frameMaxLength"))
    # A connection with no traffic in either direction for this long is closed (Java: 120 s).
    channel_max_idle_time_s: int = field(
        default=120, metadata=rmq_key("serverChannelMaxIdleTimeSeconds")
    )
    # How long a client waits for TCP connect before failing the request (Java: 3000 ms).
    connect_timeout_ms: int = field(default=3000, metadata=rmq_key("connectTimeoutMillis"))
    # Cap on requests awaiting a response per connection; beyond it invoke fails fast.
    max_pending_requests: int = field(default=65535, metadata=rmq_key("clientAsyncSemaphoreValue"))
