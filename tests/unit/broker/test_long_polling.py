from __future__ import annotations

import asyncio

from apogee.broker.long_polling import PullRequestHoldService


async def test_waiter_wakes_when_its_queue_grows() -> None:
    hold = PullRequestHoldService()
    waiting = asyncio.ensure_future(hold.wait("T", 0, offset=5, timeout_s=10))
    await asyncio.sleep(0)
    hold.notify("T", 1, max_offset=9)  # another queue
    hold.notify("T", 0, max_offset=5)  # not past the requested offset yet
    await asyncio.sleep(0)
    assert not waiting.done()
    hold.notify("T", 0, max_offset=6)
    assert await waiting is True
    assert hold.held == 0


async def test_waiter_times_out() -> None:
    hold = PullRequestHoldService()
    assert await hold.wait("T", 0, offset=0, timeout_s=0.01) is False
    assert hold.held == 0


async def test_tag_filter_keeps_unmatched_waiters_waiting() -> None:
    hold = PullRequestHoldService()
    waiting = asyncio.ensure_future(hold.wait("T", 0, 0, 10, tag_matches=lambda code: code == 42))
    await asyncio.sleep(0)
    hold.notify("T", 0, 1, tags_code=7)
    await asyncio.sleep(0)
    assert not waiting.done()
    hold.notify("T", 0, 2, tags_code=42)
    assert await waiting is True
