"""The broker's JSON tables on disk: what is unsaved, and the writer that saves it.

Each table (topics, subscription groups, consumer offsets, delay progress) owns a
``TableFile``: a change bumps its version, a write records the version it holds.  A table is
therefore either saved or visibly dirty, and a write that fails leaves it dirty, so the next
attempt writes everything again instead of skipping what the failed one held.

``TableWriter`` saves tables from the event loop without blocking it: the table's JSON is
built on the loop (its only mutator, so the snapshot is consistent) and written by a worker
thread (``write_atomic``: temp file, fsync, rename).  Changes that arrive within ``delay_s``
of each other share one write, so 2,000 topics created in a burst cost a handful of writes,
not 2,000; a change somebody waits for (``saved``) is written without that pause.  A
failure is logged as an error with the file's name and retried with a growing pause until it
succeeds.  ``flush`` saves at once and raises on failure, for requests whose answer promises
durability; ``close`` saves what is left when the broker stops.

Without a writer (a table used on its own, as in unit tests) a table whose ``write_at_once``
is set writes synchronously on every change, and the others wait for ``persist``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from apogee.common.aio import wait_event, within
from apogee.common.atomic_file import write_atomic

log = logging.getLogger("apogee.broker.persistence")


class TableFile:
    """One table's JSON file and how far the file is behind the table."""

    def __init__(self, path: Path | None, encode: Callable[[], bytes], *, write_at_once: bool = False) -> None:
        self.path = path
        self._encode = encode
        self.write_at_once = write_at_once
        self.version = 0  # bumped by every change (``changed`` or ``version += 1`` on hot paths)
        self.saved_version = 0
        self.on_change: Callable[[TableFile], None] | None = None
        self.failures = 0

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else "<memory>"

    @property
    def dirty(self) -> bool:
        return self.path is not None and self.version != self.saved_version

    def changed(self) -> None:
        """Record a change: the writer saves it soon (or, with none, at once if ``write_at_once``)."""
        self.version += 1
        hook = self.on_change
        if hook is not None:
            hook(self)
        elif self.write_at_once:
            _persist_logged(self)

    def snapshot(self) -> tuple[int, bytes] | None:
        """The version and bytes to write, or None when the file is up to date."""
        if not self.dirty:
            return None
        return self.version, self._encode()

    def mark_saved(self, version: int) -> None:
        if version > self.saved_version:
            self.saved_version = version

    def persist(self) -> None:
        """Write the file now if it is behind; on failure raise and stay dirty."""
        snap = self.snapshot()
        if snap is None:
            return
        assert self.path is not None
        write_atomic(self.path, snap[1])
        self.mark_saved(snap[0])


def _persist_logged(f: TableFile) -> None:
    try:
        f.persist()
    except Exception:
        f.failures += 1
        log.exception("writing %s failed; the change stays unsaved until the next write", f.path)


class TableWriter:
    """Saves ``TableFile``s on a worker thread, a burst of changes in one write each."""

    def __init__(self, files: Iterable[TableFile], *, delay_s: float = 0.05, retry_max_s: float = 5.0) -> None:
        self.files = list(files)
        self.delay_s = delay_s
        self.retry_max_s = retry_max_s
        self.failures = 0
        self._pending: dict[TableFile, None] = {}
        self._locks = {f: asyncio.Lock() for f in self.files}
        self._waiters: list[tuple[TableFile, int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()  # somebody waits for a write: skip the gathering pause

    def watch(self, *files: TableFile) -> None:
        """Save these files soon after each change (the others on ``save_all``)."""
        for f in files:
            f.on_change = self._changed

    def _changed(self, f: TableFile) -> None:
        self._pending[f] = None
        if self._task is None and not self._stop.is_set():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a change made before the broker runs: nothing to wait for
                self._pending.pop(f)
                _persist_logged(f)
                return
            self._task = loop.create_task(self._drain())

    async def _drain(self) -> None:
        pause = self.delay_s
        try:
            await wait_event(self._hurry, self.delay_s)  # gather the burst
            while self._pending and not self._stop.is_set():
                self._hurry.clear()
                files = list(self._pending)
                self._pending.clear()
                for f in files:
                    if not await self.save(f):
                        self._pending[f] = None
                if self._pending:
                    await wait_event(self._stop, pause)
                    pause = min(pause * 2, self.retry_max_s)
        finally:
            self._task = None

    async def save(self, f: TableFile) -> bool:
        """Write ``f`` if it is behind; False (logged, still dirty, retried) when that failed."""
        try:
            await self.flush(f)
        except asyncio.CancelledError:
            raise
        except Exception:
            return False
        return True

    async def _write(self, f: TableFile) -> None:
        async with self._locks[f]:  # one write of a file at a time, in version order
            snap = f.snapshot()
            if snap is None:
                return
            version, data = snap
            path = f.path
            assert path is not None
            done = asyncio.get_running_loop().run_in_executor(None, write_atomic, path, data)
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                # Cancelled while the thread writes: let it finish before another write of
                # the same file may start, and keep what it achieved.
                await asyncio.wait([done])
                if done.exception() is None:
                    f.mark_saved(version)
                raise
            f.mark_saved(version)
        self._wake(f)

    async def flush(self, f: TableFile) -> None:
        """Save ``f`` now; raises when the write fails (the caller answers with the error)."""
        try:
            await self._write(f)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.failures += 1
            f.failures += 1
            log.exception("writing %s failed (%d failures so far); it stays dirty and is retried", f.path, f.failures)
            self._changed(f)  # and keep retrying in the background
            raise

    async def saved(self, f: TableFile, version: int, timeout_s: float) -> bool:
        """Wait until the file holds ``version``; False if that took longer than ``timeout_s``."""
        if f.saved_version >= version:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (f, version, fut)
        self._waiters.append(entry)
        self._hurry.set()
        try:
            await within(fut, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake(self, f: TableFile) -> None:
        for entry in [e for e in self._waiters if e[0] is f and f.saved_version >= e[1]]:
            self._waiters.remove(entry)
            if not entry[2].done():
                entry[2].set_result(None)

    async def save_all(self) -> None:
        """Write every dirty file (the periodic save); failures are logged, files stay dirty."""
        for f in self.files:
            await self.save(f)

    async def close(self) -> None:
        """Stop the background writer (after its current write) and write what is unsaved."""
        self._stop.set()
        self._hurry.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self.save_all()
        for f in self.files:
            if f.dirty:
                log.error("%s could not be written at shutdown; its last changes are lost", f.path)
