from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest

from apogee.common import message_codec as mc
from apogee.store import FlushDiskType, MessageStore
from apogee.store.mapped_file import file_name
from apogee.store.mapped_file_queue import MappedFileQueue
from apogee.store.recovery import recover_commitlog

from .conftest import bodies, crash_copy, make_msg


async def fill(store: MessageStore, n: int, topic: str = "R") -> list:
    results = [await store.put_message(make_msg(topic, i % 2, f"m{i:03d}".encode() * 10,
                                                keys=f"k{i}", uniq=f"U{i}")) for i in range(n)]
    await store.wait_dispatched()
    return results


async def test_clean_restart_scans_the_last_three_files(open_store) -> None:
    store = await open_store()
    await fill(store, 150)
    starts = [mf.start for mf in store.commitlog.mfq.files]
    assert len(starts) > 4
    await store.shutdown()
    again = await open_store()
    rep = again.recovery
    assert rep.clean_shutdown and rep.start_offset == starts[-3] and rep.dropped_bytes == 0
    assert rep.end_offset == store.commitlog.max_offset or rep.end_offset == again.max_phy_offset
    assert bodies(again, "R", 0) == [f"m{i:03d}".encode() * 10 for i in range(0, 150, 2)]


@pytest.mark.parametrize("crash", [False, True])
async def test_corruption_in_the_middle_of_the_last_file_is_cut(open_store, store_config, tmp_path, caplog,
                                                                crash: bool) -> None:
    store = await open_store()
    results = await fill(store, 60)
    last = store.commitlog.mfq.files[-1]
    in_last = [r for r in results if r.wrote_offset >= last.start]
    victim = in_last[len(in_last) // 2]
    end = store.max_phy_offset
    if crash:
        root = crash_copy(store, tmp_path / "crashed")
    else:
        await store.shutdown()
        root = store.config.root
    path = root / "commitlog" / file_name(last.start)
    data = bytearray(path.read_bytes())
    data[victim.wrote_offset - last.start + 95] ^= 0xFF  # a body byte: only the CRC notices
    path.write_bytes(bytes(data))
    caplog.set_level(logging.INFO, logger="apogee.store.recovery")
    again = await open_store(store_path_root_dir=str(root))
    rep = again.recovery
    assert rep.clean_shutdown is not crash
    assert rep.end_offset == victim.wrote_offset == again.max_phy_offset
    assert rep.dropped_bytes == end - victim.wrote_offset
    line = next(r.getMessage() for r in caplog.records if "dropped" in r.getMessage())
    assert re.search(rf"cut at offset {victim.wrote_offset}, dropped {end - victim.wrote_offset} bytes", line)
    kept = results.index(victim)
    assert bodies(again, "R", 0) + bodies(again, "R", 1) == sorted(
        [f"m{i:03d}".encode() * 10 for i in range(kept)], key=lambda b: (int(b[1:4]) % 2, b))
    # every ConsumeQueue entry and index hit points into the kept prefix
    for cq in again.consume_queues.queues.values():
        assert all(phys + size <= victim.wrote_offset for _, phys, size, _ in cq.iter_entries())
    assert again.query_message("R", f"k{kept}", 64, 0, 1 << 62).message_count == 0
    assert again.query_message("R", f"k{kept - 1}", 64, 0, 1 << 62).message_count == 1
    # appends continue from the cut, with queue offsets continuing the kept messages
    r = await again.put_message(make_msg("R", kept % 2, b"after", keys=f"k{kept}"))
    assert r.wrote_offset == victim.wrote_offset and r.logics_offset == kept // 2
    await again.wait_dispatched()
    assert again.query_message("R", f"k{kept}", 64, 0, 1 << 62).message_count == 1


async def test_torn_record_after_crash_and_rebuilt_consume_queues(open_store, tmp_path) -> None:
    store = await open_store()
    results = await fill(store, 30)
    root = crash_copy(store, tmp_path / "crashed")
    last = results[-1]
    path = root / "commitlog" / file_name(last.wrote_offset - last.wrote_offset % 4096)
    data = bytearray(path.read_bytes())
    rel = last.wrote_offset % 4096
    data[rel + last.wrote_bytes - 10: rel + last.wrote_bytes] = bytes(10)  # torn write
    path.write_bytes(bytes(data))
    shutil.rmtree(root / "consumequeue" / "R" / "1")  # lost entirely: rebuilt from the log
    again = await open_store(store_path_root_dir=str(root))
    assert not again.recovery.clean_shutdown and again.recovery.start_offset == 0  # no checkpoint yet
    assert again.max_phy_offset == last.wrote_offset
    assert bodies(again, "R", 1) == [f"m{i:03d}".encode() * 10 for i in range(1, 29, 2)]
    assert again.get_max_offset_in_queue("R", 1) == 14 and again.next_queue_offset("R", 1) == 14
    tail = again.commitlog.mfq.files[-1]
    assert tail.last_nonzero(tail.wrote) == tail.wrote  # the torn bytes were cleared


async def test_crash_recovery_starts_at_checkpoint_file(open_store, tmp_path) -> None:
    t = [1_700_000_000_000]

    def clock() -> int:
        t[0] += 10_000  # 10 s per message: the checkpoint's 3 s slack is smaller
        return t[0]

    store = await open_store(store_kwargs={"clock": clock})
    results = await fill(store, 40)
    files = store.commitlog.mfq.files
    mid = files[len(files) // 2]
    first_in_mid = next(r for r in results if r.wrote_offset == mid.start)
    cp = store.checkpoint
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = first_in_mid.store_timestamp + 5000
    await store.io.run(cp.persist)
    root = crash_copy(store, tmp_path / "crashed")
    again = await open_store(store_path_root_dir=str(root))
    assert again.recovery.start_offset == mid.start
    assert again.recovery.end_offset == results[-1].wrote_offset + results[-1].wrote_bytes


def test_recover_commitlog_on_files(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, 4096)
    mf = q.add_file(0)
    pos = 0
    for i in range(3):
        rec = mc.encode_record(topic="T", body=b"x" * 100, physical_offset=pos, store_timestamp=i + 1)
        mf.mm[pos : pos + len(rec)] = rec
        pos += len(rec)
    stale = mc.encode_record(topic="T", body=b"y" * 10, physical_offset=9999)  # not at its offset
    mf.mm[pos : pos + len(stale)] = stale
    q.close()
    q = MappedFileQueue(tmp_path, 4096)
    q.load()
    rep = recover_commitlog(q, clean_shutdown=False, safe_ts=0, check_crc=True)
    # dropped counts up to the last non-zero byte (the stale record ends with a zero length)
    assert (rep.end_offset, rep.records, rep.dropped_bytes, rep.last_store_timestamp) == (pos, 3, len(stale) - 2, 3)
    assert q.max_offset == pos and bytes(q.files[0].mm[pos : pos + len(stale)]) == bytes(len(stale))
    q.close()


def test_recover_removes_files_after_the_cut(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, 4096)
    q.add_file(0)
    b = q.add_file(4096)
    b.mm[0:4] = b"junk"
    q.close()
    q = MappedFileQueue(tmp_path, 4096)
    q.load()
    rep = recover_commitlog(q, clean_shutdown=True, safe_ts=0, check_crc=True)
    assert rep.end_offset == 0 and rep.removed_files == 1 and rep.dropped_bytes == 4
    assert [p.name for p in tmp_path.iterdir()] == [file_name(0)]
    q.close()


async def test_sync_flush_store_recovers_too(open_store, tmp_path) -> None:
    store = await open_store(FlushDiskType.SYNC_FLUSH)
    results = await fill(store, 10)
    root = crash_copy(store, tmp_path / "crashed")
    again = await open_store(FlushDiskType.SYNC_FLUSH, store_path_root_dir=str(root))
    assert again.max_phy_offset == results[-1].wrote_offset + results[-1].wrote_bytes
    assert again.flushed_phy_offset == again.max_phy_offset
