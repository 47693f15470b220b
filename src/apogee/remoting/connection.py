"""One TCP connection speaking RemotingCommands, for both ends of the wire.

Either side may send requests: clients call brokers, and brokers call clients back
(NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...).  So a ``Connection`` both
correlates responses to the requests it sent (by ``opaque``) and hands incoming requests to
a ``Dispatcher``.  It owns a sans-I/O ``FrameDecoder``; this module only moves bytes.

Failure rules: a frame that cannot be decoded closes this connection only; when the
connection closes, every request still waiting on it fails at once with
``ConnectionClosedError``.

Backpressure, on a server's connection (one given ``ServerLimits``): when more than
``writeBufferHighWaterMark`` bytes wait for the peer, later frames wait in the outbox
unjoined (a pulled message stays a view of the store, not a copy), the connection stops
reading, and requests already read wait unprocessed, until the transport drains below
``writeBufferLowWaterMark``: a peer that does not read its answers cannot make them pile up.
A client keeps the transport's own limits and never stops reading, since its peer may be
waiting for it to read; its senders may ``drain()``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from apogee.errors import ConnectionClosedError, RemoteProtocolError, RequestTimeoutError
from apogee.remoting.busy_poll import kick_for
from apogee.remoting.codec import FrameDecoder, encode, fields_frame
from apogee.remoting.command import RPC_ONEWAY, RPC_RESPONSE, Body, Buffer, RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.limits import FrameLimitError, ServerLimits

log = logging.getLogger("apogee.remoting.connection")

ResponseCallback = Callable[["RemotingCommand | None", "BaseException | None"], None]
_OPAQUE_MASK = 0x7FFFFFFF
# Bytes written per write when frames that waited for a slow peer go out.
_PACE = 64 * 1024


def _nbytes(parts: list[Buffer]) -> int:
    size = 0
    for part in parts:  # a loop, not sum() of a generator: half the cost for a frame's 2-3 parts
        size += part.nbytes if part.__class__ is memoryview else len(part)
    return size


class Dispatcher(Protocol):
    """Whatever answers requests that arrive on a connection."""

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None: ...


class _Pending:
    __slots__ = ("future", "callback", "deadline", "code", "timeout_ms")

    def __init__(
        self,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
        deadline: float,
        code: int,
        timeout_ms: int,
    ) -> None:
        self.future = future
        self.callback = callback
        self.deadline = deadline
        self.code = code
        self.timeout_ms = timeout_ms

    def finish(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        if self.future is not None:
            if not self.future.done():
                if error is not None:
                    self.future.set_exception(error)
                else:
                    self.future.set_result(response)  # type: ignore[arg-type]
        elif self.callback is not None:
            try:
                self.callback(response, error)
            except Exception:
                log.exception("response callback raised")


class _HeldRequests:
    """Stands in for the dispatcher while the peer does not read its answers: the requests
    it sends meanwhile wait here, in order."""

    __slots__ = ("dispatcher", "requests")

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.requests: deque[RemotingCommand] = deque()

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        self.requests.append(request)


class Connection(asyncio.Protocol):
    """A RemotingCommand connection; create it through a server or ``open_connection``."""

    def __init__(
        self,
        dispatcher: Dispatcher | None,
        config: RemotingConfig,
        on_closed: Callable[[Connection], None] | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._config = config
        self._on_closed = on_closed
        self._limits = limits
        self._decoder = FrameDecoder(config.max_frame_size, limits.frames if limits is not None else None, self)
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, _Pending] = {}
        # One timer per connection, armed for the earliest deadline of the requests in
        # flight (RocketMQ scans its response table instead; a timer per request cost more
        # than the rest of a round trip's bookkeeping together).
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._next_opaque = 0
        self._closed = False
        self._close_reason = "not connected"
        self._write_paused = False
        # A server's connection while paused: frames wait in the outbox, requests in _held.
        self._holding = False
        self._reading_paused = False
        self._read_held = False  # hold_reading: the owner's own pause
        self._held: _HeldRequests | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Frames written in one loop turn go out in at most two writes: the first at once,
        # the rest in one writelines when the turn ends (one syscall instead of one per
        # response when many requests are in flight).  A lone request or response per turn,
        # the request/reply pattern, leaves at once.
        self._outbox: list[Buffer] = []
        self._turn_open = False
        # Bytes of the frames with a body in the outbox: on a server's connection, past the
        # high-water mark the outbox is written before the turn ends, so the transport can say
        # when to pause (a client writes once per turn, whatever it holds).
        self._outbox_bytes = 0
        self._outbox_limit = (config.write_buffer_high_water_mark or _PACE) if limits is not None else math.inf
        self._loop = asyncio.get_running_loop()
        self._kick = kick_for(config.busy_poll_us, self._loop)
        self.closed_future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.peer: tuple[str, int] = ("", 0)
        self.local: tuple[str, int] = ("", 0)
        # Traffic marks the connection active; the owner's periodic scan turns the mark into
        # a time (``idle_since``), which keeps the clock off the per-request path.
        self._active = True
        self._seen = time.monotonic()
        # Free slot for the owner (the broker keeps the client's id and language here).
        self.attributes: dict[str, object] = {}

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        if isinstance(peer, tuple):
            self.peer = (str(peer[0]), int(peer[1]))
        if isinstance(local, tuple):
            self.local = (str(local[0]), int(local[1]))
        high = self._config.write_buffer_high_water_mark
        if high > 0 and self._limits is not None:
            transport.set_write_buffer_limits(high, self._config.write_buffer_low_water_mark or None)  # type: ignore[attr-defined]
        self._close_reason = ""

    def data_received(self, data: bytes) -> None:
        self._active = True
        if self._kick is not None:
            self._kick()
        if not self._outbox:
            self._turn_open = False
        try:
            commands = self._decoder.feed(data)
        except RemoteProtocolError as exc:
            self._refuse_input(exc)
            return
        for cmd in commands:
            if cmd.flag & RPC_RESPONSE:
                pending = self._pending.pop(cmd.opaque, None)
                if pending is None:
                    log.debug("response for unknown opaque %d from %s:%d", cmd.opaque, *self.peer)
                else:
                    pending.finish(cmd, None)
            elif self._dispatcher is not None:
                self._dispatcher.dispatch(self, cmd)
            else:
                log.debug("ignoring request code %d: no dispatcher", cmd.code)

    def _refuse_input(self, exc: RemoteProtocolError) -> None:
        if self._closed:
            return  # bytes that arrived after close(): nobody reads them
        limits = self._limits
        if limits is None:
            log.warning("closing connection from %s:%d: %s", *self.peer, exc)
        elif isinstance(exc, FrameLimitError):  # counted by the ledger
            limits.warn("frame-memory", "closing connection from %s:%d: %s", *self.peer, exc)
        else:
            limits.counters.protocol_errors += 1
            limits.warn("protocol", "closing connection from %s:%d: %s", *self.peer, exc)
        self.close(f"protocol error: {exc}")

    # --- limits (a server's connection) -------------------------------------------------------

    def hold_reading(self, hold: bool) -> None:
        """Stop reading (``hold``) or read again for the owner's own reason (the broker's ACL
        while it checks a request off the loop): the read pause while the peer does not read
        its answers is separate, and reading restarts only when neither holds it."""
        if hold == self._read_held or self._transport is None or self._transport.is_closing():
            self._read_held = hold
            return
        self._read_held = hold
        if self._reading_paused:  # the write hold paused it: resume_writing decides
            return
        if hold:
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()
            if self._limits is not None:
                self._limits.frames.restart(self)

    @property
    def reading_paused(self) -> bool:
        """True while this side stopped reading because the peer does not read its answers."""
        return self._reading_paused

    def drop_frame(self, reason: str) -> None:
        """Close to free the incomplete frame held (the server's total is reached)."""
        if self._limits is not None:
            self._limits.warn("frame-memory", "closing connection from %s:%d: %s", *self.peer, reason)
        self.close(reason)

    def idle_since(self, now: float) -> float:
        """When traffic was last seen, as far as periodic scans tell: a scan that finds the
        connection active since the previous one records ``now``.  One scanner per connection."""
        if self._active:
            self._active = False
            self._seen = now
        return self._seen

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._decoder.discard()
        if not self._close_reason:
            self._close_reason = f"connection lost: {exc}" if exc else "closed by peer"
        pending, self._pending = self._pending, {}
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        peer = f"{self.peer[0]}:{self.peer[1]}"
        for p in pending.values():
            p.finish(None, ConnectionClosedError(f"connection to {peer} closed: {self._close_reason}"))
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        if not self.closed_future.done():
            self.closed_future.set_result(None)
        if self._on_closed is not None:
            self._on_closed(self)

    def pause_writing(self) -> None:
        """The transport holds more than the high-water mark: hold what follows (see module)."""
        self._write_paused = True
        limits = self._limits
        if limits is None or self._closed or self._transport is None or self._transport.is_closing():
            return
        self._holding = True
        # Keeps the turn open while holding (data_received and _end_turn leave an open turn
        # with a non-empty outbox alone), so every later frame waits in the outbox.
        self._outbox.append(b"")
        self._turn_open = True
        if self._held is None:
            self._held = _HeldRequests(self._dispatcher)  # type: ignore[arg-type]  # servers have one
            self._dispatcher = self._held
        if not self._reading_paused:
            self._reading_paused = True
            if not self._read_held:
                self._transport.pause_reading()
            limits.counters.write_pauses += 1

    def resume_writing(self) -> None:
        """The transport drained below the low-water mark: send what waited, then read again."""
        self._write_paused = False
        if self._holding:
            self._holding = False
            self._send_outbox()
            if self._write_paused or self._closed:
                return
            if not self._outbox:
                self._turn_open = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        held = self._held
        if held is None:
            return
        while held.requests:
            held.dispatcher.dispatch(self, held.requests.popleft())
            if self._write_paused or self._closed:
                return  # the rest waits, in order, for the next resume_writing
        self._dispatcher, self._held = held.dispatcher, None
        if self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = False
            if self._read_held:
                return  # hold_reading(False) reads again
            self._transport.resume_reading()
            if self._limits is not None:
                self._limits.frames.restart(self)  # its frame could not progress while paused

    # --- sending ------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._closed

    @property
    def close_reason(self) -> str:
        return self._close_reason

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def send(self, cmd: RemotingCommand) -> None:
        """Write one command (a response, or a request whose answer nobody awaits)."""
        self._check_open()
        self._write(encode(cmd))

    def send_frame(self, frame: bytes, body: Body = None) -> None:
        """Write one frame encoded by the caller (``codec.fields_frame``); ``body``, when
        given, follows the frame's head unjoined (a pull's records)."""
        self._check_open()
        if body is None:
            self._write([frame])
        elif isinstance(body, (bytes, bytearray, memoryview)):
            self._write([frame, body])
        else:
            self._write([frame, *body])

    def _check_open(self) -> None:
        if self._transport is None or self._closed:
            raise ConnectionClosedError(
                f"connection to {self.peer[0]}:{self.peer[1]} is closed: {self._close_reason}"
            )

    def _write(self, parts: list[Buffer]) -> None:
        self._active = True
        if not self._turn_open:
            # The first frame of a loop turn (or since data last arrived) leaves at once;
            # frames that follow it in the same turn are written together when the turn
            # ends.  The turn closes on its own, so a frame produced later (a held pull's
            # answer, a request after a quiet spell) is not held back for a turn.
            self._turn_open = True
            transport = self._transport
            if not transport.is_closing():  # type: ignore[union-attr]
                if len(parts) == 1:
                    transport.write(parts[0])  # type: ignore[union-attr]
                else:
                    transport.writelines(parts)  # type: ignore[union-attr]
            self._loop.call_soon(self._end_turn)  # after the write: the peer starts sooner
            return
        self._outbox += parts
        if len(parts) > 1:  # a frame with a body (those without are small)
            self._outbox_bytes += _nbytes(parts)
            if self._outbox_bytes > self._outbox_limit:
                self._send_outbox()

    def _end_turn(self) -> None:
        if self._outbox:
            self._flush_outbox()
        else:
            self._turn_open = False

    def _flush_outbox(self) -> None:
        """End the turn: write what it collected (unless the peer is not reading)."""
        if self._holding:
            return  # resume_writing sends it
        self._turn_open = False
        self._send_outbox()

    def _send_outbox(self) -> None:
        """Write the outbox.  Usually one ``writelines``: uvloop writes the buffers with one
        writev() and copies none of them (a pull's records, a 40 kB bytes or views of the
        CommitLog, go to the kernel as they are; the standard loop joins them).  Past the
        high-water mark it goes in chunks of about ``_PACE`` bytes and stops as soon as the
        transport pauses; the rest keeps waiting, in order, as they are."""
        if self._holding:
            return
        outbox, self._outbox = self._outbox, []
        counted, self._outbox_bytes = self._outbox_bytes, 0
        transport = self._transport
        if not outbox or transport is None or transport.is_closing():
            return
        if counted <= _PACE or self._limits is None:
            if len(outbox) == 1:
                transport.write(outbox[0])
            else:
                transport.writelines(outbox)
            return
        start = size = 0
        end = len(outbox)
        for i in range(end):
            part = outbox[i]
            size += part.nbytes if part.__class__ is memoryview else len(part)
            if size >= _PACE or i == end - 1:
                if i == start:
                    transport.write(outbox[start])
                else:
                    transport.writelines(outbox[start : i + 1])
                start, size = i + 1, 0
                if self._holding:
                    break
        if start < end:
            rest = outbox[start:]
            self._outbox[:0] = rest  # ahead of the marker pause_writing appended
            self._outbox_bytes = _nbytes(rest)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if not self._write_paused or self._closed:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _register(
        self,
        cmd: RemotingCommand,
        timeout_ms: int,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
    ) -> None:
        opaque = self._take_opaque()
        cmd.opaque = opaque
        self._write(encode(cmd))
        self._track(opaque, cmd.code, timeout_ms, future, callback)

    def _take_opaque(self) -> int:
        """The next request's opaque, or an error when no request may start."""
        self._check_open()
        if len(self._pending) >= self._config.max_pending_requests:
            raise ConnectionClosedError(
                f"too many requests in flight to {self.peer[0]}:{self.peer[1]} "
                f"({len(self._pending)})"
            )
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        return opaque

    def _track(
        self,
        opaque: int,
        code: int,
        timeout_ms: int,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
    ) -> None:
        # Registered after it is written: its answer cannot be read before this returns to
        # the loop, and the bookkeeping then overlaps the peer's work instead of preceding it.
        if self._kick is not None:
            self._kick()
        deadline = self._loop.time() + timeout_ms / 1000
        self._pending[opaque] = _Pending(future, callback, deadline, code, timeout_ms)
        if deadline < self._timer_at:
            self._arm(deadline)

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._expire_due)

    def _expire_due(self) -> None:
        """Fail the requests whose deadline has passed; re-arm for the earliest left."""
        self._timer, self._timer_at = None, math.inf
        now = self._loop.time()
        due = [opaque for opaque, p in self._pending.items() if p.deadline <= now + 0.001]
        for opaque in due:
            pending = self._pending.pop(opaque)
            pending.finish(
                None,
                RequestTimeoutError(
                    f"no response to request code {pending.code} from {self.peer[0]}:{self.peer[1]} "
                    f"within {pending.timeout_ms} ms"
                ),
            )
        if self._pending and not self._closed:
            self._arm(min(p.deadline for p in self._pending.values()))

    def invoke(self, cmd: RemotingCommand, timeout_ms: int) -> Awaitable[RemotingCommand]:
        """Send a request; the returned awaitable gives its response or raises.

        Raises ``RequestTimeoutError`` after ``timeout_ms``, ``ConnectionClosedError`` as
        soon as the connection closes.
        """
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._register(cmd, timeout_ms, future, None)
        return future

    def invoke_fields(
        self,
        code: int,
        keys: tuple[str, ...],
        values: tuple[str | int | None, ...],
        body: bytes | None,
        timeout_ms: int,
    ) -> Awaitable[RemotingCommand]:
        """``invoke`` of ``codec.request_command(code, keys, values, body)``, written straight
        from its fields (``codec.fields_frame``): no extFields dict, no command object."""
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        opaque = self._take_opaque()
        self._write([fields_frame(code, opaque, 0, keys, values, body)])
        self._track(opaque, code, timeout_ms, future, None)
        return future

    def invoke_callback(
        self, cmd: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        """Send a request; ``callback(response, error)`` runs on the loop when it completes."""
        self._register(cmd, timeout_ms, None, callback)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request with the oneway bit; no response will come."""
        cmd.flag |= RPC_ONEWAY
        cmd.opaque = self._next_opaque
        self._next_opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        self.send(cmd)

    def close(self, reason: str = "closed locally") -> None:
        if self._transport is not None and not self._closed:
            self._close_reason = reason
            if self._holding:
                # The peer is not reading: waiting to hand it what is queued would keep the
                # socket (and the queue) for as long as it pleases.
                self._transport.abort()
            else:
                outbox, self._outbox = self._outbox, []
                if outbox and not self._transport.is_closing():  # what was answered still goes out
                    self._transport.write(b"".join(outbox))
                self._transport.close()
        self._closed = True
        self._decoder.discard()

    def abort(self, reason: str) -> None:
        if self._transport is not None and not self._closed:
            self._close_reason = reason
            self._transport.abort()
        self._closed = True
        self._decoder.discard()

    @property
    def is_write_paused(self) -> bool:
        return self._write_paused
