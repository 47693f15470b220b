from __future__ import annotations

import asyncio

import pytest

from apogee.dashboard.cache import TTLCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_value_is_reused_until_its_ttl_passes() -> None:
    clock, loads = Clock(), []

    async def load() -> int:
        loads.append(clock.now)
        return len(loads)

    cache = TTLCache(5.0, clock)
    assert await cache.get("k", load) == 1
    clock.now += 4.9
    assert await cache.get("k", load) == 1
    clock.now += 0.2
    assert await cache.get("k", load) == 2
    assert await cache.get("short", load, ttl_s=0) == 3
    assert await cache.get("short", load, ttl_s=0) == 4


async def test_concurrent_loads_of_a_key_share_one_request() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    calls = 0

    async def load() -> str:
        nonlocal calls
        calls += 1
        started.set()
        await release.wait()
        return "topics"

    cache = TTLCache(5.0)
    first = asyncio.create_task(cache.get("topics", load))
    await started.wait()
    second = asyncio.create_task(cache.get("topics", load))
    await asyncio.sleep(0)  # the second is waiting on the first's load
    release.set()
    assert await asyncio.gather(first, second) == ["topics", "topics"]
    assert calls == 1


async def test_a_failed_load_is_not_kept_and_writes_forget_what_they_change() -> None:
    attempts = 0

    async def flaky() -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("down")
        return attempts

    cache = TTLCache(60.0)
    with pytest.raises(ConnectionError):
        await cache.get("topics:rows", flaky)
    assert await cache.get("topics:rows", flaky) == 2

    async def one() -> int:
        return 1

    await cache.get("cluster:view", one)
    cache.invalidate("topics:")
    assert await cache.get("topics:rows", flaky) == 3  # forgotten
    assert await cache.get("cluster:view", flaky) == 1  # kept
    cache.invalidate()
    assert await cache.get("cluster:view", flaky) == 4
