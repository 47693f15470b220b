from __future__ import annotations

import threading

import pytest

from apogee.store.io_thread import IOThread


async def test_runs_off_the_loop_thread_in_order() -> None:
    io = IOThread()
    try:
        names = [await io.run(lambda: threading.current_thread().name) for _ in range(3)]
        assert all(n.startswith("apogee-store-io") for n in names) and len(set(names)) == 1
        assert await io.run(pow, 2, 10) == 1024
        assert io.submit(sorted, [3, 1, 2]).result() == [1, 2, 3]
        with pytest.raises(ZeroDivisionError):
            await io.run(lambda: 1 / 0)
    finally:
        io.shutdown()
        io.shutdown()
