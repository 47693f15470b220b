"""The asyncio RemotingServer: accept connections, route request codes to processors.

A processor is a function ``(conn, request) -> response | None`` or a coroutine function
with the same shape.  Plain functions run inline on the loop (cheap lookups such as route
queries answer without a task); coroutine functions run as tasks so a slow request never
holds up the next frame on the same connection.

Whatever a processor does, the server keeps serving: a ``HeaderError`` becomes a
SYSTEM_ERROR response carrying its text, any other exception is logged and answered with
SYSTEM_ERROR, and an unknown code gets REQUEST_CODE_NOT_SUPPORTED, as a Java server does
(and a WARNING with the peer's address, once per code and connection: ``warn_unserved``).
Oneway requests are processed but never answered.

The server also enforces the connection limits of ``remoting/limits.py`` (how many
connections, how long a frame may take, how much incomplete frames may hold) and keeps their
counters in ``RemotingServer.counters``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from apogee.errors import HeaderError, RemoteError
from apogee.remoting.codec import body_size, fields_frame, request_command
from apogee.remoting.codes import ResponseCode, SerializeType
from apogee.remoting.command import RPC_ONEWAY, RPC_RESPONSE, Body, RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.limits import LimitCounters, ServerLimits
from apogee.remoting.tls import TlsContexts, TlsListener
from apogee.remoting.tls_config import TlsMode

log = logging.getLogger("apogee.remoting.server")


class FieldsAnswer(NamedTuple):
    """An answer given as its code and header fields (``codec.request_command`` rules: str or
    int values, None left out), with no remark, and a body when ``body`` is not None.

    A processor's most frequent answers (a stored send's, a pull's) are written straight from
    these (``codec.fields_frame``) when the request was JSON: no extFields dict, no command
    object; a body (a pull's records) follows the head unjoined.
    """

    code: int
    keys: tuple[str, ...]
    values: tuple[str | int | None, ...]
    body: Body = None


Answer = RemotingCommand | FieldsAnswer


class Deferred(NamedTuple):
    """An answer that waits for ``future`` (a group commit's, a slave's) and is then
    ``answer(result)``: replied from the future's done callback, with no task or coroutine
    per request -- the cheap form of an awaitable answer, for the sends that wait most."""

    future: asyncio.Future[Any]
    answer: Callable[[Any], Answer | None]


ProcessorResult = RemotingCommand | FieldsAnswer | Deferred | None | Awaitable[Answer | None]
Processor = Callable[[Connection, RemotingCommand], ProcessorResult]


# Request codes a connection sent that nobody serves, each logged once: at most this many per
# connection are remembered (a peer that tries every code leaves one line saying the rest are
# not logged, not a set that grows with it).
MAX_UNSERVED_CODES_LOGGED = 32
_UNSERVED = "apogee.unserved_codes"  # Connection.attributes key: the codes already logged
_JSON = SerializeType.JSON  # read per answer (an Enum class attribute read is slow: docs/architecture.md)


def warn_unserved(conn: Connection, code: int) -> None:
    """Log at WARNING, once per code and connection, that ``code`` is not served here, with
    the peer's address: the answer (REQUEST_CODE_NOT_SUPPORTED) is seen only by the client,
    and an operator should learn which feature a client expects of this server."""
    logged: set[int | None] = conn.attributes.setdefault(_UNSERVED, set())  # type: ignore[assignment]
    if code in logged or len(logged) > MAX_UNSERVED_CODES_LOGGED:
        return
    host, port = conn.peer
    if len(logged) == MAX_UNSERVED_CODES_LOGGED:
        logged.add(None)  # full: the line below is the last one for this connection
        log.warning(
            "%s:%d sent request code %d, which this server does not serve; it sent %d other "
            "unserved codes already: further ones from this connection are not logged",
            host, port, code, MAX_UNSERVED_CODES_LOGGED,
        )
        return
    logged.add(code)
    log.warning(
        "%s:%d sent request code %d, which this server does not serve (answered "
        "REQUEST_CODE_NOT_SUPPORTED)", host, port, code,
    )


class RequestDispatcher:
    """Request code -> processor, with Java's answers for unknown codes and failures."""

    def __init__(self) -> None:
        self._processors: dict[int, Processor] = {}
        self._default: Processor | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def register(self, code: int, processor: Processor) -> None:
        self._processors[int(code)] = processor

    def register_default(self, processor: Processor) -> None:
        """Processor for every code without its own (RocketMQ's default processor)."""
        self._default = processor

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        processor = self._processors.get(request.code, self._default)
        if processor is None:
            warn_unserved(conn, request.code)
            self._reply(
                conn,
                request,
                request.response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                ),
            )
            return
        try:
            result = processor(conn, request)
        except Exception as exc:
            self._reply(conn, request, self._failure(request, exc))
            return
        if result.__class__ is Deferred:
            future, answer = result
            future.add_done_callback(lambda f: self._deferred_reply(conn, request, f, answer))
        elif (
            result.__class__ is not RemotingCommand
            and result.__class__ is not FieldsAnswer
            and inspect.isawaitable(result)
        ):
            task = asyncio.ensure_future(self._finish(conn, request, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._reply(conn, request, cast("Answer | None", result))

    async def _finish(
        self,
        conn: Connection,
        request: RemotingCommand,
        pending: Awaitable[Answer | None],
    ) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._failure(request, exc)
        self._reply(conn, request, response)

    def _deferred_reply(
        self, conn: Connection, request: RemotingCommand, future: asyncio.Future[Any],
        answer: Callable[[Any], Answer | None],
    ) -> None:
        if future.cancelled():  # the server is stopping: no answer, as a cancelled _finish
            return
        try:
            exc = future.exception()
            response = answer(future.result()) if exc is None else self._failure(request, cast(Exception, exc))
        except Exception as exc2:
            response = self._failure(request, exc2)
        self._reply(conn, request, response)

    @staticmethod
    def _failure(request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, HeaderError):
            log.info("bad header in request code %d: %s", request.code, exc)
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if isinstance(exc, RemoteError):
            return request.response(exc.code, exc.remark)
        log.exception("processor for request code %d failed", request.code)
        return request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _reply(conn: Connection, request: RemotingCommand, response: Answer | None) -> None:
        if response is None or request.flag & 3 == RPC_ONEWAY or not conn.is_open:  # 3: see is_oneway
            return
        if response.__class__ is FieldsAnswer:
            code, keys, values, body = response
            if request.serialize_type == _JSON:
                if body is None:
                    conn.send_frame(fields_frame(code, request.opaque, RPC_RESPONSE, keys, values, None))
                else:
                    size = body.nbytes if body.__class__ is memoryview else body_size(body)
                    conn.send_frame(fields_frame(code, request.opaque, RPC_RESPONSE, keys, values, size), body)
                return
            cmd = request_command(code, keys, values, body)
        else:
            cmd = response  # type: ignore[assignment]
        cmd.opaque = request.opaque
        cmd.flag |= 0x1
        cmd.serialize_type = request.serialize_type
        conn.send(cmd)

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# Descriptors a server process needs besides its connections: store files, listening and
# outbound sockets, the loop's own.
_RESERVED_DESCRIPTORS = 512


def fit_descriptor_limit(connections: int) -> int:
    """How many connections the process can hold open: the soft descriptor limit is raised
    toward the hard one when ``connections`` needs it (as the JVM does at start on Linux),
    and what still does not fit lowers the answer."""
    wanted = connections + _RESERVED_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return connections
    return max(1, min(connections, soft - _RESERVED_DESCRIPTORS))


class _Refused(asyncio.Protocol):
    """A connection accepted above the limit: closed at once, counted, logged (rate-limited)."""

    def __init__(self, server: RemotingServer) -> None:
        self._server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()
        server = self._server
        server.counters.connections_refused += 1
        peer = transport.get_extra_info("peername")
        server.limits.warn(
            "connections",
            "refusing connection from %s: %d connections open, serverMaxConnections=%d",
            f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else peer,
            len(server.connections),
            server.max_connections,
        )


class RemotingServer:
    """Listen on a TCP address and serve RemotingCommands through a ``RequestDispatcher``.

    With ``tls`` in permissive or enforcing mode the port is served by a ``TlsListener``
    (``remoting/tls.py``); otherwise by ``loop.create_server``, as a plain port always was."""

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        config: RemotingConfig | None = None,
        *,
        on_connection_closed: Callable[[Connection], None] | None = None,
        tls: TlsContexts | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.config = config or RemotingConfig()
        self.tls = tls
        self.connections: set[Connection] = set()
        self.limits = ServerLimits(
            self.config.server_max_incomplete_frame_bytes, self.config.server_frame_receive_timeout_ms / 1000
        )
        self.max_connections = self.config.server_max_connections
        self._on_connection_closed = on_connection_closed
        self._server: asyncio.base_events.Server | TlsListener | None = None
        self._watch_task: asyncio.Task[None] | None = None

    @property
    def counters(self) -> LimitCounters:
        """What the limits refused or closed so far."""
        return self.limits.counters

    def _make_connection(self) -> asyncio.Protocol:
        if len(self.connections) >= self.max_connections:
            return _Refused(self)
        conn = Connection(self.dispatcher, self.config, on_closed=self._closed, limits=self.limits)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self._on_connection_closed is not None:
            try:
                self._on_connection_closed(conn)
            except Exception:
                log.exception("connection-closed hook failed")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind and start serving; returns the bound (host, port) (useful with port 0)."""
        self.max_connections = fit_descriptor_limit(self.config.server_max_connections)
        if self.max_connections < self.config.server_max_connections:
            log.warning(
                "serverMaxConnections=%d lowered to %d: the process may open %d descriptors",
                self.config.server_max_connections,
                self.max_connections,
                resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            )
        backlog = self.config.server_socket_backlog
        if self.tls is not None and self.tls.mode is not TlsMode.DISABLED:
            listener = TlsListener(
                self._make_connection, self.tls.mode, self.tls, name="remoting port",
                room=lambda pending: len(self.connections) + pending < self.max_connections,
                counters=self.counters,
            )
            await listener.start(host, port, backlog)
            self._server = listener
            log.info("TLS %s on %s:%d", self.tls.mode.value, host, listener.sockets[0].getsockname()[1])
        else:
            self._server = await asyncio.get_running_loop().create_server(
                self._make_connection, host, port, reuse_address=True, backlog=backlog
            )
        self._watch_task = asyncio.create_task(self._watch())
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def _watch(self) -> None:
        """Close connections idle too long, and those whose frame is late."""
        idle_limit = self.config.channel_max_idle_time_s
        frames = self.limits.frames
        interval = max(0.05, min(10.0, idle_limit / 4, frames.timeout_s / 4 if frames.timeout_s > 0 else 10.0))
        while True:
            await asyncio.sleep(interval)
            for conn in frames.expired():
                frames.release(conn)
                self.counters.frames_timed_out += 1
                reason = (
                    "frame not complete within serverFrameReceiveTimeoutMillis="
                    f"{self.config.server_frame_receive_timeout_ms}"
                )
                self.limits.warn("frame-timeout", "closing connection from %s:%d: %s", *conn.peer, reason)
                conn.close(reason)
            self.limits.flush_logs()
            if isinstance(self._server, TlsListener):
                self._server.flush_logs()
            now = time.monotonic()
            for conn in list(self.connections):
                if now - conn.idle_since(now) > idle_limit:
                    self.counters.idle_closed += 1
                    log.info("closing idle connection from %s:%d", *conn.peer)
                    conn.close(f"idle for more than {idle_limit} s")

    async def close(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            await asyncio.gather(self._watch_task, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close("server shutting down")
        await self.dispatcher.cancel_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
