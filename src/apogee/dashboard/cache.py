"""A small TTL cache for reads that cost many requests (the topic list, the cluster view,
per-broker figures), so that a page load, and the live parts of pages polling, do not
repeat them.  Concurrent loads of one key share one request (a page and its JSON endpoint
asking at once cause one GET_ALL_TOPIC_LIST, not two).  Writes the dashboard makes
``invalidate`` what they change, so a topic created in the form is listed at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

MAX_ENTRIES = 1024


class TTLCache:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._values: dict[str, tuple[float, Any]] = {}
        self._loading: dict[str, asyncio.Future[Any]] = {}

    async def get(self, key: str, load: Callable[[], Awaitable[T]], ttl_s: float | None = None) -> T:
        """The value cached under ``key`` while it is younger than its TTL, else ``load()``'s
        (a failed load is not cached: the next request tries again)."""
        now = self._clock()
        hit = self._values.get(key)
        if hit is not None and hit[0] > now:
            return cast(T, hit[1])
        pending = self._loading.get(key)
        if pending is not None:
            return cast(T, await asyncio.shield(pending))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            value = await load()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        else:
            future.set_result(value)
            if len(self._values) >= MAX_ENTRIES:
                self._evict(now)
            self._values[key] = (self._clock() + (self.ttl_s if ttl_s is None else ttl_s), value)
            return value
        finally:
            del self._loading[key]

    def invalidate(self, *prefixes: str) -> None:
        """Forget every key that starts with one of ``prefixes`` (none: everything)."""
        if not prefixes:
            self._values.clear()
            return
        for key in [k for k in self._values if k.startswith(prefixes)]:
            del self._values[key]

    def _evict(self, now: float) -> None:
        for key in [k for k, (expires, _) in self._values.items() if expires <= now]:
            del self._values[key]
        while len(self._values) >= MAX_ENTRIES:
            del self._values[next(iter(self._values))]
