"""Held pull requests (RocketMQ's PullRequestHoldService), woken the moment a queue grows.

A consumer pulling an empty queue with the SUSPEND flag is not answered at once: its
request waits here, keyed by (topic, queue id), until the dispatcher reports a new message
in that queue (the store's arrival listener) or the client's suspend timeout passes.  Either
way the pull is executed again and answered, so a message reaches a waiting consumer within
one event-loop turn of being dispatched instead of after a poll interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("apogee.broker.long_polling")


@dataclass
class _Waiter:
    offset: int
    future: asyncio.Future[bool]
    tag_matches: Callable[[int], bool] | None


class PullRequestHoldService:
    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], list[_Waiter]] = {}

    @property
    def held(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    async def wait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        tag_matches: Callable[[int], bool] | None = None,
    ) -> bool:
        """Wait until a message at ``offset`` or later may exist; False on timeout."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(offset, loop.create_future(), tag_matches)
        key = (topic, queue_id)
        self._waiting.setdefault(key, []).append(waiter)
        timer = loop.call_later(timeout_s, _finish, waiter.future, False)
        try:
            return await waiter.future
        finally:
            timer.cancel()
            waiters = self._waiting.get(key)
            if waiters is not None:
                try:
                    waiters.remove(waiter)
                except ValueError:
                    pass
                if not waiters:
                    del self._waiting[key]

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """A message was dispatched to (topic, queue_id); ``max_offset`` is the new end."""
        waiters = self._waiting.get((topic, queue_id))
        if not waiters:
            return
        for waiter in list(waiters):
            if max_offset > waiter.offset and (
                tags_code is None or waiter.tag_matches is None or waiter.tag_matches(tags_code)
            ):
                _finish(waiter.future, True)

    def wake_all(self) -> None:
        """Answer every held request now (shutdown)."""
        for waiters in self._waiting.values():
            for waiter in waiters:
                _finish(waiter.future, False)


def _finish(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
