"""One asyncio client per Python process, shared by every task the process runs.

Spark runs the connector's code in many short calls (``latestOffset``, ``partitions``, one
``read`` or ``write`` per task) inside long-lived, reused Python worker processes.  Opening a
connection per call would dominate small micro-batches, so each process keeps one background
event loop thread with one ``RemotingClient`` + ``ClientAPI`` (connections by address, opened
lazily, kept while the worker lives) and one route cache per NameServer list.  Workers are
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
from apogee.remoting.signing import SessionCredentials, Signer
from apogee.spark.broker import Cluster

T = TypeVar("T")

REQUEST_TIMEOUT_MS = 5000


class Runtime:
    """The loop thread and client of this process."""

    def __init__(self) -> None:
        factory = loop_factory()
        self.loop: asyncio.AbstractEventLoop = factory() if factory is not None else asyncio.new_event_loop()
        self.pid = os.getpid()
        self.remoting = RemotingClient(RemotingConfig())
        self.api = ClientAPI(self.remoting, REQUEST_TIMEOUT_MS)
        # ACL: one signing client per set of credentials (the options of a query name them).
        self._signed: dict[SessionCredentials, ClientAPI] = {}
        self._routes: dict[tuple[str, int, SessionCredentials | None], TopicRoutes] = {}
        self._thread = threading.Thread(target=self._run, name="apogee-spark-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def api_for(self, credentials: SessionCredentials | None) -> ClientAPI:
        """The client whose requests are signed with ``credentials`` (None: unsigned)."""
        if credentials is None:
            return self.api
        api = self._signed.get(credentials)
        if api is None:
            remoting = RemotingClient(RemotingConfig(), signer=Signer(credentials))
            api = self._signed[credentials] = ClientAPI(remoting, REQUEST_TIMEOUT_MS)
        return api

    def routes(
        self, namesrv: str, timeout_ms: int = REQUEST_TIMEOUT_MS, credentials: SessionCredentials | None = None
    ) -> TopicRoutes:
        """The route cache of ``namesrv`` (a ``;`` list) for every sink task of this process:
        the client's ``TopicRoutes``, fetched from the first NameServer that answers."""
        key = (namesrv, timeout_ms, credentials)
        table = self._routes.get(key)
        if table is None:
            api = self.api_for(credentials)
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
        with contextlib.suppress(Exception):  # closing is best effort
            for remoting in (self.remoting, *(api.remoting for api in self._signed.values())):
                self.submit(remoting.close()).result(3)
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
