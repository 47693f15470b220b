from __future__ import annotations

import itertools

import pytest

from apogee.common import message_codec as mc
from apogee.common.java_hash import tags_code
from apogee.store import GetStatus, TagCodeFilter
from apogee.store.consume_queue import ConsumeQueue
from apogee.store.time_search import Boundary

from .conftest import make_msg


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1000
        return self.now


async def filled(open_store, n: int = 20, **kw):  # type: ignore[no-untyped-def]
    clock = Clock()
    store = await open_store(store_kwargs={"clock": clock}, **kw)
    for i in range(n):
        await store.put_message(make_msg("R", 0, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd",
                                         keys=f"k{i}", uniq=f"U{i}"))
    await store.wait_dispatched()
    return store, clock


async def test_status_table(open_store) -> None:
    store, _ = await filled(open_store)
    r = store.get_message("g", "nope", 0, 5, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
    store.consume_queues.get_or_create("E", 0)
    r = store.get_message("g", "E", 0, 5, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    r = store.get_message("g", "R", 0, 20, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 20, 0, 20)
    r = store.get_message("g", "R", 0, 25, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 20)  # to max, as 4.9.8
    cq = store.consume_queues.get("R", 0)
    cq.min_logic_offset = 3 * 20
    r = store.get_message("g", "R", 0, 25, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 20)
    r = store.get_message("g", "R", 0, 1, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 3)


async def test_found_stops_at_consume_queue_file_end(open_store) -> None:
    store, _ = await filled(open_store)
    r = store.get_message("g", "R", 0, 2, 32)  # 8 entries per ConsumeQueue file in these tests
    assert r.status is GetStatus.FOUND and r.queue_offsets == [2, 3, 4, 5, 6, 7]
    assert r.next_begin_offset == 8 and r.buffer_total_size == sum(len(b) for b in r.buffers)
    msgs = mc.decode_records(b"".join(r.buffers))
    assert [m.body for m in msgs] == [f"m{i}".encode() for i in range(2, 8)]
    assert [m.queue_offset for m in msgs] == r.queue_offsets
    r.release()
    assert r.message_count == 0


async def test_limits(open_store) -> None:
    store, _ = await filled(open_store)
    r = store.get_message("g", "R", 0, 0, 3)
    assert r.queue_offsets == [0, 1, 2] and r.next_begin_offset == 3
    one = len(store.get_message("g", "R", 0, 0, 1).buffers[0])
    r = store.get_message("g", "R", 0, 0, 32, max_total_bytes=2 * one + 1)
    assert r.queue_offsets == [0, 1] and r.next_begin_offset == 2
    r = store.get_message("g", "R", 0, 0, 32, max_total_bytes=1)
    assert r.queue_offsets == [0]  # the first message always goes
    store.config.max_transfer_count_on_message_in_memory = 2
    r = store.get_message("g", "R", 0, 0, 32)
    assert r.queue_offsets == [0, 1]


async def test_tag_filter(open_store) -> None:
    store, _ = await filled(open_store)
    odd = TagCodeFilter({tags_code("odd")})
    r = store.get_message("g", "R", 0, 0, 32, message_filter=odd)
    assert r.status is GetStatus.FOUND and r.queue_offsets == [1, 3, 5, 7] and r.next_begin_offset == 8
    none = TagCodeFilter({tags_code("nothing")})
    r = store.get_message("g", "R", 0, 0, 32, message_filter=none)
    assert (r.status, r.next_begin_offset, r.message_count) == (GetStatus.NO_MATCHED_MESSAGE, 8, 0)
    r = store.get_message("g", "R", 0, 0, 32, message_filter=TagCodeFilter(None))
    assert r.message_count == 8

    class RejectByBody:
        def is_matched_by_consume_queue(self, tags_code: int) -> bool:
            return True

        def is_matched_by_commit_log(self, record: memoryview) -> bool:
            return mc.decode_record(record).body != b"m0"

    r = store.get_message("g", "R", 0, 0, 32, message_filter=RejectByBody())
    assert r.queue_offsets == list(range(1, 8))


async def test_offset_found_null(open_store, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = await filled(open_store)
    monkeypatch.setattr(ConsumeQueue, "get_index_buffer", lambda self, offset: None)
    r = store.get_message("g", "R", 0, 2, 32)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_FOUND_NULL, 8)


async def test_times_and_offsets(open_store) -> None:
    store, clock = await filled(open_store)
    t0 = store.get_message_store_timestamp("R", 0, 0)
    assert store.get_message_store_timestamp("R", 0, 5) == t0 + 5000
    assert store.get_message_store_timestamp("R", 0, 99) == -1
    assert store.get_earliest_message_time() == t0 == store.get_earliest_message_time("R", 0)
    assert store.get_earliest_message_time("none", 0) == -1
    by_time = store.get_offset_in_queue_by_time
    assert by_time("R", 0, t0 + 5000) == 5
    # RocketMQ 4.9.8: the nearer of the two around a time (the earlier on a tie), the last
    # message for a later time; RocketMQ 5's LOWER: the first at or after, the max offset.
    assert [by_time("R", 0, t0 + d) for d in (5499, 5500, 5501)] == [5, 5, 6]
    assert [by_time("R", 0, t0 + 5500, b) for b in (Boundary.LOWER, Boundary.UPPER)] == [6, 5]
    assert by_time("R", 0, 0) == 0
    assert by_time("R", 0, clock.now + 10_000) == 19
    assert by_time("R", 0, clock.now + 10_000, Boundary.LOWER) == 20
    assert by_time("none", 0, 0) == 0
    assert store.get_min_offset_in_queue("R", 0) == 0 and store.get_min_offset_in_queue("none", 0) == -1
    assert store.get_max_offset_in_queue("none", 0) == 0
    phys = store.get_commit_log_offset_in_queue("R", 0, 4)
    assert store.get_commit_log_offset_in_queue("R", 0, 99) == 0
    m = store.look_message_by_offset(phys)
    assert m is not None and m.body == b"m4" and m.queue_offset == 4 and m.commit_log_offset == phys
    view = store.select_one_message_by_offset(phys)
    assert view is not None and mc.decode_record(view).body == b"m4"
    view.release()
    assert store.look_message_by_offset(10**9) is None
    assert store.min_phy_offset == 0 and store.max_phy_offset > phys


async def test_query_by_key_verifies_candidates(open_store) -> None:
    store, clock = await filled(open_store)
    # "Aa" and "BB" have the same Java hashCode, so the index cannot tell them apart
    await store.put_message(make_msg("R", 1, b"aa", keys="Aa"))
    await store.put_message(make_msg("R", 1, b"bb", keys="BB"))
    await store.put_message(make_msg("X", 1, b"other topic", keys="Aa"))
    await store.wait_dispatched()
    q = store.query_message("R", "Aa", 64, 0, 1 << 62)
    assert [mc.decode_record(b).body for b in q.buffers] == [b"aa"]
    assert q.index_last_update_phyoffset > 0 and q.index_last_update_timestamp > 0
    q.release()
    q = store.query_message("R", "U7", 64, 0, 1 << 62)
    assert [mc.decode_record(b).body for b in q.buffers] == [b"m7"]
    q = store.query_message("R", "k3", 64, 0, 1 << 62)
    assert q.message_count == 1 and q.phys_offsets == [store.get_commit_log_offset_in_queue("R", 0, 3)]
    assert store.query_message("R", "k3", 0, 0, 1 << 62).message_count == 0


async def test_query_without_index(open_store) -> None:
    store = await open_store(message_index_enable=False)
    await store.put_message(make_msg("R", 0, keys="k"))
    await store.wait_dispatched()
    assert store.query_message("R", "k", 64, 0, 1 << 62).message_count == 0
    assert list(itertools.islice(store.consume_queues.get("R", 0).iter_entries(), 5))
