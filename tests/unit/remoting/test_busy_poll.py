"""Busy polling (remoting/busy_poll.py): the loop keeps turning while a kick's window is open,
gives its core away on every turn, and goes back to sleep when the window closes."""

from __future__ import annotations

import asyncio

import pytest

from apogee.errors import ConfigError
from apogee.remoting import busy_poll
from apogee.remoting.busy_poll import BusyPoll, kick_for
from apogee.remoting.config import BUSY_POLL_ENV, RemotingConfig

STEP = 2.0**-17  # about 7.6 us, exact in binary: windows of whole steps end exactly


class FakeClock:
    """Time moves only when the poller gives its core away: one STEP per turn."""

    def __init__(self) -> None:
        self.now = 1.0
        self.yields = 0

    def __call__(self) -> float:
        return self.now

    def give_way(self) -> None:
        self.yields += 1
        self.now += STEP


async def turns_until_idle(poll: BusyPoll, limit: int = 10_000) -> int:
    """Loop turns (sleep(0)) until the poller stops; fails if it never does."""
    for n in range(limit):
        if not poll.active:
            return n
        await asyncio.sleep(0)
    raise AssertionError("the poller never stopped")


async def test_polls_for_the_window_then_stops_and_gives_way_on_every_turn() -> None:
    clock = FakeClock()
    poll = BusyPoll(asyncio.get_running_loop(), clock=clock, yield_cpu=clock.give_way)
    poll.kick(10 * STEP)
    assert poll.active
    await turns_until_idle(poll)
    assert poll.turns == 10  # a window of ten steps, a step a turn
    assert clock.yields == poll.turns
    assert not poll.active


async def test_a_kick_while_polling_extends_the_window_without_a_second_poller() -> None:
    clock = FakeClock()
    loop = asyncio.get_running_loop()
    poll = BusyPoll(loop, clock=clock, yield_cpu=clock.give_way)
    poll.kick(10 * STEP)
    for _ in range(5):
        await asyncio.sleep(0)
    assert poll.turns == 5
    poll.kick(10 * STEP)  # five steps in: the window now ends at fifteen
    poll.kick(STEP)  # a shorter kick never shortens it
    await turns_until_idle(poll)
    assert poll.turns == 15
    # One callback at a time: after the window, nothing of the poller is left on the loop.
    assert clock.yields == 15


async def test_kick_again_after_idle_starts_a_new_window() -> None:
    clock = FakeClock()
    poll = BusyPoll(asyncio.get_running_loop(), clock=clock, yield_cpu=clock.give_way)
    poll.kick(3 * STEP)
    await turns_until_idle(poll)
    clock.now += 1.0  # a quiet second
    poll.kick(3 * STEP)
    await turns_until_idle(poll)
    assert poll.turns == 6


async def test_kick_for_is_none_when_off_or_on_one_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kick_for(0) is None
    assert kick_for(-5) is None
    monkeypatch.setattr(busy_poll, "_usable_cpus", lambda: 1)
    assert kick_for(100) is None
    monkeypatch.setattr(busy_poll, "_usable_cpus", lambda: 2)
    kick = kick_for(100)
    assert kick is not None
    kick()
    loop_poller = busy_poll.poller(asyncio.get_running_loop())
    assert loop_poller.active  # the loop's one poller, shared by every connection on it
    assert busy_poll.poller(asyncio.get_running_loop()) is loop_poller


def test_the_default_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUSY_POLL_ENV, raising=False)
    assert RemotingConfig().busy_poll_us == 0
    monkeypatch.setenv(BUSY_POLL_ENV, "150")
    assert RemotingConfig().busy_poll_us == 150
    assert RemotingConfig(busy_poll_us=20).busy_poll_us == 20
    monkeypatch.setenv(BUSY_POLL_ENV, "fast")
    with pytest.raises(ConfigError, match="APOGEE_BUSY_POLL_US must be a whole number of microseconds"):
        RemotingConfig()
