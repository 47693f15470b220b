"""Held pull requests (RocketMQ's PullRequestHoldService), woken the moment a queue grows.

A consumer pulling an empty queue with the SUSPEND flag is not answered at once: its
request waits here, keyed by (topic, queue id), until the dispatcher reports a new message
in that queue (the store's arrival listener) or the client's suspend timeout passes.  Either
way the pull is executed again and answered, so a message reaches a waiting consumer within
one event-loop turn of being dispatched instead of after a poll interval.

Each held pull costs a task, a timer and its request, and wakes into an answer, so one
connection may hold at most ``maxHeldPullsPerConnection`` of them; one more is answered
SYSTEM_BUSY at once (clients pull that queue again after their back-off), counted in
``refused``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from apogee.errors import SystemBusyError
from apogee.remoting.codes import ResponseCode
from apogee.remoting.limits import RateLimitedLog

log = logging.getLogger("apogee.broker.long_polling")


@dataclass(slots=True)
class _Waiter:
    offset: int
    future: asyncio.Future[bool]
    tag_matches: Callable[[int], bool] | None
    key: tuple[str, int]
    owner: object
    timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    def __init__(self, max_per_connection: int = 256) -> None:
        self.max_per_connection = max_per_connection
        self._waiting: dict[tuple[str, int], list[_Waiter]] = {}
        self._held_by: dict[object, int] = {}
        self.refused = 0
        self._log_refused = RateLimitedLog(log)

    @property
    def held(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    def hold(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        tag_matches: Callable[[int], bool] | None = None,
        *,
        owner: object = None,
    ) -> asyncio.Future[bool]:
        """Hold a pull until a message at ``offset`` or later may exist: the future becomes
        True then, False on timeout (or at shutdown).

        A future and not a coroutine, so the pull processor answers from the future's done
        callback (``remoting.server.Deferred``): one callback after the dispatch that woke
        it, with no task to step through.  ``owner`` (the pull's connection) is counted
        against ``max_per_connection``: above it ``SystemBusyError`` is raised at once.
        """
        held = self._held_by.get(owner, 0)
        if held >= self.max_per_connection:
            self.refused += 1
            self._log_refused("refusing to hold a pull of %s-%d: %d pulls held for its connection already "
                              "(maxHeldPullsPerConnection)", topic, queue_id, held)
            raise SystemBusyError(
                ResponseCode.SYSTEM_BUSY,
                f"[PULL_HOLD]too many pulls held for this connection ({held}, maxHeldPullsPerConnection), "
                "pull again later",
            )
        loop = asyncio.get_running_loop()
        key = (topic, queue_id)
        waiter = _Waiter(offset, loop.create_future(), tag_matches, key, owner)
        self._waiting.setdefault(key, []).append(waiter)
        self._held_by[owner] = held + 1
        # Every way out goes through _answer, once: the timer, notify and wake_all.  A future
        # cancelled from outside keeps its slot until its timer answers (and releases) it.
        waiter.timer = loop.call_later(timeout_s, self._answer, waiter, False)
        return waiter.future

    def _answer(self, waiter: _Waiter, woken: bool) -> None:
        """Release the waiter's slot, then complete its future: whoever awaits it finds the
        counts already updated."""
        self._release(waiter)
        if not waiter.future.done():
            waiter.future.set_result(woken)

    def _release(self, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        owner = waiter.owner
        left = self._held_by[owner] - 1
        if left:
            self._held_by[owner] = left
        else:
            del self._held_by[owner]
        waiters = self._waiting.get(waiter.key)
        if waiters is not None:
            with contextlib.suppress(ValueError):
                waiters.remove(waiter)
            if not waiters:
                del self._waiting[waiter.key]

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """A message was dispatched to (topic, queue_id); ``max_offset`` is the new end."""
        waiters = self._waiting.get((topic, queue_id))
        if not waiters:
            return
        for waiter in list(waiters):
            if max_offset > waiter.offset and (
                tags_code is None or waiter.tag_matches is None or waiter.tag_matches(tags_code)
            ):
                self._answer(waiter, True)

    def wake_all(self) -> None:
        """Answer every held request now (shutdown)."""
        for waiters in list(self._waiting.values()):
            for waiter in list(waiters):
                self._answer(waiter, False)

