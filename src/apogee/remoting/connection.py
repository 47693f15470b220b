"""One TCP connection speaking RemotingCommands, for both ends of the wire.

Either side may send requests: clients call brokers, and brokers call clients back
(NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...).  So a ``Connection`` both
correlates responses to the requests it sent (by ``opaque``) and hands incoming requests to
a ``Dispatcher``.  It owns a sans-I/O ``FrameDecoder``; this module only moves bytes.

Failure rules: a frame that cannot be decoded closes this connection only; when the
connection closes, every request still waiting on it fails at once with
``ConnectionClosedError``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from apogee.errors import ConnectionClosedError, RemoteProtocolError, RequestTimeoutError
from apogee.remoting.codec import FrameDecoder, encode, fields_frame
from apogee.remoting.command import RPC_RESPONSE, Buffer, RemotingCommand
from apogee.remoting.config import RemotingConfig

log = logging.getLogger("apogee.remoting.connection")

ResponseCallback = Callable[["RemotingCommand | None", "BaseException | None"], None]
_OPAQUE_MASK = 0x7FFFFFFF


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


class Connection(asyncio.Protocol):
    """A RemotingCommand connection; create it through a server or ``open_connection``."""

    def __init__(
        self,
        dispatcher: Dispatcher | None,
        config: RemotingConfig,
        on_closed: Callable[[Connection], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._config = config
        self._on_closed = on_closed
        self._decoder = FrameDecoder(config.max_frame_size)
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
        self._drain_waiters: list[asyncio.Future[None]] = []
        # Frames written in one loop turn go out in at most two writes: the first at once,
        # the rest joined when the turn ends (one syscall instead of one per response when
        # many requests are in flight).  A lone request or response per turn, the
        # request/reply pattern, leaves at once.
        self._outbox: list[object] = []
        self._turn_open = False
        self._loop = asyncio.get_running_loop()
        self.closed_future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.peer: tuple[str, int] = ("", 0)
        self.local: tuple[str, int] = ("", 0)
        self.last_activity = time.monotonic()
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
        self._close_reason = ""

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        if not self._outbox:
            self._turn_open = False
        try:
            commands = self._decoder.feed(data)
        except RemoteProtocolError as exc:
            log.warning("closing connection from %s:%d: %s", *self.peer, exc)
            self.close(f"protocol error: {exc}")
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

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
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
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

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

    def send_frame(self, frame: bytes) -> None:
        """Write one frame encoded by the caller (``codec.fields_frame``)."""
        self._check_open()
        self._write([frame])

    def _check_open(self) -> None:
        if self._transport is None or self._closed:
            raise ConnectionClosedError(
                f"connection to {self.peer[0]}:{self.peer[1]} is closed: {self._close_reason}"
            )

    def _write(self, parts: list[Buffer]) -> None:
        self.last_activity = time.monotonic()
        if not self._turn_open:
            # The first frame of a loop turn (or since data last arrived) leaves at once;
            # frames that follow it in the same turn are joined and written when the turn
            # ends.  The turn closes on its own, so a frame produced later (a held pull's
            # answer, a request after a quiet spell) is not held back for a turn.
            self._turn_open = True
            if not self._transport.is_closing():  # type: ignore[union-attr]
                self._transport.write(parts[0] if len(parts) == 1 else b"".join(parts))  # type: ignore[union-attr]
            self._loop.call_soon(self._end_turn)  # after the write: the peer starts sooner
            return
        self._outbox += parts

    def _end_turn(self) -> None:
        self._turn_open = False
        self._flush_outbox()

    def _flush_outbox(self) -> None:
        # One write of the joined buffers: uvloop's writelines issues a send() per buffer,
        # and a syscall costs far more than copying the bytes once (stored messages stay
        # memoryview slices of the CommitLog until this single copy).
        outbox, self._outbox = self._outbox, []
        if outbox and self._transport is not None and not self._transport.is_closing():
            self._transport.write(outbox[0] if len(outbox) == 1 else b"".join(outbox))  # type: ignore[arg-type]

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
        cmd.flag |= 0x2
        cmd.opaque = self._next_opaque
        self._next_opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        self.send(cmd)

    def close(self, reason: str = "closed locally") -> None:
        if self._transport is not None and not self._closed:
            self._close_reason = reason
            self._flush_outbox()  # what was already answered still goes out
            self._transport.close()
        self._closed = True

    def abort(self, reason: str) -> None:
        if self._transport is not None and not self._closed:
            self._close_reason = reason
            self._transport.abort()
        self._closed = True

    @property
    def is_write_paused(self) -> bool:
        return self._write_paused
