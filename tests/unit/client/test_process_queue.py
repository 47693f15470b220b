"""ProcessQueue: commit points, flow-control counters, orderly take/commit/rollback."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from apogee.client.consumer.process_queue import ProcessQueue
from apogee.common import constants as c
from apogee.common.message import MessageExt


def msgs(offsets: list[int], size: int = 10) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x" * size, queue_offset=o) for o in offsets]


def test_put_counts_and_span() -> None:
    pq = ProcessQueue()
    assert pq.put(msgs([5, 6, 7]))
    assert pq.msg_count == 3 and pq.msg_size == 30
    assert pq.max_span() == 2
    assert not pq.put(msgs([7, 8]))  # 7 is a duplicate; already dispatching
    assert pq.msg_count == 4


def test_remove_returns_smallest_held_offset() -> None:
    pq = ProcessQueue()
    batch = msgs([10, 11, 12, 13])
    pq.put(batch)
    assert pq.remove([batch[1]]) == 10  # 10 still held: the commit point stays behind it
    assert pq.remove([batch[0]]) == 12
    assert pq.remove([batch[3]]) == 12
    assert pq.remove([batch[2]]) == 14  # empty: one past the largest seen
    assert pq.remove([batch[2]]) == -1  # nothing left: nothing to commit
    assert pq.msg_count == 0 and pq.msg_size == 0


@given(st.permutations(list(range(50))), st.integers(1, 7))
def test_commit_point_never_passes_an_unfinished_message(order: list[int], chunk: int) -> None:
    pq = ProcessQueue()
    batch = msgs(list(range(100, 150)))
    pq.put(batch)
    done: set[int] = set()
    for i in range(0, len(order), chunk):
        part = [batch[j] for j in order[i : i + chunk]]
        done.update(m.queue_offset for m in part)
        offset = pq.remove(part)
        first_unfinished = next((o for o in range(100, 150) if o not in done), 150)
        assert offset == first_unfinished


def test_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue()
    pq.put(msgs([0, 1, 2, 3, 4]))
    first = pq.take(2, now_ms=1)
    assert [m.queue_offset for m in first] == [0, 1]
    assert pq.commit() == 2
    second = pq.take(2, now_ms=2)
    assert [m.queue_offset for m in second] == [2, 3]
    pq.make_messages_to_consume_again(second)
    again = pq.take(3, now_ms=3)
    assert [m.queue_offset for m in again] == [2, 3, 4]
    pq.rollback()
    assert [m.queue_offset for m in pq.take(10, now_ms=4)] == [2, 3, 4]
    assert pq.commit() == 5
    assert pq.take(1, now_ms=5) == [] and not pq.consuming
    assert pq.msg_count == 0


def test_commit_offset_and_expired_messages() -> None:
    pq = ProcessQueue()
    batch = msgs([0, 1, 2])
    for m, start in zip(batch, (1000, 2000, 90_000), strict=True):
        m.properties[c.PROPERTY_CONSUME_START_TIMESTAMP] = str(start)
    pq.put(batch)
    assert pq.commit_offset() == 0
    assert [m.queue_offset for m in pq.expired_messages(100_000, 15_000)] == [0, 1]
    pq.remove(batch[:2])
    assert pq.commit_offset() == 2


def test_lock_and_pull_expiry() -> None:
    pq = ProcessQueue(now_ms=0)
    pq.last_lock_ms = 1000
    assert not pq.is_lock_expired(31_000, 30_000)
    assert pq.is_lock_expired(31_001, 30_000)
    assert pq.is_pull_expired(120_001)


def test_random_interleaving_keeps_counters_consistent() -> None:
    rng = random.Random(7)
    pq = ProcessQueue()
    next_off = 0
    held: list[MessageExt] = []
    for _ in range(200):
        if rng.random() < 0.5:
            batch = msgs(list(range(next_off, next_off + rng.randint(1, 5))))
            next_off += len(batch)
            pq.put(batch)
            held += batch
        elif held:
            part = rng.sample(held, rng.randint(1, len(held)))
            for m in part:
                held.remove(m)
            pq.remove(part)
        assert pq.msg_count == len(held)
        assert pq.msg_size == 10 * len(held)
