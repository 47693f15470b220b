from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.client.selectors import SelectByHash, SelectRandom, SelectRoundRobin, java_hash_code
from apogee.common.message import Message, MessageQueue

QUEUES = [MessageQueue("T", "b", i) for i in range(8)]
MSG = Message("T", b"x")


def test_java_hash_codes() -> None:
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("polygenelubricants") == -(2**31)  # a known Integer.MIN_VALUE string
    assert java_hash_code(42) == 42
    assert java_hash_code(True) == 1231
    assert java_hash_code(2**40 + 5) == 261  # Long.hashCode: (int)(v ^ (v >>> 32))


def test_hash_selector_is_stable_and_java_compatible() -> None:
    sel = SelectByHash()
    # Java: Math.abs("order-17".hashCode()) % 8
    h = abs(java_hash_code("order-17")) % 8
    assert sel.select(QUEUES, MSG, "order-17").queue_id == h
    assert sel.select(QUEUES, MSG, 7).queue_id == 7
    assert sel.select(QUEUES, MSG, -3).queue_id == 3


@given(st.text(min_size=1, max_size=30))
def test_hash_selector_same_key_same_queue(key: str) -> None:
    sel = SelectByHash()
    assert sel.select(QUEUES, MSG, key) == sel.select(QUEUES, MSG, key)
    assert sel.select(QUEUES, MSG, key) in QUEUES


def test_round_robin_cycles() -> None:
    sel = SelectRoundRobin(start=0)
    assert [sel.select(QUEUES, MSG, None).queue_id for _ in range(10)] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]


def test_random_stays_in_range() -> None:
    sel = SelectRandom()
    assert all(sel.select(QUEUES, MSG, None) in QUEUES for _ in range(50))
