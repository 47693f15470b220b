from __future__ import annotations

from pathlib import Path

from apogee.store.checkpoint import StoreCheckpoint, atomic_write


def test_persist_and_load(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.load()  # missing file reads as zeros
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (0, 0, 0)
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 30_000, 20_000, 10_000
    cp.persist()
    data = (tmp_path / "checkpoint").read_bytes()
    assert len(data) == 4096 and data[:8] == (30_000).to_bytes(8, "big")
    again = StoreCheckpoint(tmp_path / "checkpoint")
    again.load()
    assert again.min_timestamp(index_safe=False) == 17_000
    assert again.min_timestamp(index_safe=True) == 7_000
    assert not (tmp_path / "checkpoint.tmp").exists()


def test_atomic_write_replaces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write(path, b"one")
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
