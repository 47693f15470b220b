from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from apogee.store.mapped_file import file_name
from apogee.store.mapped_file_queue import MappedFileQueue


def test_growth_lookup_and_flush(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, 4096)
    assert q.find(0) is None and q.max_offset == 0 and q.min_offset == 0
    a = q.add_file(0)
    a.wrote = 4096
    b = q.add_file(4096)
    b.wrote = 100
    assert q.find(0) is a and q.find(4095) is a and q.find(4096) is b and q.find(8192) is None
    assert q.max_offset == 4196 and q.dirty_bytes() == 4196
    assert q.flush() == 4196 and q.flushed_offset == 4196 and q.dirty_bytes() == 0
    with pytest.raises(ValueError):
        q.add_file(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [file_name(0), file_name(4096)]
    q.close()


def test_load_skips_misaligned_and_stops_at_gaps(tmp_path: Path) -> None:
    for start in (0, 4096, 12288):
        (tmp_path / file_name(start)).write_bytes(bytes(4096))
    (tmp_path / file_name(100)).write_bytes(bytes(4096))
    (tmp_path / "notes.txt").write_text("x")
    q = MappedFileQueue(tmp_path, 4096)
    q.load()
    assert [mf.start for mf in q.files] == [0, 4096]
    q.close()


def test_preallocation_on_executor(tmp_path: Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        q = MappedFileQueue(tmp_path, 4096, executor=ex)
        q.add_file(0)
        ex.submit(lambda: None).result()  # let the pre-creation finish
        assert (tmp_path / file_name(4096)).exists()
        b = q.add_file(4096)
        assert b.start == 4096 and len(q) == 2
        q.close()  # discards the unused pre-created third file
    assert not (tmp_path / file_name(8192)).exists()


def test_truncate_and_remove_front(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, 4096)
    for start in (0, 4096, 8192):
        q.add_file(start).wrote = 4096
    removed = q.truncate_to(5000)
    assert [mf.start for mf in removed] == [8192]
    q.destroy_files(removed)
    assert q.max_offset == 5000 and q.files[-1].wrote == 904
    front = q.remove_front(5)  # never the last file
    assert [mf.start for mf in front] == [0] and q.min_offset == 4096
    q.destroy_files(front)
    assert sorted(p.name for p in tmp_path.iterdir()) == [file_name(4096)]
    q.close()


def test_zombies_are_closed_once_slices_go(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path, 4096)
    a = q.add_file(0)
    a.wrote = 4096
    q.add_file(4096)
    view = a.slice(0, 10)
    q.destroy_files(q.remove_front(1))
    assert q.retry_zombies() == 1
    view.release()
    assert q.retry_zombies() == 0
    q.close()
