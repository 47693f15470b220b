from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from apogee.common import constants as c
from apogee.common.java_hash import tags_code
from apogee.store import StoreConfig
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.dispatch import DONE, MORE, Dispatcher, FileNeed
from apogee.store.index_service import IndexService
from apogee.store.mapped_file_queue import MappedFileQueue

from .conftest import make_msg


@dataclass
class Parts:
    clog: CommitLog
    queues: ConsumeQueueTable
    index: IndexService
    dispatcher: Dispatcher

    def close(self) -> None:
        self.index.close()
        self.queues.close()
        self.clog.mfq.close()


@pytest.fixture
def parts(store_config: Callable[..., StoreConfig]) -> Iterator[Parts]:
    cfg = store_config()
    clog = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog))
    queues = ConsumeQueueTable(cfg.consume_queue_dir, cfg.mapped_file_size_consume_queue)
    index = IndexService(cfg.index_dir, cfg.max_hash_slot_num, cfg.max_index_num, 64)
    p = Parts(clog, queues, index, Dispatcher(clog, queues, index, clock=lambda: 1_700_000_000_000))
    yield p
    p.close()


def write_mix(clog: CommitLog) -> list:
    out = []
    for i in range(30):
        out.append(clog.put_message(make_msg("A", i % 3, b"x" * (i * 20), tags=f"t{i % 2}",
                                             keys=f"k{i} even{i % 2}", uniq=f"U{i}")))
    out.append(clog.put_message(make_msg("A", 0, keys="prep", sysflag=c.TRANSACTION_PREPARED_TYPE)))
    out.append(clog.put_message(make_msg("A", 0, keys="roll", sysflag=c.TRANSACTION_ROLLBACK_TYPE)))
    out.append(clog.put_message(make_msg("A", 0, keys="commit", sysflag=c.TRANSACTION_COMMIT_TYPE)))
    return out


def snapshot(p: Parts) -> tuple:
    entries = {key: list(cq.iter_entries()) for key, cq in p.queues.queues.items()}
    keys = {k: p.index.query("A", k, 64, 0, 1 << 62)[0] for k in ("k3", "even1", "U7", "prep", "roll", "commit")}
    return entries, keys


@pytest.mark.parametrize("use_hints", [True, False])
def test_builds_queues_and_index(parts: Parts, use_hints: bool) -> None:
    results = write_mix(parts.clog)
    if not use_hints:
        parts.clog.hints.clear()  # as after a restart: decode every record from the log
    n = parts.dispatcher.dispatch_all_inline(parts.clog.max_offset)
    assert n == len(results) and parts.dispatcher.offset == parts.clog.max_offset
    entries, keys = snapshot(parts)
    assert [e[0] for e in entries[("A", 0)]] == list(range(11))
    first = entries[("A", 0)][0]
    assert first[1:] == (results[0].wrote_offset, results[0].wrote_bytes, tags_code("t0"))
    assert keys["k3"] == [results[3].wrote_offset]
    assert keys["even1"] == [results[i].wrote_offset for i in range(29, 0, -2)]  # newest first
    assert keys["U7"] == [results[7].wrote_offset]
    assert keys["prep"] == [results[30].wrote_offset]  # prepared: indexed, not queued
    assert keys["roll"] == []  # rollback: neither
    assert keys["commit"] == [results[32].wrote_offset]
    assert entries[("A", 0)][-1][1] == results[32].wrote_offset


def test_hint_and_log_paths_agree(parts: Parts, store_config: Callable[..., StoreConfig], tmp_path) -> None:
    write_mix(parts.clog)
    parts.dispatcher.dispatch_all_inline(parts.clog.max_offset)
    with_hints = snapshot(parts)
    cfg = store_config(store_path_root_dir=str(tmp_path / "other"))
    queues = ConsumeQueueTable(cfg.consume_queue_dir, cfg.mapped_file_size_consume_queue)
    index = IndexService(cfg.index_dir, cfg.max_hash_slot_num, cfg.max_index_num, 64)
    parts.clog.hints.clear()
    other = Dispatcher(parts.clog, queues, index, clock=lambda: 1_700_000_000_000)
    other.dispatch_all_inline(parts.clog.max_offset)
    assert snapshot(Parts(parts.clog, queues, index, other)) == with_hints
    index.close()
    queues.close()


def test_file_needs_budget_and_limit(parts: Parts) -> None:
    results = [parts.clog.put_message(make_msg("B", 0, keys="k")) for _ in range(5)]
    d = parts.dispatcher
    need = d.dispatch(parts.clog.max_offset, 100)
    assert isinstance(need, FileNeed) and "consume queue B-0" in repr(need)
    need.attach(need.create())
    need = d.dispatch(parts.clog.max_offset, 100)
    assert isinstance(need, FileNeed) and "index" in need.what
    need.attach(need.create())
    assert d.dispatch(parts.clog.max_offset, 2) == MORE and d.dispatched == 2
    limit = results[3].wrote_offset  # e.g. the SYNC_FLUSH durable end
    assert d.dispatch(limit, 100) == DONE and d.offset == limit
    assert parts.queues.get("B", 0).max_offset == 3
    assert d.dispatch(parts.clog.max_offset, 100) == DONE and parts.queues.get("B", 0).max_offset == 5


def test_listeners(parts: Parts, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple] = []
    parts.dispatcher.listeners.append(lambda *a: seen.append(a))
    parts.dispatcher.listeners.append(lambda *a: 1 / 0)
    parts.clog.put_message(make_msg("L", 2, tags="TagA"))
    parts.clog.put_message(make_msg("L", 2, sysflag=c.TRANSACTION_PREPARED_TYPE))
    parts.clog.put_message(make_msg("L", 2, tags="TagB"))
    d = parts.dispatcher
    while (r := d.dispatch(parts.clog.max_offset, 100)) != DONE:
        r.attach(r.create())
    assert seen == [("L", 2, 1, tags_code("TagA"), "TAGS\x01TagA"), ("L", 2, 2, tags_code("TagB"), "TAGS\x01TagB")]
    assert "arrival listener" in caplog.text


def test_skips_blank_records_between_files(parts: Parts) -> None:
    for _ in range(12):
        parts.clog.put_message(make_msg("F", 0, b"z" * 700))
    assert len(parts.clog.mfq.files) >= 3
    parts.clog.hints.clear()
    parts.dispatcher.dispatch_all_inline(parts.clog.max_offset)
    assert parts.queues.get("F", 0).max_offset == 12
