from __future__ import annotations

from pathlib import Path

from apogee.broker.locks import RebalanceLockManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.remoting.bodies.heartbeat import QueueKey


def test_offsets_persist_in_rocketmq_shape(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    m = ConsumerOffsetManager(path)
    assert m.query("G", "T", 0) == -1
    m.commit("G", "T", 0, 5)
    m.commit("G", "T", 1, 7)
    m.persist()
    assert b'"T@G"' in path.read_bytes()
    again = ConsumerOffsetManager(path)
    assert again.offsets_of("G", "T") == {0: 5, 1: 7}


def test_offsets_file_written_by_java_is_read(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text('{"offsetTable":{"T@G":{0:5,1:7}}}')
    assert ConsumerOffsetManager(path).query("G", "T", 1) == 7


def test_lock_is_exclusive_until_it_lapses() -> None:
    locks = RebalanceLockManager(max_live_ms=60_000)
    q = QueueKey("T", "b", 0)
    assert locks.try_lock_batch("G", [q], "c1", now_ms=0) == [q]
    assert locks.try_lock_batch("G", [q], "c2", now_ms=30_000) == []
    assert locks.try_lock_batch("G", [q], "c1", now_ms=50_000) == [q]  # renewal
    assert locks.try_lock_batch("G", [q], "c2", now_ms=100_000) == []
    assert locks.try_lock_batch("G", [q], "c2", now_ms=110_001) == [q]  # lapsed
    locks.unlock_batch("G", [q], "c1")  # not the holder: no effect
    assert locks.holder("G", q, 110_002) == "c2"
    locks.unlock_batch("G", [q], "c2")
    assert locks.holder("G", q, 110_003) is None
