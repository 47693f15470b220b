"""The store's I/O threads: every blocking disk call goes through one of them.

The broker's event loop must never wait on fsync, file creation or deletion, or a cold read
(architecture principle 4).  A store has two, each serialising its own calls (they release
the GIL while they block): the CommitLog's fdatasyncs run on a thread of their own
(``MessageStore.flush_io``), so a SYNC_FLUSH put waits for one fdatasync and never behind the
rest; everything else -- ConsumeQueue and index flushes, checkpoints, file creation, page
warming, deletion, cold reads -- runs on the other (``MessageStore.io``), so nothing else in
the store needs a lock against it.  The two touch different files, or (CommitLog files
created or deleted on ``io``) files the other is not flushing: only fully flushed CommitLog
files are deleted, and a file is flushed only once the loop has appended it.  Code that runs
here says so in its docstring ("Blocking").  Results come back to the loop as asyncio futures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

log = logging.getLogger("apogee.store.io_thread")

P = ParamSpec("P")
T = TypeVar("T")


class IOThread:
    def __init__(self, name: str = "apogee-store-io") -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name
        )
        self._closed = False

    @property
    def executor(self) -> concurrent.futures.Executor:
        return self._executor

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
        """Queue ``fn`` on the I/O thread; a concurrent future of its result."""
        return self._executor.submit(fn, *args, **kwargs)

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on the I/O thread and await its result from the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self, wait: bool = True) -> None:
        if not self._closed:
            self._closed = True
            self._executor.shutdown(wait=wait, cancel_futures=False)
