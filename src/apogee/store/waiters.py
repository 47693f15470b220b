"""Puts waiting for the CommitLog to reach an offset somewhere: the one design behind both
group waits of a put (RocketMQ's ``GroupCommitService`` and ``GroupTransferService``).

* SYNC_FLUSH (``flush.GroupCommit``): "durable up to my end", resolved by each fsync;
* SYNC_MASTER (``broker.ha.master.HAMaster``): "a slave holds up to my end", resolved by each
  slave report.

Appends happen in order on one loop, so waiters are added with rising end offsets and rising
deadlines: one FIFO table resolved from its head when the offset advances, and one timer for
the oldest deadline, however many puts wait.  N concurrent puts cost one fsync or one slave
round trip, not N.  Everything runs on the owner's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from apogee.store.results import PutStatus

log = logging.getLogger("apogee.store")

_PUT_OK = PutStatus.PUT_OK


class OffsetWaiters:
    """Futures of "reached ``offset``" answered PUT_OK when ``resolve`` reaches them, or
    ``timeout_status`` after ``timeout_ms`` (``what`` names the wait in the warning)."""

    __slots__ = ("_loop", "_timeout_s", "_timeout_status", "_what", "_pending", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_ms: int, timeout_status: PutStatus, what: str) -> None:
        self._loop = loop
        self._timeout_s = timeout_ms / 1000
        self._timeout_status = timeout_status
        self._what = what
        self._pending: collections.deque[tuple[int, asyncio.Future[PutStatus], float]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, offset: int) -> asyncio.Future[PutStatus]:
        """A future answered once ``resolve`` reaches ``offset`` or the timeout passes."""
        loop = self._loop
        fut: asyncio.Future[PutStatus] = loop.create_future()
        self._pending.append((offset, fut, loop.time() + self._timeout_s))
        if self._timer is None:
            self._arm_timer()
        return fut

    def resolve(self, reached: int) -> None:
        """PUT_OK to every waiter whose offset is at or below ``reached``."""
        pending = self._pending
        while pending and pending[0][0] <= reached:
            fut = pending.popleft()[1]
            if not fut.done():
                fut.set_result(_PUT_OK)

    def fail_all(self, status: PutStatus) -> None:
        """``status`` to every waiter (the wait can no longer succeed)."""
        pending = self._pending
        while pending:
            fut = pending.popleft()[1]
            if not fut.done():
                fut.set_result(status)

    def _arm_timer(self) -> None:
        if self._pending:
            delay = max(0.0, self._pending[0][2] - self._loop.time())
            self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self._loop.time()
        pending = self._pending
        expired = 0
        while pending and pending[0][2] <= now:
            fut = pending.popleft()[1]
            if not fut.done():
                fut.set_result(self._timeout_status)
                expired += 1
        if expired:
            log.warning("%d put(s) not %s within %.0f ms: %s", expired, self._what, self._timeout_s * 1000,
                        self._timeout_status.name)
        self._arm_timer()

    def close(self) -> None:
        """Stop the timer; every waiter gets SERVICE_NOT_AVAILABLE (the store is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.fail_all(PutStatus.SERVICE_NOT_AVAILABLE)
