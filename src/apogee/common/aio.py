"""Small asyncio helpers shared by broker and client.

Why not ``asyncio.wait_for``: on Python 3.11 it can swallow a cancellation that arrives just
as the awaited thing completes (CPython gh-86296, fixed in 3.12).  A background loop told to
stop then keeps looping, and the shutdown that awaits it waits forever; ``wait_for`` on a lock
can also leave the lock acquired after timing out.  ``asyncio.timeout`` counts cancellations
(``Task.uncancel``) and has neither problem, so every timed wait goes through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` seconds; True if it was set."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable``, raising ``TimeoutError`` after ``timeout_s`` seconds."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
