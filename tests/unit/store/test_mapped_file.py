from __future__ import annotations

import ctypes
import gc
import os
import resource
from pathlib import Path

import pytest

from apogee.store.mapped_file import MappedFile, file_name
from apogee.store.mapped_file_queue import MappedFileQueue


def test_file_name_is_20_digits() -> None:
    assert file_name(0) == "0" * 20
    assert file_name(1 << 30) == "00000000001073741824"


def test_create_write_flush_reopen(tmp_path: Path) -> None:
    path = tmp_path / "d" / file_name(4096)
    mf = MappedFile.create(path, 4096, 4096)
    assert path.stat().st_size == 4096 and mf.end == 8192
    mf.mm[0:5] = b"hello"
    mf.wrote = 5
    assert mf.flush() == 5 and mf.flushed == 5
    assert bytes(mf.slice(0, 5)) == b"hello"
    assert mf.close()
    again = MappedFile.open_existing(path, 4096, 4096)
    assert bytes(again.mm[0:5]) == b"hello" and again.wrote == 0
    assert again.close()


def test_short_file_is_extended_on_open(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(b"abc")
    mf = MappedFile.open_existing(path, 0, 4096)
    assert path.stat().st_size == 4096 and bytes(mf.mm[:3]) == b"abc"
    mf.close()


def test_last_nonzero_and_zero_range(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), 0, 3 << 20)
    assert mf.last_nonzero(0) == 0
    mf.mm[100] = 1
    mf.mm[(2 << 20) + 7] = 9
    assert mf.last_nonzero(0) == (2 << 20) + 8
    assert mf.last_nonzero((2 << 20) + 8) == (2 << 20) + 8
    mf.zero_range(50, mf.size)
    assert mf.last_nonzero(0) == 0
    mf.populate(0, 1 << 20)  # advisory; must not fail or change data
    mf.advise_cold()
    assert mf.close()


def test_last_nonzero_of_a_mostly_unwritten_1_gib_file_reads_only_its_data(tmp_path: Path) -> None:
    """Issue 16, finding 1: a crash restart looks for the last non-zero byte of the CommitLog's
    end file and of the pre-created next one.  Reading a 1 GiB file's never-written pages took
    the restart of a broker holding a few MB from under 1 s to 5-18 s, long enough for a
    consumer started meanwhile to find no route and (RocketMQ clients refresh routes and
    heartbeats every 30 s) receive nothing for a minute.  Only the data ranges may be read."""
    size = 1 << 30
    mf = MappedFile.create(tmp_path / file_name(0), 0, size)  # preallocated, as the CommitLog's
    try:
        if mf._data_ranges(0) == [(0, size)]:
            pytest.skip("this file system does not tell data from unwritten space (SEEK_DATA)")
        mf.mm[(1 << 20) : (1 << 20) + 5] = b"abcde"
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        assert mf.last_nonzero(0) == (1 << 20) + 5
        assert mf.last_nonzero(1 << 29) == 1 << 29
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        # Reading the whole file costs about 16 000 faults (the kernel maps 64 KiB a fault).
        assert faulted < 4096, f"{faulted} page faults: the unwritten part of the file was read"
    finally:
        mf.close()


def test_destroy_with_live_slice_unlinks_now_and_unmaps_later(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, 0, 4096)
    mf.mm[0:3] = b"abc"
    mf.wrote = 3
    view = mf.slice(0, 3)
    assert not mf.destroy()  # a slice is exported: no BufferError escapes
    assert not path.exists()
    assert bytes(view) == b"abc"  # the slice stays valid after the unlink
    view.release()
    assert mf.close() and mf.closed
    assert mf.close()  # idempotent


def test_flush_after_close_is_a_no_op(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), 0, 4096, preallocate=False)
    mf.close()
    mf.wrote = 10
    assert mf.flush() == 0
    assert os.listdir(tmp_path) == [file_name(0)]


def test_failed_creation_removes_only_its_own_file(tmp_path: Path, monkeypatch) -> None:
    import os as os_mod

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os_mod, "posix_fallocate", no_space)
    fresh = tmp_path / file_name(0)
    with pytest.raises(OSError, match="No space"):
        MappedFile.create(fresh, 0, 4096)
    assert not fresh.exists()
    kept = tmp_path / file_name(4096)
    kept.write_bytes(b"data")
    with pytest.raises(OSError, match="No space"):
        MappedFile.create(kept, 4096, 4096)
    assert kept.exists()


def test_reservation_follows_the_writer(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), 0, 1 << 20, reserve=64 * 1024)
    assert mf.reserved == 64 * 1024
    blocks_before = os.stat(mf.path).st_blocks
    mf.reserve(512 * 1024)
    assert mf.reserved == 512 * 1024 and os.stat(mf.path).st_blocks > blocks_before
    mf.reserve(100)  # never shrinks
    assert mf.reserved == 512 * 1024
    mf.populate(512 * 1024, 600 * 1024)  # populating reserves first
    assert mf.reserved == 600 * 1024
    mf.close()
    sparse = MappedFile.create(tmp_path / file_name(1 << 20), 1 << 20, 1 << 20, preallocate=False)
    assert sparse.reserved == 1 << 20 and os.stat(sparse.path).st_blocks == 0
    sparse.close()


def _vm_flags(mf: MappedFile) -> set[str]:
    """The kernel's VmFlags of the mapping behind ``mf`` (``rr``: random-read advice)."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(mf.mm))
    gc.collect()  # the temporary buffer export above must not keep the mapping open
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            low, high = (int(x, 16) for x in head.split("-"))
            if low <= address < high:
                for flags in lines[i + 1 :]:
                    if flags.startswith("VmFlags:"):
                        return set(flags.split()[1:])
    raise AssertionError("mapping not found in /proc/self/smaps")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
def test_a_file_flushed_after_small_appends_has_no_fault_readahead_until_the_writer_leaves(
    tmp_path: Path,
) -> None:
    # Readahead would grow page-cache folios to 2 MiB, and every fdatasync after a 1 KiB
    # append would write one back whole (see MappedFile.advise_random).
    small = MappedFile.create(tmp_path / file_name(0), 0, 1 << 20, advise_random=True)
    plain = MappedFile.create(tmp_path / file_name(1 << 20), 1 << 20, 1 << 20)
    try:
        assert "rr" in _vm_flags(small) and "rr" not in _vm_flags(plain)
        small.advise_cold()  # the writer has left: lagging readers get readahead again
        assert "rr" not in _vm_flags(small)
    finally:
        assert small.close() and plain.close()


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
@pytest.mark.parametrize("small_flushes", [True, False])
def test_a_queue_advises_the_file_its_writer_appends_to(tmp_path: Path, small_flushes: bool) -> None:
    queue = MappedFileQueue(tmp_path, 1 << 16, small_flushes=small_flushes)
    queue.add_file(0)
    second = queue.add_file(1 << 16)
    assert ("rr" in _vm_flags(second)) is small_flushes
    for mf in queue:
        assert mf.close()
    reloaded = MappedFileQueue(tmp_path, 1 << 16, small_flushes=small_flushes)
    reloaded.load()  # after a restart the writer goes on in the last file only
    try:
        assert [("rr" in _vm_flags(mf)) for mf in reloaded] == [False, small_flushes]
    finally:
        for mf in reloaded:
            assert mf.close()
