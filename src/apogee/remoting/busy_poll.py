"""Busy polling: after network activity, the event loop keeps polling for a short window
instead of going to sleep.

Why.  A request answered one at a time pays for two sleeps and two wake-ups per round trip:
the server's loop sleeps in ``epoll_wait`` until the request arrives, the client's until the
answer does.  Waking a sleeping thread on another core takes tens of microseconds in a
virtual machine (an inter-processor interrupt, then the scheduler), often more than the
work of the request itself.  A loop that is still polling when the bytes arrive reads them at
once.  Linux offers the same trade for sockets on a network card (``net.core.busy_poll``);
runtimes such as Go's scheduler and the JDK's synchronizers spin briefly before they park for
the same reason.

The cost is CPU: each kick keeps the loop busy for up to ``window`` after it.  A process
that is idle does not poll (nothing kicks it), and one that is saturated never sleeps anyway;
in between it may use up to one core more than it needs.  So it is off unless asked for
(``busyPollUs`` / ``busy_poll_us``, docs/performance.md "Busy polling").  While polling, the
loop offers its core to any other runnable thread on every turn (``sched_yield``), so a
thread with real work there (the store's I/O thread, a peer process) is not starved.  On a
machine where the process may use only one CPU there is nobody to hear from while it
spins, and the window is ignored.

One poller per event loop, shared by every connection on it: a kick from any of them
extends the same window.  Connections kick when data arrives (the next request or answer
often follows soon) and when a request goes out (its answer is expected soon).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
import weakref
from collections.abc import Callable

Kick = Callable[[], None]

_pollers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BusyPoll] = weakref.WeakKeyDictionary()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _no_yield() -> None:
    pass


_GIVE_WAY: Callable[[], None] = getattr(os, "sched_yield", _no_yield)


class BusyPoll:
    """Keeps ``loop`` polling until the latest kick's window has passed.

    While the window is open a callback reschedules itself on every loop turn: a loop with
    a ready callback polls its sockets without blocking, so arriving bytes are read on the
    next turn rather than after a wake-up.  ``clock`` and ``yield_cpu`` are the monotonic
    clock and the give-way call (tests pass their own).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        clock: Callable[[], float] = time.monotonic,
        yield_cpu: Callable[[], None] = _GIVE_WAY,
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._yield = yield_cpu
        self._until = 0.0
        self.active = False
        self.turns = 0  # loop turns spent polling, for the curious and for tests

    def kick(self, window_s: float) -> None:
        """Keep polling for at least ``window_s`` from now."""
        until = self._clock() + window_s
        if until > self._until:
            self._until = until
        if not self.active:
            self.active = True
            self._loop.call_soon(self._turn)

    def _turn(self) -> None:
        if self._clock() < self._until:
            self.turns += 1
            self._yield()
            self._loop.call_soon(self._turn)
        else:
            self.active = False


def poller(loop: asyncio.AbstractEventLoop) -> BusyPoll:
    """The one poller of ``loop``."""
    found = _pollers.get(loop)
    if found is None:
        found = _pollers[loop] = BusyPoll(loop)
    return found


def kick_for(window_us: int, loop: asyncio.AbstractEventLoop | None = None) -> Kick | None:
    """The kick of the running loop's poller for a window of ``window_us`` microseconds, or
    None when busy polling is off (0) or pointless (one usable CPU): callers test for None,
    so a connection without busy polling pays one comparison per read."""
    if window_us <= 0 or _usable_cpus() < 2:
        return None
    return functools.partial(poller(loop or asyncio.get_running_loop()).kick, window_us / 1e6)
