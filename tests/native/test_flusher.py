"""``native.Flusher``: the SYNC_FLUSH group commit's fdatasync thread outside the GIL.

What GroupCommit relies on (tests/unit/store/test_flush.py drives it through GroupCommit):
a request is flushed by the thread and reported through the eventfd with the durable end and
the store time given with it; a failed fdatasync is reported and refuses everything after it;
a closed flusher refuses requests; wrong arguments raise.  Run under the sanitizer build by
``make check-native``.
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.common.accel import native

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")


@pytest.fixture
def data_fd(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "commitlog", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"x" * 8192)
    yield fd
    os.close(fd)


def wait_report(flusher: object) -> tuple[int, int, int, int, int]:
    assert native is not None and isinstance(flusher, native.Flusher)
    readable, _, _ = select.select([flusher.fileno()], [], [], 10)
    assert readable, "the flusher did not signal its eventfd"
    return flusher.take()


def test_a_request_is_flushed_and_reported(data_fd: int) -> None:
    assert native is not None
    flusher = native.Flusher()
    try:
        assert flusher.take() == (-1, 0, 0, 0, 0)  # nothing asked, nothing done
        assert flusher.request(0, data_fd, 4096, 111)
        durable, ts, fsyncs, last_ns, err = wait_report(flusher)
        assert (durable, ts, err) == (4096, 111, 0) and fsyncs == 1 and last_ns > 0
        assert flusher.request(0, data_fd, 8192, 222)  # more of the same file
        while flusher.take()[0] < 8192:
            wait_report(flusher)
        assert flusher.take()[:3] == (8192, 222, 2)
        assert flusher.request(0, data_fd, 100, 1)  # already durable: nothing more to do
        assert flusher.take()[2] == 2
    finally:
        flusher.close()


def test_the_next_file_is_taken_once_the_last_one_is_durable(data_fd: int, tmp_path: Path) -> None:
    assert native is not None
    flusher = native.Flusher()
    other = os.open(tmp_path / "next", os.O_RDWR | os.O_CREAT)
    try:
        assert flusher.request(0, data_fd, 8192, 1)
        wait_report(flusher)
        os.write(other, b"y" * 100)
        assert flusher.request(8192, other, 8292, 2)  # the first file is durable: switch
        while flusher.take()[0] < 8292:
            wait_report(flusher)
    finally:
        flusher.close()
        os.close(other)


def test_a_failed_fdatasync_is_reported_and_refuses_what_follows(data_fd: int) -> None:
    assert native is not None
    flusher = native.Flusher()
    read_end, write_end = os.pipe()  # fdatasync(2) refuses a pipe (EINVAL)
    try:
        assert flusher.request(0, read_end, 10, 1)
        durable, _, fsyncs, _, err = wait_report(flusher)
        assert durable == -1 and fsyncs == 0 and err != 0
        assert not flusher.request(0, data_fd, 4096, 1)
    finally:
        flusher.close()
        os.close(read_end)
        os.close(write_end)


def test_closed_and_wrong_uses(data_fd: int) -> None:
    assert native is not None
    flusher = native.Flusher()
    with pytest.raises(TypeError):
        flusher.request("0", data_fd, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        native.Flusher(1)  # type: ignore[call-arg]
    assert not flusher.request(0, -1, 10, 1)  # a descriptor that cannot be duplicated
    flusher.close()
    flusher.close()  # idempotent
    assert not flusher.request(0, data_fd, 10, 1)
    with pytest.raises(ValueError):
        flusher.fileno()
    assert flusher.take()[2] == 0


def test_dropping_an_open_flusher_stops_its_thread(data_fd: int) -> None:
    assert native is not None
    before = len(os.listdir("/proc/self/task"))
    flusher = native.Flusher()
    assert len(os.listdir("/proc/self/task")) == before + 1
    assert flusher.request(0, data_fd, 4096, 1)
    del flusher  # joined by the deallocator, no close() needed
    assert len(os.listdir("/proc/self/task")) == before


odd = st.one_of(st.sampled_from([None, True, -1, 2**31, 2**63, 2**70, 1.5, "", b"", (), object()]), st.integers())


@settings(max_examples=200, deadline=None)
@given(st.tuples(odd, odd, odd, odd))
def test_any_request_arguments_raise_or_answer(args: tuple[object, object, object, object]) -> None:
    """Whatever request() is given, it raises or answers a bool; the flusher stays usable."""
    assert native is not None
    flusher = native.Flusher()
    try:
        with contextlib.suppress(TypeError, OverflowError):
            assert flusher.request(*args) in (True, False)  # type: ignore[arg-type]
        flusher.take()
    finally:
        flusher.close()
