from __future__ import annotations

import asyncio

import pytest

from apogee.broker.long_polling import PullRequestHoldService
from apogee.errors import SystemBusyError


async def test_waiter_wakes_when_its_queue_grows() -> None:
    hold = PullRequestHoldService()
    waiting = asyncio.ensure_future(hold.hold("T", 0, offset=5, timeout_s=10))
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
    assert await hold.hold("T", 0, offset=0, timeout_s=0.01) is False
    assert hold.held == 0


async def test_tag_filter_keeps_unmatched_waiters_waiting() -> None:
    hold = PullRequestHoldService()
    waiting = asyncio.ensure_future(hold.hold("T", 0, 0, 10, tag_matches=lambda code: code == 42))
    await asyncio.sleep(0)
    hold.notify("T", 0, 1, tags_code=7)
    await asyncio.sleep(0)
    assert not waiting.done()
    hold.notify("T", 0, 2, tags_code=42)
    assert await waiting is True


async def test_a_connection_holds_at_most_its_share_of_pulls() -> None:
    hold = PullRequestHoldService(max_per_connection=2)
    first = hold.hold("T", 0, 0, 10, owner="a")
    hold.hold("T", 1, 0, 10, owner="a")
    with pytest.raises(SystemBusyError, match="maxHeldPullsPerConnection"):
        hold.hold("T", 2, 0, 10, owner="a")
    assert hold.refused == 1
    other = hold.hold("T", 2, 0, 10, owner="b")  # another connection is not refused
    hold.notify("T", 0, max_offset=1)
    assert await first is True
    again = hold.hold("T", 3, 0, 10, owner="a")  # an answered pull frees its slot
    hold.wake_all()
    assert await again is False and await other is False
    assert hold.held == 0
