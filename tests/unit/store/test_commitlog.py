from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apogee.common import constants as c
from apogee.common import message_codec as mc
from apogee.common.java_hash import tags_code
from apogee.store import InnerBatch, PutStatus, StoreConfig
from apogee.store.commitlog import CommitLog
from apogee.store.mapped_file_queue import MappedFileQueue

from .conftest import make_msg


@pytest.fixture
def clog(store_config: Callable[..., StoreConfig]) -> Iterator[CommitLog]:
    cfg = store_config()
    times = iter(range(1_000_000, 2_000_000, 10))
    log = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog),
                    clock=lambda: next(times))
    yield log
    log.mfq.close()


def test_records_are_rocketmq_records_with_assigned_fields(clog: CommitLog) -> None:
    r1 = clog.put_message(make_msg("T", 1, b"a", tags="TagA", keys="k1 k2", uniq="U1"))
    r2 = clog.put_message(make_msg("T", 1, b"bb"))
    r3 = clog.put_message(make_msg("T", 2, b"c"))
    assert [r.status for r in (r1, r2, r3)] == [PutStatus.PUT_OK] * 3
    assert (r1.wrote_offset, r1.logics_offset) == (0, 0)
    assert (r2.wrote_offset, r2.logics_offset) == (r1.wrote_bytes, 1)
    assert r3.logics_offset == 0
    assert r1.msg_id == mc.create_offset_msg_id("10.0.0.1", 10911, 0)
    view = clog.get_message(r2.wrote_offset, r2.wrote_bytes)
    m = mc.decode_record(view)
    view.release()
    assert (m.topic, m.queue_id, m.body, m.queue_offset, m.commit_log_offset) == ("T", 1, b"bb", 1, r2.wrote_offset)
    assert m.store_timestamp == r2.store_timestamp and m.born_host == ("10.0.0.2", 5000)
    assert m.store_host == ("10.0.0.1", 10911)
    hint = clog.hints[0]
    assert hint[:8] == (0, r1.wrote_bytes, "T", 1, 0, tags_code("TagA"), r1.store_timestamp, 0)
    assert mc.parse_properties(hint[8]) == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}
    assert clog.topic_queue_table == {("T", 1): 2, ("T", 2): 1}


def test_dict_properties_are_serialised(clog: CommitLog) -> None:
    r = clog.put_message(make_msg("T", 0, b"x", tags="A", keys="k", as_dict=True))
    rec = clog.get_record(r.wrote_offset)
    m = mc.decode_record(rec)
    rec.release()
    assert m.properties == {"TAGS": "A", "KEYS": "k"} and clog.hints[-1][5] == tags_code("A")


def test_rolls_to_next_file_with_blank_record(clog: CommitLog) -> None:
    size = clog.file_size
    results = [clog.put_message(make_msg("T", 0, b"x" * 500)) for _ in range(20)]
    assert all(r.ok for r in results)
    assert len(clog.mfq.files) > 2
    first = clog.mfq.files[0]
    last_in_first = max(r.wrote_offset + r.wrote_bytes for r in results if r.wrote_offset < size)
    blank_size, magic = struct.unpack_from(">ii", first.mm, last_in_first)
    assert magic == mc.BLANK_MAGIC_CODE and blank_size == size - last_in_first
    assert first.wrote == size
    nxt = next(r for r in results if r.wrote_offset >= size)
    assert nxt.wrote_offset == size  # the record moved whole into the next file
    assert clog.roll_next_file(5) == size
    assert [r.logics_offset for r in results] == list(range(20))
    assert clog.max_offset == results[-1].wrote_offset + results[-1].wrote_bytes


def test_prepared_and_rollback_get_offset_zero(clog: CommitLog) -> None:
    clog.put_message(make_msg("T", 0))
    p = clog.put_message(make_msg("T", 0, sysflag=c.TRANSACTION_PREPARED_TYPE))
    r = clog.put_message(make_msg("T", 0, sysflag=c.TRANSACTION_ROLLBACK_TYPE))
    k = clog.put_message(make_msg("T", 0, sysflag=c.TRANSACTION_COMMIT_TYPE))
    assert (p.logics_offset, r.logics_offset, k.logics_offset) == (0, 0, 1)


@pytest.mark.parametrize(
    ("msg", "status"),
    [
        (make_msg("t" * 128), PutStatus.MESSAGE_ILLEGAL),
        (make_msg("T", body=b"x" * 5000), PutStatus.MESSAGE_ILLEGAL),  # larger than a file
        (make_msg("T", extra={"P": "v" * 40000}), PutStatus.PROPERTIES_SIZE_EXCEEDED),
    ],
)
def test_rejections_leave_the_log_untouched(clog: CommitLog, msg, status) -> None:
    assert clog.put_message(msg).status is status
    assert clog.max_offset == 0 and not clog.hints


def test_max_message_size(store_config: Callable[..., StoreConfig]) -> None:
    cfg = store_config(max_message_size=10)
    log = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, 4096))
    assert log.put_message(make_msg(body=b"x" * 11)).status is PutStatus.MESSAGE_ILLEGAL
    assert log.put_message(make_msg(body=b"x" * 10)).ok
    log.mfq.close()


def test_store_time_never_goes_backwards(store_config: Callable[..., StoreConfig]) -> None:
    cfg = store_config()
    times = iter([5000, 4000, 6000])
    log = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, 4096), clock=lambda: next(times))
    ts = [log.put_message(make_msg()).store_timestamp for _ in range(3)]
    assert ts == [5000, 5000, 6000]
    log.mfq.close()


def test_schedule_topic_tags_code_is_deliver_time(clog: CommitLog) -> None:
    r = clog.put_message(make_msg(c.SCHEDULE_TOPIC, 2, extra={c.DELAY: "3"}))
    assert clog.hints[-1][5] == r.store_timestamp + 10_000
    r = clog.put_message(make_msg(c.SCHEDULE_TOPIC, 2, extra={c.DELAY: "99"}))
    assert clog.hints[-1][5] == r.store_timestamp + 1000


def test_batch_is_contiguous_with_consecutive_offsets(clog: CommitLog) -> None:
    clog.put_message(make_msg("B", 3))
    items = [mc.BatchItem(0, f"m{i}".encode(), f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i}") for i in range(4)]
    batch = InnerBatch("B", 3, items, properties="CLUSTER\x01c1", born_host=("1.2.3.4", 1),
                       store_host=("10.0.0.1", 10911))
    r = clog.put_messages(batch)
    assert r.ok and r.msg_num == 4 and r.logics_offset == 1
    offs = list(r.record_offsets)
    assert offs[0] == r.wrote_offset and len(r.msg_id.split(",")) == 4
    pos = r.wrote_offset
    for i, off in enumerate(offs):
        assert off == pos
        rec = clog.get_record(off)
        m = mc.decode_record(rec)
        rec.release()
        assert m.body == f"m{i}".encode() and m.queue_offset == 1 + i and m.queue_id == 3
        assert m.properties == {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i}", "CLUSTER": "c1"}
        pos += m.store_size
    assert clog.topic_queue_table[("B", 3)] == 5


def test_batch_rules(clog: CommitLog) -> None:
    item = mc.BatchItem(0, b"x", "")
    assert clog.put_messages(InnerBatch("B", 0, [])).status is PutStatus.MESSAGE_ILLEGAL
    prepared = InnerBatch("B", 0, [item], sysflag=c.TRANSACTION_PREPARED_TYPE)
    assert clog.put_messages(prepared).status is PutStatus.MESSAGE_ILLEGAL
    assert clog.put_messages(InnerBatch("B", 0, [item], properties="DELAY\x013")).status is PutStatus.MESSAGE_ILLEGAL
    big = [mc.BatchItem(0, b"x" * 1500, "")] * 3
    assert clog.put_messages(InnerBatch("B", 0, big)).status is PutStatus.MESSAGE_ILLEGAL
    fits = [mc.BatchItem(0, b"x" * 1500, "")] * 2
    clog.put_message(make_msg(body=b"y" * 1500))
    r = clog.put_messages(InnerBatch("B", 0, fits))
    assert r.ok and r.wrote_offset == clog.file_size  # did not fit after the first record: next file


def test_batch_from_body() -> None:
    body = mc.encode_batch([(1, b"a", {"K": "v"}), (2, b"b", "")])
    batch = InnerBatch.from_body("T", 1, body, sysflag=0)
    assert [(i.flag, i.body) for i in batch.items] == [(1, b"a"), (2, b"b")]


def test_reads_of_missing_or_partial_ranges(clog: CommitLog) -> None:
    r = clog.put_message(make_msg())
    assert clog.get_message(r.wrote_offset, r.wrote_bytes + 1) is None
    assert clog.get_message(10**9, 10) is None
    assert clog.get_record(r.wrote_offset + r.wrote_bytes) is None
    assert clog.pickup_store_timestamp(r.wrote_offset, r.wrote_bytes) == r.store_timestamp
    assert clog.pickup_store_timestamp(10**9, 10) == -1


def test_hint_capacity_bounds_memory(clog: CommitLog) -> None:
    clog.hint_capacity = 2
    for _ in range(5):
        clog.put_message(make_msg())
    assert len(clog.hints) == 2


def test_create_failure_is_a_status(clog: CommitLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(start: int, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(clog.mfq, "add_file", boom)
    assert clog.put_message(make_msg()).status is PutStatus.CREATE_MAPPED_FILE_FAILED


def test_nul_in_properties_is_illegal(clog: CommitLog) -> None:
    assert clog.put_message(make_msg(extra={"A": "x\x00y"})).status is PutStatus.MESSAGE_ILLEGAL
    batch = InnerBatch("B", 0, [mc.BatchItem(0, b"x", "A\x01\x00")])
    assert clog.put_messages(batch).status is PutStatus.MESSAGE_ILLEGAL


def test_disk_space_is_reserved_ahead_and_enospc_is_disk_full(
        store_config: Callable[..., StoreConfig], monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    cfg = store_config(mapped_file_size_commitlog=16 << 20, populate_ahead_bytes=1 << 20)
    log = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, 16 << 20, reserve_ahead=1 << 20))
    assert log.put_message(make_msg(body=b"x" * 1000)).ok
    mf = log.mfq.files[0]
    assert mf.reserved >= 1 << 20 and os.stat(mf.path).st_blocks * 512 < 16 << 20
    mf.reserved = mf.wrote  # as if the I/O thread had not got there yet

    def enospc(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", enospc)
    before = log.max_offset
    assert log.put_message(make_msg(body=b"y" * 1000)).status is PutStatus.DISK_FULL
    assert log.max_offset == before  # nothing written past the reserved space
    monkeypatch.undo()
    assert log.put_message(make_msg(body=b"z")).ok
    log.mfq.close()
