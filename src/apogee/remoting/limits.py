"""What one server lets its connections hold, and what it counts when it refuses.

Every byte a peer sends is untrusted, and so is its pace: a peer may open connections until
the process runs out of descriptors, start frames it never finishes, or send requests without
reading the answers.  A server (broker or NameServer) therefore bounds, besides the frame
size the decoder checks:

* the number of open connections (``serverMaxConnections``; more are closed when accepted);
* the bytes held for incomplete frames, summed over its connections
  (``serverMaxIncompleteFrameBytes``): when a read would pass the total, the connections whose
  incomplete frame started longest ago are closed until it fits;
* the time a frame may take to arrive once its first byte did
  (``serverFrameReceiveTimeoutMillis``), so a frame dribbled a byte at a time cannot keep a
  connection open past the idle limit;
* the answers waiting for a peer that does not read them (``writeBufferHighWaterMark``): the
  connection stops taking requests until they drain (``connection.py``).

This module keeps the state those rules need and the counters of what they refused; it
does no I/O (the owners of the bytes close themselves when told to).  Nothing here runs per
complete frame: the ledger is touched only when a read ends inside a frame.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from apogee.errors import RemoteProtocolError

log = logging.getLogger("apogee.remoting.limits")


class FrameLimitError(RemoteProtocolError):
    """A frame this connection was receiving had to be dropped to keep a server-wide bound."""


@dataclass(slots=True)
class LimitCounters:
    """What a server's limits refused or closed since it started (for a metrics exporter)."""

    connections_refused: int = 0  # accepted above serverMaxConnections and closed at once
    idle_closed: int = 0  # no traffic for serverChannelMaxIdleTimeSeconds
    frames_timed_out: int = 0  # a frame started but incomplete past its deadline
    frames_dropped_for_memory: int = 0  # closed to keep serverMaxIncompleteFrameBytes
    protocol_errors: int = 0  # malformed or oversized frames (frameMaxLength)
    write_pauses: int = 0  # times a connection stopped being read because its peer did not read
    tls_refused: int = 0  # plain-text connections closed by a TLS-enforcing port
    tls_handshake_failures: int = 0  # TLS handshakes that failed or did not finish in time


class RateLimitedLog:
    """At most one log line per ``interval_s`` for a kind of event; the events left out are
    told with the next line, or by ``flush`` once the interval is over.

    A flood (two thousand refused connections) is told in two lines, not one per event.
    """

    __slots__ = ("_logger", "_level", "_interval_s", "_next_at", "_suppressed", "_last", "_clock")

    def __init__(self, logger: logging.Logger, level: int = logging.WARNING, interval_s: float = 10.0) -> None:
        self._logger = logger
        self._level = level
        self._interval_s = interval_s
        self._next_at = 0.0
        self._suppressed = 0
        self._last: tuple[str, tuple[object, ...]] = ("", ())
        self._clock = time.monotonic

    def __call__(self, msg: str, *args: object) -> None:
        now = self._clock()
        if now < self._next_at:
            self._suppressed += 1
            self._last = (msg, args)
            return
        if self._suppressed:
            self._tell_suppressed()
        self._next_at = now + self._interval_s
        self._logger.log(self._level, msg, *args)

    def flush(self) -> None:
        """Tell the events left out, once their interval is over."""
        if self._suppressed and self._clock() >= self._next_at:
            self._tell_suppressed()

    def _tell_suppressed(self) -> None:
        msg, args = self._last
        prefix = "%d more like this in the last %.0f s, the last: "
        self._logger.log(self._level, prefix + msg, self._suppressed, self._interval_s, *args)
        self._suppressed = 0


class FrameHolder(Protocol):
    """A connection as the ledger sees it."""

    peer: tuple[str, int]

    def close(self, reason: str) -> None: ...

    @property
    def reading_paused(self) -> bool:
        """True while the server itself stopped reading it (its frame cannot progress)."""
        ...

    def drop_frame(self, reason: str) -> None:
        """Close: the incomplete frame it holds must go."""
        ...


class _Held:
    __slots__ = ("nbytes", "since")

    def __init__(self, nbytes: int, since: float) -> None:
        self.nbytes = nbytes
        self.since = since


class IncompleteFrames:
    """The bytes each connection of one server holds for a frame not yet complete.

    Holders are kept in the order their frames started, so the oldest are found first both
    when the total must shrink and when deadlines are checked.  Decoders call ``start`` when
    a read ends inside a new frame, ``grow`` when a later read adds to it without completing
    it, and ``release`` when nothing is left over (or the connection closes).
    """

    def __init__(self, max_bytes: int, timeout_s: float, counters: LimitCounters) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.counters = counters
        self.total = 0
        self._held: dict[FrameHolder, _Held] = {}
        self._clock = time.monotonic

    def __len__(self) -> int:
        return len(self._held)

    def start(self, owner: FrameHolder, nbytes: int) -> None:
        """A read ended ``nbytes`` into a frame that began in it."""
        held = self._held.pop(owner, None)  # re-inserted last: its frame is now the newest
        if held is not None:
            self.total -= held.nbytes
        self._held[owner] = _Held(nbytes, self._clock())
        self.total += nbytes
        if self.total > self.max_bytes:
            self._make_room(owner)

    def grow(self, owner: FrameHolder, nbytes: int) -> None:
        """The frame ``owner`` is receiving now holds ``nbytes`` (still incomplete)."""
        held = self._held.get(owner)
        if held is None:
            self.start(owner, nbytes)
            return
        self.total += nbytes - held.nbytes
        held.nbytes = nbytes
        if self.total > self.max_bytes:
            self._make_room(owner)

    def release(self, owner: FrameHolder) -> None:
        held = self._held.pop(owner, None)
        if held is not None:
            self.total -= held.nbytes

    def restart(self, owner: FrameHolder) -> None:
        """Give ``owner``'s frame a new deadline (after the server paused reading it)."""
        held = self._held.pop(owner, None)
        if held is not None:
            held.since = self._clock()
            self._held[owner] = held

    def _make_room(self, owner: FrameHolder) -> None:
        for victim in list(self._held):
            if self.total <= self.max_bytes:
                return
            reason = (
                f"incomplete frames of all connections hold more than serverMaxIncompleteFrameBytes="
                f"{self.max_bytes}; this connection's frame started first"
            )
            self.counters.frames_dropped_for_memory += 1
            if victim is owner:
                self.release(owner)
                raise FrameLimitError(reason)
            self.release(victim)
            victim.drop_frame(reason)

    def expired(self) -> list[FrameHolder]:
        """Holders whose frame started more than ``timeout_s`` ago while the server read them
        (none when ``timeout_s`` is 0: no deadline)."""
        if self.timeout_s <= 0:
            return []
        deadline = self._clock() - self.timeout_s
        late: list[FrameHolder] = []
        for owner, held in self._held.items():
            if held.since > deadline:
                break
            if not owner.reading_paused:
                late.append(owner)
        return late


class ServerLimits:
    """The shared part of one server's limits: its counters, its incomplete-frame ledger, and
    one rate-limited log line per kind of refusal."""

    def __init__(self, max_incomplete_frame_bytes: int, frame_timeout_s: float) -> None:
        self.counters = LimitCounters()
        self.frames = IncompleteFrames(max_incomplete_frame_bytes, frame_timeout_s, self.counters)
        self._logs: dict[str, RateLimitedLog] = {}

    def warn(self, kind: str, msg: str, *args: object) -> None:
        """Log ``msg`` unless a line of the same ``kind`` was logged in the last 10 s."""
        line = self._logs.get(kind)
        if line is None:
            line = self._logs[kind] = RateLimitedLog(log)
        line(msg, *args)

    def flush_logs(self) -> None:
        """Tell what the rate-limited lines left out (called periodically by the server)."""
        for line in self._logs.values():
            line.flush()
