from __future__ import annotations

import asyncio
import contextlib
import os
import select
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from apogee.common.accel import native
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


NATIVE_OR_NOT = [False, pytest.param(True, marks=pytest.mark.skipif(native is None, reason="no C extension"))]


@pytest.mark.parametrize("native_flusher", NATIVE_OR_NOT)
async def test_group_commit_resolves_after_fsync_and_shares_it(env, native_flusher: bool) -> None:
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error,
                     native_flusher=native_flusher)
    assert gc.native is native_flusher
    futures = []
    for _ in range(50):
        r = clog.put_message(make_msg(body=b"x" * 100))
        futures.append(gc.request(r.wrote_offset + r.wrote_bytes))
    assert gc.pending == 50
    assert await asyncio.gather(*futures) == [PutStatus.PUT_OK] * 50
    # The I/O thread starts once the loop yields, so this turn's puts share one or two
    # fsyncs; the native flusher starts at the first request and flushes again while more
    # come (how many depends on the disk: below, puts written first share exactly one).
    assert gc.pending == 0 and (native_flusher or gc.fsyncs <= 3)
    assert rec.flushed[-1][0] == clog.max_offset == clog.flushed_offset
    assert rec.flushed[-1][1] == clog.last_store_ts
    gc.close()


@pytest.mark.parametrize("native_flusher", NATIVE_OR_NOT)
async def test_puts_written_before_their_requests_share_one_fsync(env, native_flusher: bool) -> None:
    """A flush covers everything written when it starts, not only the request's own end."""
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error,
                     native_flusher=native_flusher)
    ends = []
    for _ in range(50):
        r = clog.put_message(make_msg(body=b"x" * 100))
        ends.append(r.wrote_offset + r.wrote_bytes)
    futures = [gc.request(end) for end in ends]
    assert await asyncio.gather(*futures) == [PutStatus.PUT_OK] * 50
    assert gc.fsyncs == 1 and rec.flushed == [(clog.max_offset, clog.last_store_ts)]
    gc.close()


async def test_group_commit_timeout(env, monkeypatch: pytest.MonkeyPatch) -> None:
    clog, io, rec = env
    real_flush = clog.mfq.flush

    def slow_flush() -> int:
        time.sleep(0.3)
        return real_flush()

    monkeypatch.setattr(clog.mfq, "flush", slow_flush)
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 50, rec.on_flushed, rec.on_error, native_flusher=False)
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
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error, native_flusher=False)
    r = clog.put_message(make_msg())
    futs = [gc.request(r.wrote_offset + r.wrote_bytes) for _ in range(3)]
    assert await asyncio.gather(*futs) == [PutStatus.FLUSH_DISK_FAILED] * 3
    assert len(rec.errors) == 1 and not rec.flushed
    gc.close()


@contextlib.contextmanager
def unflushable(clog: CommitLog) -> Iterator[None]:
    """The last CommitLog file's descriptor swapped for a pipe's, which fdatasync refuses."""
    last = clog.mfq.files[-1]
    real_fd, (pipe_r, pipe_w) = last.fd, os.pipe()
    last.fd = pipe_r
    try:
        yield
    finally:
        last.fd = real_fd
        os.close(pipe_r)
        os.close(pipe_w)


@pytest.mark.skipif(native is None, reason="no C extension")
async def test_native_fsync_error_fails_everyone(env) -> None:
    """The native flusher's fdatasync fails (here: the file's descriptor swapped for a pipe's,
    which fdatasync refuses): every waiting put gets FLUSH_DISK_FAILED and the owner hears it
    once, as on the I/O thread."""
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error)
    r = clog.put_message(make_msg())
    with unflushable(clog):
        futs = [gc.request(r.wrote_offset + r.wrote_bytes) for _ in range(3)]
        assert await asyncio.gather(*futs) == [PutStatus.FLUSH_DISK_FAILED] * 3
    assert len(rec.errors) == 1 and isinstance(rec.errors[0], OSError) and not rec.flushed
    assert not gc.native  # a failed flusher is not used again
    gc.close()


@pytest.mark.skipif(native is None, reason="no C extension")
async def test_native_fsync_error_heard_once_by_puts_that_come_after_it(env) -> None:
    """Puts that arrive after the native fdatasync failed, before the loop read its result:
    they fail with the others, and the owner still hears of one failure (the I/O thread does
    not try the broken file a second time)."""
    clog, io, rec = env
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error)
    r = clog.put_message(make_msg())
    with unflushable(clog):
        first = gc.request(r.wrote_offset + r.wrote_bytes)
        # The flusher has failed once its eventfd is readable; the loop has not run since.
        flusher = gc._flusher
        assert flusher is not None
        assert select.select([flusher.fileno()], [], [], 10)[0]
        later = [gc.request(r.wrote_offset + r.wrote_bytes) for _ in range(2)]
        assert await asyncio.gather(first, *later) == [PutStatus.FLUSH_DISK_FAILED] * 3
        await io.run(lambda: None)  # an I/O thread flush, had one started, has finished
    assert len(rec.errors) == 1 and not rec.flushed
    gc.close()


@pytest.mark.parametrize("native_flusher", NATIVE_OR_NOT)
async def test_group_commit_across_file_rolls(store_config: Callable[..., StoreConfig], native_flusher: bool) -> None:
    """Puts crossing CommitLog files: each is answered PUT_OK only once durable, the files'
    flushed offsets follow, and the native flusher serves the puts inside one file (the I/O
    thread those that come while an older file is not yet durable)."""
    cfg = store_config(mapped_file_size_commitlog=64 * 1024)
    io = IOThread()
    clog = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog))
    rec = Recorder()
    gc = GroupCommit(asyncio.get_running_loop(), io, clog, 5000, rec.on_flushed, rec.on_error,
                     native_flusher=native_flusher)
    try:
        for burst in range(20):
            futs = []
            for _ in range(1 + burst % 4):
                r = clog.put_message(make_msg(body=b"x" * 3000))
                futs.append(gc.request(r.wrote_offset + r.wrote_bytes))
            assert await asyncio.gather(*futs) == [PutStatus.PUT_OK] * len(futs)
            assert rec.flushed[-1][0] >= r.wrote_offset + r.wrote_bytes
        assert len(clog.mfq.files) > 2
        assert clog.flushed_offset == clog.max_offset
        assert gc.native is native_flusher and not rec.errors
        if native_flusher:
            assert 0 < gc.native_fsyncs < gc.fsyncs + 1
    finally:
        gc.close()
        io.shutdown()
        clog.mfq.close()


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
