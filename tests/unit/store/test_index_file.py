from __future__ import annotations

import struct
from pathlib import Path

from apogee.common.java_hash import index_key_hash
from apogee.store.index_file import IndexFile, index_file_name
from apogee.store.index_service import IndexService
from apogee.store.layout import index as lay

SLOTS, NUM = 4, 16  # tiny: chains and collisions everywhere


def new_file(path: Path) -> IndexFile:
    return IndexFile.create(path, SLOTS, NUM)


def test_file_name_format() -> None:
    name = index_file_name(1_700_000_000_123)
    assert len(name) == 17 and name.endswith("123") and name.isdigit()


def test_put_writes_rocketmq_layout(tmp_path: Path) -> None:
    f = new_file(tmp_path / "idx")
    assert f.mf.size == lay.file_size(SLOTS, NUM) and f.index_count == 1
    h = index_key_hash("T#k")
    assert f.put_key(h, 100, 10_000)
    assert f.put_key(h, 200, 12_500)
    mm = f.mf.mm
    assert lay.unpack_header(mm) == (10_000, 12_500, 100, 200, 1, 3)
    slot = lay.slot_position(h % SLOTS)
    assert struct.unpack_from(">i", mm, slot)[0] == 2
    assert lay.unpack_entry(mm, lay.entry_position(SLOTS, 1)) == (h, 100, 0, 0)
    assert lay.unpack_entry(mm, lay.entry_position(SLOTS, 2)) == (h, 200, 2, 1)
    f.mf.close()


def test_select_newest_first_with_time_range_and_limit(tmp_path: Path) -> None:
    f = new_file(tmp_path / "idx")
    hk, hx = index_key_hash("T#k"), index_key_hash("T#x")
    for i in range(6):
        f.put_key(hk if i % 2 == 0 else hx, i * 100, 10_000 + i * 1000)
    out: list[int] = []
    f.select(hk, 10, 0, 1 << 62, out)
    assert out == [400, 200, 0]
    out = []
    f.select(hk, 2, 0, 1 << 62, out)
    assert out == [400, 200]
    out = []
    f.select(hk, 10, 11_000, 13_000, out)
    assert out == [200]
    assert f.is_time_matched(0, 1 << 62) and f.is_time_matched(12_000, 12_500)
    assert not f.is_time_matched(0, 9_000)
    f.mf.close()


def test_full_file_and_consistency(tmp_path: Path) -> None:
    f = new_file(tmp_path / "idx")
    for i in range(NUM - 1):
        assert f.put_key(i, i, 1000)
    assert f.is_full and not f.put_key(1, 1, 1) and f.room == 0
    assert f.is_consistent()
    struct.pack_into(">i", f.mf.mm, lay.slot_position(1), NUM + 5)  # slot beyond the entries
    assert not f.is_consistent()
    f.mf.close()


def test_reload_and_clamp(tmp_path: Path) -> None:
    f = new_file(tmp_path / "idx")
    f.put_key(1, 500, 1000)
    f.mf.close()
    g = IndexFile.load(tmp_path / "idx", SLOTS, NUM)
    assert (g.index_count, g.end_phy, g.begin_ts) == (2, 500, 1000)
    g.clamp_end(300)
    assert g.end_phy == 299
    g.mf.close()


def service(tmp_path: Path) -> IndexService:
    return IndexService(tmp_path / "index", SLOTS, NUM, max_query_num=64)


def build(svc: IndexService, topic: str, keys: str | None, uniq: str | None, phys: int, ts: int) -> None:
    while not svc.build(topic, keys, uniq, phys, ts):
        svc.attach(svc.create_file(svc.new_file_path(ts)))


def test_service_builds_across_files_and_queries(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert svc.build("T", None, None, 0, 1000)  # nothing to index: no file needed
    assert not svc.build("T", "a", None, 0, 1000)  # needs a file first
    for i in range(20):
        build(svc, "T", f"k{i % 3} all", f"U{i}", i * 10, 1000 + i)
    assert len(svc.files) > 2
    offsets, last_ts, last_phy = svc.query("T", "all", 64, 0, 1 << 62)
    assert offsets == [i * 10 for i in range(19, -1, -1)]
    assert (last_ts, last_phy) == (1019, 190)
    assert svc.query("T", "U7", 64, 0, 1 << 62)[0] == [70]
    assert svc.query("T", "k1", 3, 0, 1 << 62)[0] == [190, 160, 130]
    assert svc.query("Other", "all", 64, 0, 1 << 62)[0] == []
    files = svc.files
    assert all(a.name < b.name for a, b in zip(files, files[1:], strict=False))
    assert files[1].begin_phy >= files[0].end_phy  # a new file continues the previous one


def test_service_skips_already_indexed_and_rollback_is_callers_job(tmp_path: Path) -> None:
    svc = service(tmp_path)
    build(svc, "T", "a", None, 0, 1000)
    build(svc, "T", "a", None, 50, 1000)
    count = svc.files[-1].index_count
    build(svc, "T", "a", None, 50, 1000)  # repeated dispatch after recovery
    build(svc, "T", "a", None, 0, 1000)
    assert svc.files[-1].index_count == count


def test_service_load_after_crash_drops_inconsistent_files(tmp_path: Path) -> None:
    svc = service(tmp_path)
    for i in range(20):
        build(svc, "T", "k", None, i * 10, 1000 + i)
    names = [f.name for f in svc.files]
    bad = svc.files[0]
    struct.pack_into(">i", bad.mf.mm, lay.slot_position(0), NUM + 1)
    svc.close()
    again = service(tmp_path)
    again.load(clean_shutdown=False, commitlog_end=125)
    assert [f.name for f in again.files] == names[1:]
    assert again.files[-1].end_phy == 124
    expired = again.take_expired(10**6)
    assert len(expired) == len(names) - 2 and len(again.files) == 1
    again.destroy_files(expired)
    again.close()
    assert len(list((tmp_path / "index").iterdir())) == 1


def test_same_slot_twice_in_one_message_chains(tmp_path: Path) -> None:
    f = new_file(tmp_path / "idx")
    assert f.put_keys([1, 1 + SLOTS, 2], 700, 5000) == 3
    assert f.slot_count == 2 and f.index_count == 4
    out: list[int] = []
    f.select(1 + SLOTS, 10, 0, 1 << 62, out)
    assert out == [700]
    prev = lay.unpack_entry(f.mf.mm, lay.entry_position(SLOTS, 2))[3]
    assert prev == 1  # the second key of slot 1 links to the first
    assert f.put_keys([], 1, 1) == 0
    f.mf.close()
