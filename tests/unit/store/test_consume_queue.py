from __future__ import annotations

from pathlib import Path

import pytest

from apogee.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from apogee.store.layout.cq_unit import BLANK_SIZE, CQ_UNIT
from apogee.store.mapped_file import MappedFile

FILE = 8 * 20  # eight entries per file


def put(cq: ConsumeQueue, phys: int, size: int, tags: int, qoff: int) -> None:
    """What the dispatcher does: create files (inline here) until the put goes through."""
    while not cq.put(phys, size, tags, qoff):
        start = cq.file_start_for(qoff)
        cq.attach(MappedFile.create(cq.mfq.path_for(start), start, FILE), qoff)


def fill(cq: ConsumeQueue, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        put(cq, i * 100, 100, i, i)


def test_entries_cross_files(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path / "T" / "0", FILE)
    assert cq.max_offset == 0 and cq.min_offset == 0 and not cq.put(0, 1, 0, 0)
    fill(cq, 20)
    assert cq.max_offset == 20 and len(cq.mfq.files) == 3 and cq.max_phys_end == 2000
    assert cq.get_entry(9) == (900, 100, 9) and cq.get_entry(20) is None
    buf = cq.get_index_buffer(5)
    assert [u[0] for u in CQ_UNIT.iter_unpack(buf)] == [500, 600, 700]  # to the end of its file
    buf.release()
    assert cq.get_index_buffer(20) is None
    assert cq.roll_next_file(5) == 8
    assert [e[0] for e in cq.iter_entries(6)] == list(range(6, 20))
    put(cq, 500, 100, 5, 5)  # repeated dispatch: no change
    assert cq.get_entry(5) == (500, 100, 5) and cq.max_offset == 20
    cq.mfq.close()


def test_gap_is_written_at_its_offset(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    fill(cq, 2)
    put(cq, 900, 10, 0, 4)
    assert cq.max_offset == 5 and cq.get_entry(4) == (900, 10, 0) and cq.get_entry(3) == (0, 0, 0)
    assert "missing" in caplog.text
    cq.mfq.close()


def test_queue_starting_past_zero_gets_pre_blank(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    put(cq, 5000, 50, 1, 11)
    assert cq.mfq.files[0].start == FILE and cq.min_offset == 11 and cq.max_offset == 12
    assert CQ_UNIT.unpack_from(cq.mfq.files[0].mm, 0) == (0, BLANK_SIZE, 0)
    cq.mfq.close()
    again = ConsumeQueue("T", 0, tmp_path, FILE)
    again.mfq.load()
    again.recover(10**9, thorough=True)
    assert (again.min_offset, again.max_offset) == (11, 12)
    again.mfq.close()


@pytest.mark.parametrize("thorough", [False, True])
def test_recover_finds_the_end(tmp_path: Path, thorough: bool) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    fill(cq, 13)
    cq.mfq.close()
    again = ConsumeQueue("T", 0, tmp_path, FILE)
    again.mfq.load()
    again.recover(10**9, thorough=thorough)
    assert again.max_offset == 13 and again.max_phys_end == 1300
    again.mfq.close()


def test_thorough_recover_cuts_at_bad_entry_and_zeroes_the_rest(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    fill(cq, 20)
    last = cq.mfq.files[-1]
    CQ_UNIT.pack_into(last.mm, 20, 1, 0, 0)  # entry 17: size 0
    cq.mfq.close()
    again = ConsumeQueue("T", 0, tmp_path, FILE)
    again.mfq.load()
    again.recover(10**9, thorough=True)
    assert again.max_offset == 17
    assert bytes(again.mfq.files[-1].mm[20:]) == bytes(FILE - 20)  # stale entries gone
    again.mfq.close()


def test_recover_drops_entries_past_commitlog_end(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    fill(cq, 20)
    assert cq.truncate_dirty(1250) == 8  # entries 12.. end past 1250 (entry 12 ends at 1300)
    assert cq.max_offset == 12 and cq.max_phys_end == 1200 and len(cq.mfq.files) == 2
    cq.mfq.close()
    again = ConsumeQueue("T", 0, tmp_path, FILE)
    again.mfq.load()
    again.recover(1250, thorough=False)
    assert again.max_offset == 12
    again.mfq.close()


def test_min_offset_and_expired_files(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, FILE)
    fill(cq, 20)
    cq.correct_min_offset(1050)
    assert cq.min_offset == 11  # first entry at or past 1050 is in the second file
    assert cq.get_entry(10) is None
    assert cq.expired_files(1050) == 1 and cq.expired_files(2000) == 2 and cq.expired_files(0) == 0
    cq.mfq.destroy_files(cq.mfq.remove_front(cq.expired_files(1050)))
    assert cq.min_offset == 11 and cq.get_entry(11) == (1100, 100, 11)
    cq.mfq.close()


def test_table_load_offsets_and_flush(tmp_path: Path) -> None:
    table = ConsumeQueueTable(tmp_path, FILE)
    fill(table.get_or_create("A", 0), 3)
    fill(table.get_or_create("B", 2), 9)
    assert table.get("A", 0) is table.get_or_create("A", 0) and table.get("A", 1) is None
    ConsumeQueueTable.flush(table.snapshot(), 0)
    assert table.max_phys_end() == 900
    table.close()
    again = ConsumeQueueTable(tmp_path, FILE)
    again.load()
    again.recover(10**9, thorough=False)
    assert again.offset_table() == {("A", 0): 3, ("B", 2): 9}
    again.close()
