"""Issue 16: no acknowledged message is hidden by a bad ConsumeQueue entry, a failed put takes no
queue offset, and a crash recovery starts from the last safe point, not from the log's start.

Real MessageStores in a temporary directory; "a crash" is a copy of the running store's files
(abort file and all), which is what a SIGKILL leaves since the page cache survives it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.store import InnerBatch, MessageStore, PlainMessage, PutStatus
from apogee.store.checkpoint import AbortMark, StoreCheckpoint
from apogee.store.layout import abort_mark
from apogee.store.layout.cq_unit import CQ_UNIT, CQ_UNIT_SIZE
from apogee.store.message_store import MARK_EVERY_RECORDS

from .conftest import bodies, crash_copy, make_msg

BIG = {"mapped_file_size_commitlog": 1 << 20, "mapped_file_size_consume_queue": 4000 * CQ_UNIT_SIZE,
       "max_hash_slot_num": 1000, "max_index_num": 20_000}


def body(i: int) -> bytes:
    return f"m{i:05d}".encode() * 3


def cq_entry(store: MessageStore, topic: str, queue_id: int, offset: int) -> tuple[int, int, int]:
    entry = store.consume_queues.get(topic, queue_id).get_entry(offset)  # type: ignore[union-attr]
    assert entry is not None
    return entry


def poke_entry(store: MessageStore, topic: str, queue_id: int, offset: int, phys: int, size: int) -> None:
    """Overwrite one ConsumeQueue entry in place (what a torn write or an old failed put left)."""
    cq = store.consume_queues.get(topic, queue_id)
    assert cq is not None
    mf = cq.mfq.find(offset * CQ_UNIT_SIZE)
    assert mf is not None
    CQ_UNIT.pack_into(mf.mm, offset * CQ_UNIT_SIZE - mf.start, phys, size, 0)


# --- a put that fails takes no queue offset ------------------------------------------------------


@pytest.mark.parametrize("field", ["flag", "reconsume_times", "born_timestamp", "prepared_transaction_offset"])
async def test_a_put_with_a_field_out_of_range_leaves_no_hole(open_store, field: str) -> None:
    store = await open_store(**BIG)
    assert (await store.put_message(make_msg("H", 0, body(0)))).logics_offset == 0
    bad = make_msg("H", 0, b"bad")
    setattr(bad, field, 2**31 if field in ("flag", "reconsume_times") else 2**63)
    result = await store.put_message(bad)
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert store.next_queue_offset("H", 0) == 1
    end = store.max_phy_offset
    last = store.commitlog.mfq.files[-1]
    assert last.last_nonzero(end - last.start) == end - last.start  # nothing left past the end
    for i in range(1, 51):
        assert (await store.put_message(make_msg("H", 0, body(i)))).logics_offset == i
    await store.wait_dispatched()
    assert bodies(store, "H", 0) == [body(i) for i in range(51)]


async def test_a_batch_with_a_field_out_of_range_leaves_no_hole(open_store) -> None:
    store = await open_store(**BIG)
    items = [(0, body(i), "TAGS\x01a") for i in range(3)]
    ok = InnerBatch("B", 0, [mc.BatchItem(*it) for it in items])
    assert (await store.put_messages(ok)).logics_offset == 0
    bad = InnerBatch("B", 0, [mc.BatchItem(*it) for it in items], reconsume_times=2**31)
    assert (await store.put_messages(bad)).status is PutStatus.MESSAGE_ILLEGAL
    bad = InnerBatch("B", 0, [mc.BatchItem(2**31, b"x", "")])
    assert (await store.put_messages(bad)).status is PutStatus.MESSAGE_ILLEGAL
    assert store.next_queue_offset("B", 0) == 3 and len(store.commitlog.hints) <= 3
    assert (await store.put_messages(ok)).logics_offset == 3
    await store.wait_dispatched()
    assert bodies(store, "B", 0) == [body(i) for i in range(3)] * 2


@pytest.mark.skipif(native is None, reason="apogee._native is not built")
async def test_the_c_paths_with_a_field_out_of_range_leave_no_hole(open_store) -> None:
    store = await open_store(**BIG)
    extra = b"CLUSTER\x01c"

    def plain(i: int, reconsume: int) -> PlainMessage:
        props = b"TAGS\x01a"
        return PlainMessage("C", 0, body(i), props, extra, native.scan_single(props, extra), 0, 0, 1,
                            ("10.0.0.2", 1), ("10.0.0.1", 2), reconsume)

    assert store.put_plain_nowait(plain(0, 0))[0].logics_offset == 0
    assert store.put_plain_nowait(plain(1, 2**31))[0].status is PutStatus.MESSAGE_ILLEGAL
    raw = mc.encode_batch_py([(0, body(1), "TAGS\x01a"), (0, body(2), "")])
    scan = native.scan_batch(raw, extra, 4096)
    bad = InnerBatch("C", 0, [], "CLUSTER\x01c", reconsume_times=2**31, raw=raw, raw_scan=scan)
    assert store.put_messages_nowait(bad)[0].status is PutStatus.MESSAGE_ILLEGAL
    good = InnerBatch("C", 0, [], "CLUSTER\x01c", raw=raw, raw_scan=scan)
    assert store.put_messages_nowait(good)[0].logics_offset == 1
    await store.wait_dispatched()
    assert bodies(store, "C", 0) == [body(0), body(1), body(2)]


# --- a bad entry hides nothing ---------------------------------------------------------------------


async def test_a_zero_entry_in_the_middle_of_a_file_hides_nothing(open_store, caplog) -> None:
    store = await open_store(**BIG)
    for i in range(30):
        await store.put_message(make_msg("Z", 0, body(i)))
    await store.wait_dispatched()
    poke_entry(store, "Z", 0, 5, 0, 0)  # a hole, as a failed put left one before the fix
    caplog.set_level(logging.WARNING, logger="apogee.store.reads")
    r = store.get_message("g", "Z", 0, 0, 32)
    assert r.queue_offsets == [i for i in range(30) if i != 5] and r.next_begin_offset == 30
    assert [m.body for m in mc.decode_records(b"".join(r.buffers))] == [body(i) for i in range(30) if i != 5]
    r.release()
    r = store.get_message("g", "Z", 0, 5, 32)  # starting on the hole
    assert r.queue_offsets == list(range(6, 30)) and r.next_begin_offset == 30
    r.release()
    assert any("Z-0: ConsumeQueue entry 5" in rec.getMessage() for rec in caplog.records)
    assert store.reader.bad_entries == 1


async def test_an_entry_pointing_past_the_log_is_stepped_over_not_jumped(open_store) -> None:
    store = await open_store(**BIG)
    for i in range(10):
        await store.put_message(make_msg("P", 0, body(i)))
    await store.wait_dispatched()
    poke_entry(store, "P", 0, 3, store.max_phy_offset + 4096, 100)
    r = store.get_message("g", "P", 0, 0, 32)
    assert r.queue_offsets == [0, 1, 2, 4, 5, 6, 7, 8, 9] and r.next_begin_offset == 10
    r.release()


async def test_an_old_entry_pointing_inside_a_record_is_stepped_over(open_store, store_config) -> None:
    store = await open_store(**BIG)
    for i in range(10):
        await store.put_message(make_msg("G", i % 2, body(i)))
    await store.shutdown()
    again = await open_store(**BIG)  # the entries are now older than this process
    e4 = cq_entry(again, "G", 0, 2)  # body(4)
    poke_entry(again, "G", 0, 2, e4[0] + 7, e4[1])  # inside the record
    await again.put_message(make_msg("G", 0, body(10)))  # a new entry after the old ones
    await again.wait_dispatched()
    r = again.get_message("g", "G", 0, 0, 32)  # one pull: the old entries checked, the new one too
    assert r.queue_offsets == [0, 1, 3, 4, 5] and r.next_begin_offset == 6
    assert [m.body for m in mc.decode_records(b"".join(r.buffers))] == [body(i) for i in (0, 2, 6, 8, 10)]
    r.release()


# --- recovery starts at the safe point and rebuilds what follows ------------------------------------


async def fill_many(store: MessageStore, n: int, queues: int = 4) -> None:
    for i in range(n):
        store.put_message_nowait(make_msg("S", i % queues, body(i), keys=f"k{i}"))
        if i % 256 == 0:
            await store.wait_dispatched()
    await store.wait_dispatched()


async def test_crash_recovery_starts_at_the_abort_mark(open_store, tmp_path) -> None:
    store = await open_store(**BIG)
    n = 3 * MARK_EVERY_RECORDS + 100
    await fill_many(store, n)
    mark = store.abort_mark.offset
    assert 0 < mark <= store.max_phy_offset
    root = crash_copy(store, tmp_path / "crashed")
    assert AbortMark.read(root / "abort") == mark
    again = await open_store(store_path_root_dir=str(root), **BIG)
    rep = again.recovery
    assert not rep.clean_shutdown and rep.start_offset == mark
    assert rep.records < MARK_EVERY_RECORDS + 100 < n  # only what came after the mark was scanned
    for q in range(4):
        assert bodies(again, "S", q) == [body(i) for i in range(q, n, 4)]
        assert again.next_queue_offset("S", q) == len(range(q, n, 4))
    assert again.query_message("S", f"k{n - 1}", 4, 0, 1 << 62).message_count == 1


async def test_crash_recovery_rebuilds_garbage_entries_after_the_safe_point(open_store, tmp_path) -> None:
    store = await open_store(**BIG)
    n = MARK_EVERY_RECORDS + 500
    await fill_many(store, n, queues=1)
    mark = store.abort_mark.offset
    after = [q for q in range(n) if cq_entry(store, "S", 0, q)[0] >= mark]
    assert len(after) > 100
    poke_entry(store, "S", 0, after[10], 0, 0)  # torn: zero
    poke_entry(store, "S", 0, after[20], cq_entry(store, "S", 0, after[20])[0] + 3, 77)  # garbage
    root = crash_copy(store, tmp_path / "crashed")
    again = await open_store(store_path_root_dir=str(root), **BIG)
    assert again.recovery.start_offset == mark
    assert bodies(again, "S", 0) == [body(i) for i in range(n)]
    cq = again.consume_queues.get("S", 0)
    for qoff, phys, size, _ in cq.iter_entries():  # type: ignore[union-attr]
        assert again.commitlog.record_matches(phys, size, "S", 0, qoff)


async def test_a_hole_no_record_can_fill_is_kept_and_stepped_over(open_store, tmp_path, caplog) -> None:
    store = await open_store(**BIG)
    for i in range(20):
        await store.put_message(make_msg("K", 0, body(i)))
    await store.wait_dispatched()
    # what a put that failed after taking offset 20 left before the fix: the next record has 21
    store.commitlog.topic_queue_table[("K", 0)] = 21
    for i in range(21, 30):
        await store.put_message(make_msg("K", 0, body(i)))
    await store.wait_dispatched()
    root = crash_copy(store, tmp_path / "crashed")
    caplog.set_level(logging.INFO)
    again = await open_store(store_path_root_dir=str(root), **BIG)
    assert any("offsets 20..20 hold no message" in r.getMessage() for r in caplog.records)
    assert again.get_max_offset_in_queue("K", 0) == 30
    assert bodies(again, "K", 0) == [body(i) for i in range(30) if i != 20]


async def test_power_loss_recovery_starts_at_the_durable_checkpoint(open_store, tmp_path) -> None:
    store = await open_store(flush_interval_consume_queue_ms=10, flush_consume_queue_thorough_interval_ms=0,
                             **BIG)
    n = MARK_EVERY_RECORDS + 300
    await fill_many(store, n)
    await store.flush()
    end = store.max_phy_offset
    on_disk = StoreCheckpoint(store.config.checkpoint_path)
    for _ in range(500):  # the logic flush loop (every 10 ms here) writes the checkpoint
        await store.io.run(on_disk.load)
        if on_disk.safe_offset == end:
            break
        await asyncio.sleep(0.01)
    assert on_disk.safe_offset == end
    root = crash_copy(store, tmp_path / "crashed")
    (root / "abort").write_bytes(abort_mark.pack_mark(b"another boot", 0))  # the page cache is gone
    assert AbortMark.read(root / "abort") == -1
    again = await open_store(store_path_root_dir=str(root), **BIG)
    assert again.recovery.start_offset == end and again.recovery.records == 0
    assert bodies(again, "S", 1) == [body(i) for i in range(1, n, 4)]


async def test_clean_shutdown_removes_the_abort_mark_and_keeps_the_checkpoint(open_store) -> None:
    store = await open_store(**BIG)
    await fill_many(store, 100)
    end = store.max_phy_offset
    await store.shutdown()
    assert not store.config.abort_path.exists()
    again = await open_store(**BIG)
    assert again.recovery.clean_shutdown and again.checkpoint.safe_offset == end
