"""Waiting for events, never for time: the one way tests wait.

A test that sleeps a fixed time is slow on a quiet machine and flaky on a loaded one.  These
helpers poll a condition until it holds (with a deadline that only bounds a failure), or, for
the rare check that something does *not* happen, watch a condition over a window and fail at
the first moment it breaks.

- ``wait_until`` / ``block_until``: poll until ``predicate()`` is truthy; return its value.
  ``wait_until`` is for coroutines and accepts a predicate that returns an awaitable.
- ``holds_for`` / ``block_holds_for``: the predicate must stay truthy for the whole window.
  Use it only where absence is the assertion (no duplicate, no second check-back); prefer a
  sentinel event that proves the moment has passed.
- ``next_millisecond``: a wall-clock millisecond strictly after ``ms`` (for tests that mark
  times between sends: store timestamps have millisecond resolution).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

INTERVAL_S = 0.02


async def _value(predicate: Callable[[], T | Awaitable[T]]) -> T:
    value = predicate()
    if inspect.isawaitable(value):
        return await value
    return value


def _timed_out(what: str, timeout_s: float, last: object) -> AssertionError:
    return AssertionError(f"timed out after {timeout_s} s waiting for {what} (last value: {last!r})")


@overload
async def wait_until(
    predicate: Callable[[], Awaitable[T]], timeout_s: float, what: str = ..., *, interval_s: float = ...
) -> T: ...


@overload
async def wait_until(
    predicate: Callable[[], T], timeout_s: float, what: str = ..., *, interval_s: float = ...
) -> T: ...


async def wait_until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout_s: float,
    what: str = "condition",
    *,
    interval_s: float = INTERVAL_S,
) -> T:
    """Poll ``predicate`` (plain or async) until it returns a truthy value, and return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await _value(predicate)
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        await asyncio.sleep(interval_s)


def block_until(
    predicate: Callable[[], T], timeout_s: float, what: str = "condition", *, interval_s: float = INTERVAL_S
) -> T:
    """``wait_until`` for code outside an event loop (Spark tests, subprocess drivers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        time.sleep(interval_s)


async def holds_for(
    predicate: Callable[[], object | Awaitable[object]],
    window_s: float,
    what: str = "condition",
    *,
    interval_s: float = 0.1,
) -> None:
    """Fail as soon as ``predicate`` turns falsy during ``window_s`` (an absence check)."""
    deadline = time.monotonic() + window_s
    while True:
        value = await _value(predicate)
        if not value:
            raise AssertionError(f"{what} stopped holding (value: {value!r})")
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(interval_s)


def block_holds_for(
    predicate: Callable[[], object], window_s: float, what: str = "condition", *, interval_s: float = 0.1
) -> None:
    """``holds_for`` for code outside an event loop."""
    deadline = time.monotonic() + window_s
    while True:
        value = predicate()
        if not value:
            raise AssertionError(f"{what} stopped holding (value: {value!r})")
        if time.monotonic() > deadline:
            return
        time.sleep(interval_s)


def now_ms() -> int:
    return int(time.time() * 1000)


def next_millisecond(ms: int) -> int:
    """Spin until the wall clock shows a millisecond after ``ms``; return it.  Store
    timestamps have millisecond resolution, so a mark taken this way separates the messages
    sent before it from those sent after."""
    while (now := now_ms()) <= ms:
        time.sleep(0.0005)
    return now
