"""Serving the dashboard on the process's event loop (uvicorn's HTTP/1.1 server, h11).

``apogee dashboard`` runs it alone, ``apogee dev`` beside its NameServer and broker, both
through ``cli/serve.py`` (one ready line, signals, clean stop).  uvicorn is driven step by step
(``startup``, its tick loop, ``shutdown``) instead of ``Server.serve()``, which would take over
the process's signal handlers; the socket is bound here first so that a busy port is one clear
error and port 0 gives a free port to report.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import uvicorn

from apogee.dashboard.app import create_app
from apogee.dashboard.settings import DashboardSettings

log = logging.getLogger("apogee.dashboard")


class DashboardServer:
    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.host, self.port = settings.host_port
        self._server: uvicorn.Server | None = None
        self._ticks: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> tuple[str, int]:
        """Bind, open the admin connections and serve; returns the bound (host, port).
        A port that cannot be bound raises OSError naming it."""
        if self.settings.exposed_without_login():
            log.warning(
                "the dashboard listens on %s without a password: anyone who can reach this port can create "
                "and delete topics and reset offsets (set --password or APOGEE_DASHBOARD_PASSWORD, or listen "
                "on 127.0.0.1)", self.settings.listen,
            )
        try:
            self._socket = socket.create_server((self.host, self.port), family=_family(self.host), reuse_port=False)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise OSError(exc.errno, f"dashboard on {self.host}:{self.port}: {reason}") from None
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            create_app(self.settings), lifespan="on", log_config=None, access_log=False, http="h11", ws="none",
            loop="none", log_level="warning", server_header=False, timeout_graceful_shutdown=5,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[self._socket])
        self._server = server
        self._ticks = asyncio.get_running_loop().create_task(server.main_loop())
        return self.host, self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.should_exit = True
            if self._ticks is not None:
                await self._ticks
            await server.shutdown(sockets=[self._socket] if self._socket is not None else None)
        elif self._socket is not None:
            self._socket.close()
        self._socket = None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
