"""The asyncio RemotingClient: one connection per address, three invocation styles.

``invoke`` (await the response, with a timeout), ``invoke_async`` (a callback receives the
response or the error) and ``invoke_oneway`` (fire and forget), as RocketMQ's remoting client offers the
RocketMQ client.  Connections open lazily, are shared by all requests to the same address,
and are reopened after they close.  Brokers may call back over the same connection; those
requests go to the client's own ``RequestDispatcher``.  With ``tls`` every connection is
opened with TLS (``remoting/tls.py``); the owner may replace ``tls`` (a reload), which new
connections take.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

from apogee.errors import ConnectionClosedError
from apogee.remoting.codec import request_command
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection, ResponseCallback
from apogee.remoting.server import RequestDispatcher
from apogee.remoting.signed import connection_factory
from apogee.remoting.signing import Signer
from apogee.remoting.tls import ClientTls

log = logging.getLogger("apogee.remoting.client")


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port); IPv6 may be bracketed (``[::1]:9876``)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(
        self,
        config: RemotingConfig | None = None,
        dispatcher: RequestDispatcher | None = None,
        *,
        on_connection_closed: Callable[[str, Connection], None] | None = None,
        tls: ClientTls | None = None,
        signer: Signer | None = None,
    ) -> None:
        """``signer``: sign every request (RocketMQ ACL; ``remoting/signed.py``)."""
        self.config = config or RemotingConfig()
        self.tls = tls
        self.signer = signer
        self._connection_class = connection_factory(signer)
        self.dispatcher = dispatcher or RequestDispatcher()
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self._on_connection_closed = on_connection_closed
        self._idle_task: asyncio.Task[None] | None = None
        self._closed = False

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, opening it if needed (concurrent callers share it)."""
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn
        if self._closed:
            raise ConnectionClosedError("client is closed")
        waiting = self._connecting.get(addr)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._connecting[addr] = future
        try:
            conn = await self._open(addr)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        else:
            future.set_result(conn)
            return conn
        finally:
            del self._connecting[addr]

    def connection_if_open(self, addr: str) -> Connection | None:
        """The open connection to ``addr`` if there is one: no connect, no await (hot paths)."""
        conn = self._connections.get(addr)
        return conn if conn is not None and conn.is_open else None

    async def _open(self, addr: str) -> Connection:
        host, port = split_address(addr)
        loop = asyncio.get_running_loop()
        timeout = self.config.connect_timeout_ms / 1000

        def factory() -> Connection:
            return self._connection_class(self.dispatcher, self.config, on_closed=lambda c: self._lost(addr, c))

        tls = self.tls
        try:
            if tls is None:
                _, conn = await asyncio.wait_for(loop.create_connection(factory, host, port), timeout)
            else:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(factory, host, port, ssl=tls.context,
                                           server_hostname=tls.server_name or host),
                    timeout,
                )
        except TimeoutError:
            raise ConnectionClosedError(
                f"connect to {addr} timed out after {self.config.connect_timeout_ms} ms"
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise ConnectionClosedError(
                f"cannot connect to {addr} with TLS: {exc.verify_message}; check the CA file "
                "(tls.client.trustCertPath), or name the certificate's host with the server name option "
                "(tls.client.serverName)"
            ) from None
        except OSError as exc:
            raise ConnectionClosedError(f"cannot connect to {addr}: {exc.strerror or exc}") from None
        self._connections[addr] = conn
        if self._idle_task is None:
            self._idle_task = asyncio.create_task(self._close_idle())
        return conn

    def _lost(self, addr: str, conn: Connection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]
        if self._on_connection_closed is not None:
            try:
                self._on_connection_closed(addr, conn)
            except Exception:
                log.exception("connection-closed hook failed")

    async def _close_idle(self) -> None:
        limit = self.config.channel_max_idle_time_s
        interval = max(1.0, min(10.0, limit / 4))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for addr, conn in list(self._connections.items()):
                if now - conn.idle_since(now) > limit and conn.pending_count == 0:
                    log.debug("closing idle connection to %s", addr)
                    conn.close(f"idle for more than {limit} s")

    def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> Awaitable[RemotingCommand]:
        """Send ``request`` to ``addr``; await the result for its response.

        Raises ``ConnectionClosedError`` when the address cannot be reached or the connection
        drops, ``RequestTimeoutError`` when no answer comes within ``timeout_ms`` (which
        includes the time to connect).  Over an open connection the request is written at
        once and the connection's own future is returned: no coroutine frame per request.
        """
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn.invoke(request, timeout_ms)
        return self._connect_and_invoke(addr, request, timeout_ms)

    def invoke_fields(
        self,
        addr: str,
        code: int,
        keys: tuple[str, ...],
        values: tuple[str | int | None, ...],
        body: bytes | None,
        timeout_ms: int,
    ) -> Awaitable[RemotingCommand]:
        """``invoke`` of ``codec.request_command(code, keys, values, body)``; over an open
        connection the frame is written straight from the fields (``Connection.invoke_fields``)."""
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn.invoke_fields(code, keys, values, body, timeout_ms)
        return self._connect_and_invoke(addr, request_command(code, keys, values, body), timeout_ms)

    async def _connect_and_invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        deadline = time.monotonic() + timeout_ms / 1000
        conn = await self.connection(addr)
        remaining = max(1, int((deadline - time.monotonic()) * 1000))
        return await conn.invoke(request, remaining)

    async def invoke_async(
        self, addr: str, request: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        """Send ``request``; ``callback(response, error)`` runs when it completes.

        Returns once the request is written; connection failures go to the callback.
        """
        try:
            conn = await self.connection(addr)
            conn.invoke_callback(request, timeout_ms, callback)
        except ConnectionClosedError as exc:
            callback(None, exc)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self.connection(addr)
        conn.invoke_oneway(request)

    def close_connection(self, addr: str) -> None:
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close("closed by client")

    async def close(self) -> None:
        self._closed = True
        if self._idle_task is not None:
            self._idle_task.cancel()
            await asyncio.gather(self._idle_task, return_exceptions=True)
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close("client closed")
        for conn in conns:
            try:
                await asyncio.wait_for(asyncio.shield(conn.closed_future), 1.0)
            except TimeoutError:
                conn.abort("client closed")
        await self.dispatcher.cancel_all()
