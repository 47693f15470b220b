"""A slave's store: the master's CommitLog bytes appended at the master's offsets give
byte-identical files and the same ConsumeQueues; puts are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.errors import StoreError
from apogee.store import MessageStore
from apogee.store.ha.protocol import check_frame, chunk_size, start_offset
from apogee.store.results import PutStatus
from tests.support.waiting import wait_until

from .conftest import make_msg


def copy_new_bytes(master: MessageStore, slave: MessageStore, batch: int) -> None:
    """What the HA link does, without sockets: frames from the slave's end (or, for an empty
    slave, the master's last file) appended one by one."""
    size = master.config.mapped_file_size_commitlog
    offset = start_offset(slave.max_phy_offset, master.min_phy_offset, master.max_phy_offset, size)
    while True:
        mf = master.commitlog.mfq.find(offset)
        n = chunk_size(offset, mf.start, mf.wrote, batch) if mf is not None else 0
        if mf is None or not n:
            return
        rel = offset - mf.start
        check_frame(slave.max_phy_offset, offset, n, size)
        slave.append_replica(offset, bytes(mf.view[rel : rel + n]))
        offset += n


def files(store: MessageStore) -> dict[str, bytes]:
    return {mf.path.name: bytes(mf.view[: mf.wrote]) for mf in store.commitlog.mfq}


def queue(store: MessageStore, topic: str, qid: int) -> dict[str, bytes]:
    """The ConsumeQueue's files (physical offset, size, tags code per entry)."""
    cq = store.consume_queues.queues[(topic, qid)]
    return {mf.path.name: bytes(mf.view[: mf.wrote]) for mf in cq.mfq}


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 600), min_size=1, max_size=60), st.integers(1, 700))
async def test_replicated_bytes_are_byte_identical_with_equal_queues(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[int], batch: int
) -> None:
    root = tmp_path_factory.mktemp("ha")
    config: dict[str, Any] = {"mapped_file_size_commitlog": 4096, "mapped_file_size_consume_queue": 160,
                              "populate_ahead_bytes": 0, "clean_resource_interval_ms": 3_600_000,
                              "max_hash_slot_num": 16, "max_index_num": 32}
    from apogee.store import StoreConfig

    master = MessageStore(StoreConfig(store_path_root_dir=str(root / "m"), **config))
    slave = MessageStore(StoreConfig(store_path_root_dir=str(root / "s"), **config))
    await master.start()
    await slave.start()
    slave.serve_as_slave()
    try:
        for i, n in enumerate(bodies):
            assert (await master.put_message(make_msg("T", i % 2, b"x" * n, keys=f"k{i}"))).status is PutStatus.PUT_OK
            if i % 7 == 0:
                copy_new_bytes(master, slave, batch)
        copy_new_bytes(master, slave, batch)
        await master.wait_dispatched()
        await slave.wait_dispatched()
        assert slave.max_phy_offset == master.max_phy_offset
        assert files(slave) == files(master)
        for qid in {i % 2 for i in range(len(bodies))}:
            assert queue(slave, "T", qid) == queue(master, "T", qid)
    finally:
        await slave.shutdown()
        await master.shutdown()


async def test_a_slave_store_refuses_puts(open_store: Any, tmp_path: Path) -> None:
    slave = await open_store()
    slave.serve_as_slave()
    result = await slave.put_message(make_msg())
    assert result.status is PutStatus.SLAVE_READ_ONLY
    assert slave.max_phy_offset == 0


async def test_bytes_that_do_not_continue_the_log_are_refused(open_store: Any) -> None:
    slave = await open_store()
    slave.serve_as_slave()
    with pytest.raises(StoreError, match="do not continue"):
        slave.append_replica(100, b"x" * 10)  # an empty slave starts at a file start
    slave.append_replica(4096, b"\0" * 8)
    with pytest.raises(StoreError, match="do not continue"):
        slave.append_replica(5000, b"x")
    with pytest.raises(StoreError, match="overrun"):
        slave.append_replica(4104, b"x" * 4096)


async def test_a_sync_flush_slave_dispatches_what_it_has_made_durable(tmp_path: Path) -> None:
    from apogee.store import FlushDiskType, StoreConfig

    def config(name: str) -> StoreConfig:
        return StoreConfig(store_path_root_dir=str(tmp_path / name), flush_disk_type=FlushDiskType.SYNC_FLUSH,
                           mapped_file_size_commitlog=4096, populate_ahead_bytes=0,
                           clean_resource_interval_ms=3_600_000, max_hash_slot_num=16, max_index_num=32)

    master, slave = MessageStore(config("m")), MessageStore(config("s"))
    await master.start()
    await slave.start()
    slave.serve_as_slave()
    try:
        for i in range(30):
            assert (await master.put_message(make_msg("T", 0, b"y" * 100 * (i % 5 + 1)))).status is PutStatus.PUT_OK
            copy_new_bytes(master, slave, 1000)
        # No explicit flush: appending asked for the fsync, and dispatch follows it.
        await wait_until(lambda: slave.flushed_phy_offset == master.max_phy_offset, 5, "the slave's fsync")
        await slave.wait_dispatched()
        await master.wait_dispatched()
        assert slave.flushed_phy_offset == slave.max_phy_offset == master.max_phy_offset
        assert files(slave) == files(master) and queue(slave, "T", 0) == queue(master, "T", 0)
    finally:
        await slave.shutdown()
        await master.shutdown()


async def test_an_empty_slave_starting_at_a_later_file_leaves_no_stray_file(open_store: Any) -> None:
    slave = await open_store(populate_ahead_bytes=0)
    slave.serve_as_slave()
    slave.append_replica(3 * 4096, b"\0" * 16)
    await slave.io.run(lambda: None)  # the I/O thread has made whatever it was asked to
    names = {p.name for p in slave.config.commitlog_dir.iterdir()}
    assert names <= {"00000000000000012288", "00000000000000016384"}  # the file and its successor
