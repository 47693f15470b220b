"""Issue 16: a full disk answers DISK_FULL (not "create mapped file failed"), and a cleanup says,
per consumer group and queue, which messages it deleted before they were consumed; with
``cleanUnconsumedFileEnable=false`` it keeps them and refuses puts instead.

The store runs on a genuinely small file system: a 2 MiB tmpfs the test mounts (as root), so
file creation really fails with ENOSPC.  Without root the same test runs on an ordinary
directory whose "disk" is the store's own size against a 2 MiB budget (injected disk usage).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.store import MessageStore, PutStatus

from .conftest import bodies, make_msg

DISK = 2 << 20
CONFIG = {
    "mapped_file_size_commitlog": 256 << 10,
    "mapped_file_size_consume_queue": 1024 * 20,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "populate_ahead_bytes": 0,
    "message_index_enable": False,
}


def _store_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[tuple[Path, dict]]:
    """(store root on a 2 MiB file system, extra MessageStore kwargs)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)], capture_output=True).returncode == 0
    root = disk / "store"
    kwargs: dict = {}
    if not mounted:
        kwargs["disk_usage"] = lambda path: _store_bytes(root) * 100 / DISK
    try:
        yield root, kwargs
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)


async def fill_until_refused(store: MessageStore, group_offsets: dict, simulated: bool) -> tuple[int, PutStatus]:
    """Put 1 KiB messages until one is refused; returns (how many went in, the refusal).  On the
    tmpfs nothing checks the disk meanwhile: the refusal comes from a file that cannot be made."""
    store.set_committed_offsets(lambda: ((g, "D", 0, o) for g, o in group_offsets.items()))
    for i in range(10_000):
        result = await store.put_message(make_msg("D", 0, f"{i:06d}".encode() * 170))
        if not result.ok:
            return i, result.status
        if i % 32 == 0:
            await store.wait_dispatched()
            if simulated:
                await store.check_disk()  # what the disk guard does every cleanResourceInterval
    raise AssertionError("the disk never filled up")


async def test_a_full_disk_answers_disk_full_and_cleanup_reports_unconsumed(
        small_disk, open_store, caplog) -> None:
    root, kwargs = small_disk
    store = await open_store(store_path_root_dir=str(root), store_kwargs=kwargs, **CONFIG)
    offsets = {"slow": 3, "done": 10**6}
    caplog.set_level(logging.INFO, logger="apogee.store")
    n, status = await fill_until_refused(store, offsets, bool(kwargs))
    assert status is PutStatus.DISK_FULL and n > 300
    if not kwargs:  # the real file system: the roll into a new file failed with ENOSPC
        assert any("No space left on device" in r.getMessage() for r in caplog.records)
    assert (await store.put_message(make_msg("D", 0))).status is PutStatus.DISK_FULL
    assert store.runtime_info()["diskFull"]
    await store.wait_dispatched()
    deleted = await store.run_cleanup()  # disk above diskSpaceCleanForciblyRatio: oldest files go
    assert deleted >= 1
    first_left = store.get_min_offset_in_queue("D", 0)
    assert first_left > 3
    assert store.cleaner.unconsumed_deleted == {("slow", "D", 0): first_left - 3}
    assert store.runtime_info()["unconsumedDeleted"] == first_left - 3
    line = next(r for r in caplog.records if "has not consumed" in r.getMessage())
    assert line.levelno == logging.WARNING
    assert f"group slow has not consumed: D-0 queue offsets 3..{first_left - 1}" in line.getMessage()
    await store.run_cleanup()  # the next check sees the space and takes puts again
    assert (await store.put_message(make_msg("D", 0, b"after"))).ok
    await store.wait_dispatched()
    assert bodies(store, "D", 0, first_left)[-1] == b"after"


async def test_keeping_unconsumed_files_refuses_puts_instead(small_disk, open_store) -> None:
    root, kwargs = small_disk
    store = await open_store(store_path_root_dir=str(root), store_kwargs=kwargs, clean_unconsumed_file_enable=False,
                             **CONFIG)
    offsets = {"slow": 3}
    n, status = await fill_until_refused(store, offsets, bool(kwargs))
    assert status is PutStatus.DISK_FULL
    await store.wait_dispatched()
    assert await store.run_cleanup() == 0  # the oldest file holds offset 3, which "slow" still wants
    assert await store.run_cleanup() == 0
    assert (await store.put_message(make_msg("D", 0))).status is PutStatus.DISK_FULL
    assert store.cleaner.unconsumed_deleted_total == 0
    assert len(bodies(store, "D", 0)) == n  # every message still there
    offsets["slow"] = n  # the group caught up: now the files may go
    assert await store.run_cleanup() >= 1
    await store.run_cleanup()
    assert store.cleaner.unconsumed_deleted_total == 0
    assert (await store.put_message(make_msg("D", 0, b"after"))).ok
