"""What every request of one dashboard shares: its settings, one ``AdminClient`` (one
connection set to the NameServers and brokers, used by every page and job at once), the TTL
cache of expensive reads and the job registry.

Handlers reach it with ``context_of(request)``; the app opens it at start and closes it at
stop (``app.py``'s lifespan).  ``settings.admin_options`` are passed through to the
``AdminClient``, so credentials and TLS of the admin layer need no change here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request

from apogee.admin.client import AdminClient
from apogee.dashboard.cache import TTLCache
from apogee.dashboard.jobs import JobRegistry
from apogee.dashboard.sampler import Sampler, SamplerSettings
from apogee.dashboard.settings import DashboardSettings

T = TypeVar("T")


class DashboardContext:
    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.cache = TTLCache(settings.cache_ttl_seconds)
        self.jobs = JobRegistry()
        self._admin: AdminClient | None = None
        self.sampler = Sampler(SamplerSettings(interval_s=settings.sample_interval_seconds))

    async def start(self) -> None:
        self._admin = AdminClient(self.settings.namesrv_addr, **self.settings.admin_options)
        await self._admin.__aenter__()
        self.sampler.start(self._admin)

    async def close(self) -> None:
        await self.sampler.stop()
        await self.jobs.close()
        if self._admin is not None:
            admin, self._admin = self._admin, None
            await admin.__aexit__(None, None, None)

    @property
    def admin(self) -> AdminClient:
        assert self._admin is not None, "the dashboard context is not started"
        return self._admin

    async def cached(self, key: str, load: Callable[[], Awaitable[T]], ttl_s: float | None = None) -> T:
        """``load()``'s value, reused for ``ttl_s`` (default: ``cacheTtlSeconds``)."""
        return await self.cache.get(key, load, ttl_s)

    def invalidate(self, *prefixes: str) -> None:
        """After a write: forget the cached reads it changed (keys starting with ``prefixes``)."""
        self.cache.invalidate(*prefixes)


def context_of(request: Request) -> DashboardContext:
    ctx: DashboardContext = request.app.state.ctx
    return ctx
