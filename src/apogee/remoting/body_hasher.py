"""Hashing large request bodies off the event loop, for ACL signing and checking.

An ACL-signed request's HMAC covers its whole body (``remoting/signing.py``): for an
auto-batch of 512 x 1 KiB that is ~0.3 ms of SHA-1 on each side, about a fifth of what the
client's loop spends on the batch's messages.  hashlib lets other threads run while it
hashes a buffer of 2 KiB or more, so a body fed to the HMAC on a thread of its own costs the
loop nothing but the hand-over, and a second core does the hashing while the loop goes on
with the next messages.  Small bodies are hashed in place: for them the hand-over (a queue,
a wake-up of the loop) would cost more than the hash.

One daemon thread per process, started on first use, takes the jobs in order and hands each
result back to the loop that asked for it (``call_soon_threadsafe``), in the same order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from apogee.remoting.command import Body
from apogee.remoting.signing import feed

# A body this large is worth hashing on the thread (a W1 send's 1 KiB is not; an auto-batch,
# up to 1 MiB, is) ...
LARGE_BODY_BYTES = 64 * 1024


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# ... when another core can run it: with one, the thread would only run instead of the loop,
# and the hand-over (~30-50 us of CPU a batch, measured) would be added for nothing.
BACKGROUND_MIN_BYTES = LARGE_BODY_BYTES if _cores() > 1 else 1 << 62

HashDone = Callable[[BaseException | None], None]


class BodyHasher:
    """Feeds bodies into HMACs (``signing.feed``) on one daemon thread, in submission order."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, Body, asyncio.AbstractEventLoop, HashDone]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def forget_thread(self) -> None:
        """In a forked child: the parent's thread is not there; the next job starts one."""
        self._jobs = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, mac: Any, body: Body, loop: asyncio.AbstractEventLoop, done: HashDone) -> None:
        """Feed ``body`` into ``mac`` on the thread, then run ``done(error)`` on ``loop``
        (error None when it worked).  ``done`` calls run in submission order."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(target=self._run, name="apogee-body-hasher", daemon=True)
                    thread.start()
                    self._thread = thread
        self._jobs.put((mac, body, loop, done))

    def _run(self) -> None:
        jobs = self._jobs  # this thread's queue (a forked child makes a new one)
        while True:
            mac, body, loop, done = jobs.get()
            error: BaseException | None = None
            try:
                feed(mac, body)
            except Exception as exc:  # handed to the request it belongs to
                error = exc
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits for the result
                loop.call_soon_threadsafe(done, error)


# The process's one hasher (clients and the broker share it).  A child forked after the thread
# started (multiprocessing, Spark's worker daemon) starts its own when it needs one.
HASHER = BodyHasher()
os.register_at_fork(after_in_child=HASHER.forget_thread)
