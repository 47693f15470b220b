"""Running a long-lived server from the command line: loop, signals, ready line, errors.

Every server prints exactly one line on stdout when it is ready to serve
(``apogee <role> ready on HOST:PORT``), which humans read and test harnesses wait for,
logs through the standard logging module on stderr, stops cleanly on SIGINT/SIGTERM, and
reloads what it can on SIGHUP (its TLS certificates) without stopping.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

from apogee.cli.allocator import keep_large_blocks
from apogee.cli.status import ExitStatus
from apogee.errors import ApogeeError
from apogee.remoting.loop import run

log = logging.getLogger("apogee.cli")


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def serve(
    start: Callable[[], Awaitable[str]],
    stop: Callable[[], Awaitable[None]],
    reload: Callable[[], None] | None = None,
) -> ExitStatus:
    """Run ``start`` (returns the ready line), wait for a signal, then run ``stop``;
    ``reload`` runs on the loop at each SIGHUP."""
    keep_large_blocks()  # before the first large frame: see cli/allocator.py

    async def main() -> ExitStatus:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        if reload is not None:
            loop.add_signal_handler(signal.SIGHUP, reload)
        try:
            ready = await start()
        except OSError as exc:
            print(f"error: cannot start: {exc.strerror or exc}", file=sys.stderr)
            await stop()
            return ExitStatus.UNAVAILABLE
        except ApogeeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            await stop()
            return ExitStatus.CONFIG
        # Everything built at start-up lives as long as the server: keep it out of the
        # collector's generations, and collect the young generation less often than
        # CPython's default (every 700 allocations), which a busy server hits many times a
        # second; long GC pauses are what shows in p99 latency.
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 50)
        print(ready, flush=True)
        await stopping.wait()
        log.info("shutting down")
        await stop()
        log.info("stopped")
        return ExitStatus.SUCCESS

    return run(main())
