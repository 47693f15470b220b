"""TLS for remoting and HA ports: SSL contexts from files, reloaded on demand, and a listener
whose connections choose TLS or plain by their first byte.

Where TLS sits: between the socket and the ``Connection`` protocol, in the event loop's own
TLS transport (uvloop's, or asyncio's ``sslproto``).  Everything above the transport --
frames, the dispatcher, the C helpers, which only build and parse bytes -- is the same for a
TLS and a plain connection; no code path writes to a socket around the transport, so none
has to be turned off for TLS.  A port in ``disabled`` mode is served exactly as before
(``loop.create_server``), so plain traffic costs nothing more.

Permissive and enforcing ports are served by ``TlsListener``: it accepts on its own socket,
waits for the connection's first byte and looks at it with ``MSG_PEEK`` -- 0x16 is a TLS
handshake record, as RocketMQ's ``HandshakeHandler`` tells -- then hands the socket to
``loop.connect_accepted_socket``, with the current SSL context or without.  Peeking leaves
the ClientHello in the kernel for the TLS layer to read; the alternative, ``loop.start_tls``
on a connection already being read, would have consumed those bytes, and neither loop lets
them be given back.  A connection that sends nothing, stalls its handshake, fails it, or
speaks plain text to an enforcing port is closed with a log line; nothing else is affected.

Reload (SIGHUP): ``TlsContexts.reload`` builds new contexts from the files; connections
accepted afterwards use them, those already open keep the one they were made with.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import socket
import ssl
from collections.abc import Callable
from typing import NamedTuple

from apogee.errors import ConfigError
from apogee.remoting.limits import LimitCounters, RateLimitedLog
from apogee.remoting.tls_config import (
    TLS_HANDSHAKE_RECORD,
    ClientAuth,
    TlsClientConfig,
    TlsMode,
    TlsServerConfig,
    apply_tls_file,
)

log = logging.getLogger("apogee.remoting.tls")


class ClientTls(NamedTuple):
    """What a client connection needs for TLS: the context, and the name to check instead of
    the address's host (empty: the host)."""

    context: ssl.SSLContext
    server_name: str


def _load(what: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except FileNotFoundError as exc:
        raise ConfigError(f"{what}: no such file {exc.filename or ''}".rstrip()) from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"{what}: {exc}") from None


def server_context(cfg: TlsServerConfig) -> ssl.SSLContext:
    """The server's context: its certificate and key, and client-certificate verification
    when ``tls.server.need.client.auth`` asks for it.  TLS 1.2 at least."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(
        f"tls.server.certPath={cfg.cert_path}, tls.server.keyPath={cfg.key_path}",
        lambda: ctx.load_cert_chain(cfg.cert_path, cfg.key_path, cfg.key_password or None),
    )
    if cfg.need_client_auth is not ClientAuth.NONE:
        ctx.verify_mode = ssl.CERT_REQUIRED if cfg.need_client_auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
        _load(f"tls.server.trustCertPath={cfg.trust_cert_path}",
              lambda: ctx.load_verify_locations(cfg.trust_cert_path))
    return ctx


def client_tls(cfg: TlsClientConfig | None) -> ClientTls | None:
    """The client's TLS for ``cfg``, or None when TLS is off.  The server's certificate is
    verified against ``ca_file`` (the system's CAs when empty), with its host name, unless
    verification is switched off."""
    if cfg is None or not cfg.enable:
        return None
    cfg.validate()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cfg.verifies:
        if cfg.ca_file:
            _load(f"tls.client.trustCertPath={cfg.ca_file}", lambda: ctx.load_verify_locations(cfg.ca_file))
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        _load(
            f"tls.client.certPath={cfg.cert_file}, tls.client.keyPath={cfg.key_file}",
            lambda: ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None, cfg.key_password or None),
        )
    return ClientTls(ctx, cfg.server_name)


class TlsContexts:
    """A server process's TLS: the server context of its TLS ports and the client TLS of its
    own outgoing connections, built from the settings (and ``tls.config.file``) at start and
    again by ``reload``.  Readers take ``server_context`` / ``client`` at each new
    connection, so a reload reaches new connections only."""

    def __init__(self, server: TlsServerConfig, client: TlsClientConfig | None = None) -> None:
        self._base = (server, client)
        self.server_config = server
        self.client_config = client
        self.server_context: ssl.SSLContext | None = None
        self.client: ClientTls | None = None
        self._build()

    @property
    def mode(self) -> TlsMode:
        return self.server_config.mode

    @property
    def handshake_timeout_s(self) -> float:
        return self.server_config.handshake_timeout_ms / 1000

    def _build(self) -> None:
        server, client = copy.copy(self._base[0]), copy.copy(self._base[1])
        apply_tls_file(server, client)  # read again: a reload may point at new files
        server.validate()
        server_ctx = server_context(server) if server.needs_context else None
        wanted = client is not None and (client.enable or server.ha_enable)
        client_side = client_tls(dataclasses.replace(client, enable=True)) if wanted and client is not None else None
        self.server_config, self.client_config = server, client
        self.server_context, self.client = server_ctx, client_side

    def reload(self) -> bool:
        """Build the contexts again from the files; on failure keep the current ones and say
        why.  True when the new ones are in use."""
        try:
            self._build()
        except ConfigError as exc:
            log.error("TLS reload failed, the previous certificates stay in use: %s", exc)
            return False
        log.info("TLS certificates reloaded: new connections use them, open ones keep theirs (%s)",
                 self.server_config.cert_path or "no server certificate")
        return True

    @property
    def outbound(self) -> ClientTls | None:
        """The client TLS of the process's remoting requests (``tls.enable``)."""
        return self.client if self.client_config is not None and self.client_config.enable else None

    @property
    def ha(self) -> ClientTls | None:
        """The client TLS of a slave's HA link (``tls.ha.enable``)."""
        return self.client if self.server_config.ha_enable else None


def tls_contexts(server: TlsServerConfig, client: TlsClientConfig | None = None) -> TlsContexts | None:
    """The contexts of a server process with these settings; None when nothing in it speaks
    TLS (its ports are then served as they always were).  ConfigError when a file is missing
    or unreadable, with the key that names it."""
    if not server.needs_context and not (client is not None and client.enable):
        return None  # (tls.config.file cannot change either: apply_tls_file refuses those keys)
    return TlsContexts(server, client)


def _listen_socket(host: str, port: int, backlog: int) -> socket.socket:
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class TlsListener:
    """A listening socket for a permissive or enforcing port (see the module doc).

    ``factory`` makes the protocol of each accepted connection; ``room(pending)`` says
    whether one more connection may start its handshake while ``pending`` are in theirs
    (a handshake in progress counts as a connection); ``counters`` (a remoting server's)
    count what was refused.  It has what ``RemotingServer`` uses of an ``asyncio.Server``:
    ``sockets``, ``close`` and ``wait_closed``."""

    def __init__(
        self,
        factory: Callable[[], asyncio.BaseProtocol],
        mode: TlsMode,
        contexts: TlsContexts,
        *,
        name: str,
        room: Callable[[int], bool],
        counters: LimitCounters | None = None,
    ) -> None:
        if mode is TlsMode.DISABLED:
            raise ValueError("a disabled port is served by loop.create_server")
        self._factory = factory
        self._mode = mode
        self._contexts = contexts
        self._name = name
        self._room = room
        self._counters = counters or LimitCounters()
        self._logs: dict[str, RateLimitedLog] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self.sockets: list[socket.socket] = []

    async def start(self, host: str, port: int, backlog: int) -> None:
        sock = _listen_socket(host, port, backlog)
        self.sockets = [sock]
        self._name = f"{self._name} {sock.getsockname()[1]}"
        self._accepting = asyncio.create_task(self._accept_loop(sock), name=f"apogee-tls-accept-{self._name}")

    def _warn(self, kind: str, msg: str, *args: object) -> None:
        """One line per kind per 10 s (a flood of bad handshakes is told, not repeated)."""
        line = self._logs.get(kind)
        if line is None:
            line = self._logs[kind] = RateLimitedLog(log)
        line(msg, *args)

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors, mostly: asyncio's own server pauses too
                log.error("%s: cannot accept connections: %s", self._name, exc)
                await asyncio.sleep(1.0)
                continue
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            if not self._room(len(self._pending)):
                sock.close()
                self._counters.connections_refused += 1
                self._warn("room", "%s: refusing connection from %s: too many connections", self._name, where)
                continue
            task = asyncio.create_task(self._admit(sock, where))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _admit(self, sock: socket.socket, where: str) -> None:
        """First byte, then TLS or plain (or a refusal), all within the handshake timeout."""
        timeout = self._contexts.handshake_timeout_s
        try:
            sock.setblocking(False)
            refusal = await asyncio.wait_for(self._hand_over(sock, timeout), timeout)
        except asyncio.CancelledError:
            sock.close()
            raise
        except TimeoutError:
            refusal = ("slow", f"nothing or no complete TLS handshake within {timeout * 1000:.0f} ms "
                       "(tls.server.handshakeTimeoutMillis)")
        except OSError as exc:  # ssl.SSLError is one
            refusal = ("handshake", f"TLS handshake failed: {str(exc) or type(exc).__name__}")
        if refusal is not None:
            sock.close()
            kind, why = refusal
            if kind == "plain":
                self._counters.tls_refused += 1
            elif kind != "eof":
                self._counters.tls_handshake_failures += 1
            if kind != "eof":
                self._warn(kind, "%s: closing connection from %s: %s", self._name, where, why)

    async def _hand_over(self, sock: socket.socket, timeout: float) -> tuple[str, str] | None:
        """Give ``sock`` to the loop as a TLS or plain connection; or why it is refused."""
        loop = asyncio.get_running_loop()
        first = await _first_byte(loop, sock)
        if not first:
            return ("eof", "")  # closed before sending a byte: nothing to tell
        if first[0] == TLS_HANDSHAKE_RECORD:
            # The loop's own handshake deadline is a backstop: wait_for in _admit ends it first.
            await loop.connect_accepted_socket(
                self._factory, sock, ssl=self._contexts.server_context, ssl_handshake_timeout=timeout + 1
            )
        elif self._mode is TlsMode.ENFORCING:
            return ("plain", "plain-text connection on a port that takes TLS only (tls.server.mode=enforcing)")
        else:
            await loop.connect_accepted_socket(self._factory, sock)
        return None

    def flush_logs(self) -> None:
        for line in self._logs.values():
            line.flush()

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._pending:
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._pending) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The connection's first byte, left in the kernel (``MSG_PEEK``); b"" at end of stream."""
    while True:
        try:
            return sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        readable: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_reader(fd, _set_once, readable)
        try:
            await readable
        finally:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(fd)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
