"""The asyncio RemotingServer: accept connections, route request codes to processors.

A processor is a function ``(conn, request) -> response | None`` or a coroutine function
with the same shape.  Plain functions run inline on the loop (cheap lookups such as route
queries answer without a task); coroutine functions run as tasks so a slow request never
holds up the next frame on the same connection.

Whatever a processor does, the server keeps serving: a ``HeaderError`` becomes a
SYSTEM_ERROR response carrying its text, any other exception is logged and answered with
SYSTEM_ERROR, and an unknown code gets REQUEST_CODE_NOT_SUPPORTED, as a Java server does.
Oneway requests are processed but never answered.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from apogee.errors import HeaderError, RemoteError
from apogee.remoting.codec import fields_frame, request_command
from apogee.remoting.codes import ResponseCode, SerializeType
from apogee.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection

log = logging.getLogger("apogee.remoting.server")


class FieldsAnswer(NamedTuple):
    """An answer given as its code and header fields (``codec.request_command`` rules: str or
    int values, None left out), with no remark and no body.

    A processor's most frequent answer (a stored send's) is written straight from these
    (``codec.fields_frame``) when the request was JSON: no extFields dict, no command object.
    """

    code: int
    keys: tuple[str, ...]
    values: tuple[str | int | None, ...]


Answer = RemotingCommand | FieldsAnswer
ProcessorResult = RemotingCommand | FieldsAnswer | None | Awaitable[Answer | None]
Processor = Callable[[Connection, RemotingCommand], ProcessorResult]


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
        if (
            result.__class__ is not RemotingCommand
            and result.__class__ is not FieldsAnswer
            and inspect.isawaitable(result)
        ):
            task = asyncio.ensure_future(self._finish(conn, request, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._reply(conn, request, result)

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
            code, keys, values = response
            if request.serialize_type == SerializeType.JSON:
                conn.send_frame(fields_frame(code, request.opaque, RPC_RESPONSE, keys, values, None))
                return
            cmd = request_command(code, keys, values, None)
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


class RemotingServer:
    """Listen on a TCP address and serve RemotingCommands through a ``RequestDispatcher``."""

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        config: RemotingConfig | None = None,
        *,
        on_connection_closed: Callable[[Connection], None] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.config = config or RemotingConfig()
        self.connections: set[Connection] = set()
        self._on_connection_closed = on_connection_closed
        self._server: asyncio.base_events.Server | None = None
        self._idle_task: asyncio.Task[None] | None = None

    def _make_connection(self) -> Connection:
        conn = Connection(self.dispatcher, self.config, on_closed=self._closed)
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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, host, port, reuse_address=True, backlog=1024
        )
        self._idle_task = asyncio.create_task(self._close_idle())
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def _close_idle(self) -> None:
        limit = self.config.channel_max_idle_time_s
        interval = max(1.0, min(10.0, limit / 4))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                if now - conn.last_activity > limit:
                    log.info("closing idle connection from %s:%d", *conn.peer)
                    conn.close(f"idle for more than {limit} s")

    async def close(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            await asyncio.gather(self._idle_task, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close("server shutting down")
        await self.dispatcher.cancel_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
