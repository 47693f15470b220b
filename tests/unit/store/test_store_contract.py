"""One contract for the store, run under both flush types and with files small enough that
every test crosses CommitLog and ConsumeQueue file boundaries."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from apogee.common import message_codec as mc
from apogee.store import FlushDiskType, GetStatus, InnerBatch, MessageStore
from apogee.store.time_search import Boundary

from .conftest import crash_copy, make_msg

PROFILES: dict[str, dict[str, Any]] = {
    "tiny": {"mapped_file_size_commitlog": 4096, "mapped_file_size_consume_queue": 8 * 20,
             "max_hash_slot_num": 16, "max_index_num": 32},
    "small": {"mapped_file_size_commitlog": 64 * 1024, "mapped_file_size_consume_queue": 16 * 20,
              "max_hash_slot_num": 64, "max_index_num": 500},
}


@pytest.fixture(params=[(f, p) for f in FlushDiskType for p in PROFILES], ids=lambda v: f"{v[0].name}-{v[1]}")
def variant(request: pytest.FixtureRequest) -> tuple[FlushDiskType, dict[str, Any]]:
    flush, profile = request.param
    return flush, PROFILES[profile]


@pytest.fixture
async def store(open_store, variant) -> MessageStore:  # type: ignore[no-untyped-def]
    flush, profile = variant
    return await open_store(flush, **profile)


def read_queue(store: MessageStore, topic: str, qid: int) -> list[Any]:
    out, offset = [], 0
    while True:
        res = store.get_message("g", topic, qid, offset, 32)
        if res.status is not GetStatus.FOUND:
            assert res.status is GetStatus.OFFSET_OVERFLOW_ONE or res.max_offset == 0, res
            return out
        msgs = mc.decode_records(b"".join(res.buffers))
        assert [m.queue_offset for m in msgs] == res.queue_offsets
        out.extend(msgs)
        offset = res.next_begin_offset
        res.release()


async def write_workload(store: MessageStore, n: int = 200, seed: int = 7) -> dict[tuple[str, int], list[bytes]]:
    rnd = random.Random(seed)
    expected: dict[tuple[str, int], list[bytes]] = {}
    pending = []
    for i in range(n):
        topic, qid = rnd.choice(["A", "B", "%RETRY%g"]), rnd.randrange(3)
        body = bytes([i % 256]) * rnd.randrange(0, 700)
        if rnd.random() < 0.1:
            items = [mc.BatchItem(0, body + bytes([k]), f"KEYS\x01b{i}-{k}") for k in range(3)]
            pending.append(store.put_messages(InnerBatch(topic, qid, items)))
            expected.setdefault((topic, qid), []).extend(it.body for it in items)
        else:
            msg = make_msg(topic, qid, body, tags=f"t{i % 3}", keys=f"key{i}", uniq=f"U{i}")
            pending.append(store.put_message(msg))
            expected.setdefault((topic, qid), []).append(body)
        if len(pending) >= 16:
            assert all(r.ok for r in await asyncio.gather(*pending))
            pending.clear()
    assert all(r.ok for r in await asyncio.gather(*pending))
    await store.wait_dispatched()
    return expected


def check_all(store: MessageStore, expected: dict[tuple[str, int], list[bytes]]) -> None:
    for (topic, qid), bodies in expected.items():
        msgs = read_queue(store, topic, qid)
        assert [m.body for m in msgs] == bodies
        assert [m.queue_offset for m in msgs] == list(range(len(bodies)))
        assert all(m.topic == topic and m.queue_id == qid for m in msgs)
        assert store.get_max_offset_in_queue(topic, qid) == len(bodies)


async def test_everything_written_is_read_back_in_order(store: MessageStore) -> None:
    expected = await write_workload(store)
    assert len(store.commitlog.mfq.files) > 1
    assert any(len(cq.mfq.files) > 1 for cq in store.consume_queues.queues.values())
    check_all(store, expected)


async def test_restart_keeps_everything_and_continues(open_store, variant) -> None:
    flush, profile = variant
    store = await open_store(flush, **profile)
    expected = await write_workload(store)
    await store.shutdown()
    again = await open_store(flush, **profile)
    check_all(again, expected)
    r = await again.put_message(make_msg("A", 0, b"more"))
    assert r.logics_offset == len(expected[("A", 0)])


async def test_crash_copy_keeps_every_acknowledged_put(open_store, variant, tmp_path) -> None:
    flush, profile = variant
    store = await open_store(flush, **profile)
    expected = await write_workload(store)
    if flush is FlushDiskType.ASYNC_FLUSH:
        await store.flush()
    root = crash_copy(store, tmp_path / "crashed")
    again = await open_store(flush, store_path_root_dir=str(root), **profile)
    assert not again.recovery.clean_shutdown and again.recovery.dropped_bytes == 0
    check_all(again, expected)


async def test_keys_times_and_offsets(store: MessageStore) -> None:
    await write_workload(store, n=60)
    found = [store.query_message(t, "key10", 64, 0, 1 << 62) for t in ("A", "B", "%RETRY%g")]
    hits = [mc.decode_record(b) for r in found for b in r.buffers]
    assert len(hits) == 1 and hits[0].properties["KEYS"] == "key10"
    for (topic, qid) in list(store.consume_queues.queues):
        n = store.get_max_offset_in_queue(topic, qid)
        assert store.get_min_offset_in_queue(topic, qid) == 0
        ts = store.get_message_store_timestamp(topic, qid, n - 1)
        assert store.get_offset_in_queue_by_time(topic, qid, ts) <= n - 1
        assert store.get_offset_in_queue_by_time(topic, qid, ts + 1) == n - 1  # RocketMQ 4.9.8
        assert store.get_offset_in_queue_by_time(topic, qid, ts + 1, Boundary.LOWER) == n


async def test_concurrent_writers_get_unique_consecutive_offsets(store: MessageStore) -> None:
    async def writer(k: int) -> list[int]:
        out = []
        for i in range(25):
            r = await store.put_message(make_msg("W", 0, f"{k}-{i}".encode()))
            assert r.ok
            out.append(r.logics_offset)
        return out

    offsets = sorted(o for chunk in await asyncio.gather(*(writer(k) for k in range(8))) for o in chunk)
    assert offsets == list(range(200))
    await store.wait_dispatched()
    assert len(read_queue(store, "W", 0)) == 200
