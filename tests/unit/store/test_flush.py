from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from apogee.store import PutStatus, StoreConfig
from apogee.store.commitlog import CommitLog
from apogee.store.flush import GroupCommit, PeriodicFlush
from apogee.store.io_thread import IOThread
from apogee.store.mapped_file_queue import MappedFileQueue
from tests.support.waiting import wait_until

from .conftest import make_msg


class Recorder:
    def __init__(self) -> None:
        self.flushed: list[tuple[int, int]] = []
        self.errors: list[BaseException] = []

    def on_flushed(self, durable: int, ts: int) -> None:
        self.flushed.append((durable, ts))

    def on_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


@pytest.fixture
async def env(store_config: Callable[..., StoreConfig]) -> AsyncIterator[tuple[CommitLog, IOThread, Recorder]]:
    cfg = store_config(mapped_file_size_commitlog=1 << 20)
    io = IOThread()
    clog = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog))
    yield clog, io, Recorder()
    io.shutdown()
    clog.mfq.close()


async def test_group_commit_resolves_after_fsync_and_shares_it(env) -> None:
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error)
    futures = []
    for _ in range(50):
        r = clog.put_message(make_msg(body=b"x" * 100))
        futures.append(gc.request(r.wrote_offset + r.wrote_bytes))
    assert gc.pending == 50
    assert await asyncio.gather(*futures) == [PutStatus.PUT_OK] * 50
    assert gc.fsyncs <= 3 and gc.pending == 0
    assert rec.flushed[-1][0] == clog.max_offset == clog.flushed_offset
    assert rec.flushed[-1][1] == clog.last_store_ts
    gc.close()


async def test_group_commit_timeout(env, monkeypatch: pytest.MonkeyPatch) -> None:
    clog, io, rec = env
    real_flush = clog.mfq.flush

    def slow_flush() -> int:
        time.sleep(0.3)
        return real_flush()

    monkeypatch.setattr(clog.mfq, "flush", slow_flush)
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 50, rec.on_flushed, rec.on_error)
    r = clog.put_message(make_msg())
    assert await gc.request(r.wrote_offset + r.wrote_bytes) is PutStatus.FLUSH_DISK_TIMEOUT
    await asyncio.sleep(0.4)  # the late fsync still completes and is reported
    assert rec.flushed and gc.pending == 0
    gc.close()


async def test_group_commit_fsync_error_fails_everyone(env, monkeypatch: pytest.MonkeyPatch) -> None:
    clog, io, rec = env

    def broken() -> int:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(clog.mfq, "flush", broken)
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error)
    r = clog.put_message(make_msg())
    futs = [gc.request(r.wrote_offset + r.wrote_bytes) for _ in range(3)]
    assert await asyncio.gather(*futs) == [PutStatus.FLUSH_DISK_FAILED] * 3
    assert len(rec.errors) == 1 and not rec.flushed
    gc.close()


async def test_close_answers_pending_requests(env) -> None:
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error)
    fut = gc.request(10**9)  # never reachable
    gc.close()
    assert fut.result() is PutStatus.SERVICE_NOT_AVAILABLE


async def test_periodic_flush_respects_least_pages(env, store_config: Callable[..., StoreConfig]) -> None:
    clog, io, rec = env
    cfg = store_config(flush_interval_commitlog_ms=5, flush_commitlog_least_pages=2,
                       flush_commitlog_thorough_interval_ms=60_000)
    pf = PeriodicFlush(asyncio.get_running_loop(), io, clog, cfg, rec.on_flushed, rec.on_error)
    task = asyncio.create_task(pf.run())
    try:
        clog.put_message(make_msg(body=b"x" * 100))
        await asyncio.sleep(0.05)
        assert pf.fsyncs == 0  # fewer than two pages dirty
        for _ in range(100):
            clog.put_message(make_msg(body=b"x" * 100))
        # The offset is durable once the I/O thread's fdatasync returns; the flush is counted
        # and reported when the loop takes its completion, a callback later: wait for both.
        await wait_until(lambda: clog.flushed_offset == clog.max_offset and pf.fsyncs >= 1, 10, "the periodic flush")
        assert rec.flushed[-1][0] > 8192
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await pf.flush_now()
    assert clog.flushed_offset == clog.max_offset
