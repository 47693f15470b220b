"""One asyncio client per Python process, shared by every task the process runs.

Spark runs the connector's code in many short calls (``latestOffset``, ``partitions``, one
``read`` or ``write`` per task) inside long-lived, reused Python worker processes.  Opening a
connection per call would dominate small micro-batches, so each process keeps one background
event loop thread with one ``RemotingClient`` + ``ClientAPI`` (connections by address, opened
lazily, kept while the worker lives) and one route cache per NameServer list; queries with TLS
options get a client of their own per TLS setting (``api_for``).  Workers are
forked from a daemon: the state is keyed by PID, so a forked child never reuses its parent's
loop or sockets.

Synchronous code (Spark's calls) hands coroutines to the loop with ``run()``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from apogee.client.api import ClientAPI
from apogee.client.routes import TopicRoutes
from apogee.remoting.bodies.route import TopicRouteData
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import RemotingConfig
from apogee.remoting.loop import loop_factory
from apogee.remoting.server import RequestDispatcher
from apogee.remoting.signing import SessionCredentials, Signer
from apogee.remoting.tls import client_tls
from apogee.remoting.tls_config import TlsClientConfig
from apogee.spark.broker import Cluster

T = TypeVar("T")

REQUEST_TIMEOUT_MS = 5000


# What tells clients apart: the TLS settings' key (None: plain) and the ACL credentials.
Security = tuple["tuple[object, ...] | None", "SessionCredentials | None"]


def security(tls: TlsClientConfig | None, credentials: SessionCredentials | None) -> Security:
    return (tls.key() if tls is not None and tls.enable else None, credentials)


class Runtime:
    """The loop thread and client of this process."""

    def __init__(self) -> None:
        factory = loop_factory()
        self.loop: asyncio.AbstractEventLoop = factory() if factory is not None else asyncio.new_event_loop()
        self.pid = os.getpid()
        # One dispatcher for every client: brokers' requests (transaction checks) are answered
        # whichever connection they come over.
        self.dispatcher = RequestDispatcher()
        self.remoting = RemotingClient(RemotingConfig(), self.dispatcher)
        self.api = ClientAPI(self.remoting, REQUEST_TIMEOUT_MS)
        # One client per connection security a query names (TLS settings, ACL credentials).
        self._apis: dict[Security, ClientAPI] = {(None, None): self.api}
        self._routes: dict[tuple[str, int, Security], TopicRoutes] = {}
        self._thread = threading.Thread(target=self._run, name="apogee-spark-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def api_for(
        self, tls: TlsClientConfig | None = None, credentials: SessionCredentials | None = None
    ) -> ClientAPI:
        """The client of queries with these TLS settings and ACL credentials (neither: the
        plain, unsigned one)."""
        key = security(tls, credentials)
        api = self._apis.get(key)
        if api is None:
            remoting = RemotingClient(RemotingConfig(), self.dispatcher, tls=client_tls(tls),
                                      signer=Signer(credentials) if credentials is not None else None)
            api = self._apis[key] = ClientAPI(remoting, REQUEST_TIMEOUT_MS)
        return api

    def routes(
        self, namesrv: str, timeout_ms: int = REQUEST_TIMEOUT_MS, tls: TlsClientConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> TopicRoutes:
        """The route cache of ``namesrv`` (a ``;`` list) for every sink task of this process:
        the client's ``TopicRoutes``, fetched from the first NameServer that answers."""
        api = self.api_for(tls, credentials)
        key = (namesrv, timeout_ms, security(tls, credentials))
        table = self._routes.get(key)
        if table is None:
            cluster = Cluster(api, namesrv, timeout_ms)

            async def fetch(topic: str) -> TopicRouteData | None:
                return await cluster.on_namesrv(lambda addr: api.get_route(addr, topic, timeout_ms))

            table = self._routes[key] = TopicRoutes(fetch, namesrv)
        return table

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Runtime.run called on the loop thread")
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout_s} s") from None

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        for api in self._apis.values():
            with contextlib.suppress(Exception):  # closing is best effort
                self.submit(api.remoting.close()).result(3)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(3)


_lock = threading.Lock()
_current: Runtime | None = None


def runtime() -> Runtime:
    """This process's runtime, started on first use (and again in a forked child)."""
    global _current
    rt = _current
    if rt is not None and rt.pid == os.getpid():
        return rt
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = Runtime()
        return _current


def run(coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    return runtime().run(coro, timeout_s)


def shutdown() -> None:
    """Close this process's connections and stop its loop (tests, clean interpreter exit)."""
    global _current
    with _lock:
        rt, _current = _current, None
    if rt is not None and rt.pid == os.getpid():
        rt.close()


atexit.register(shutdown)
