"""searchOffset's rules over a queue's store times (RocketMQ 4.9.8's nearest entry, and
RocketMQ 5's LOWER / UPPER boundaries), checked on lists of times."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st

from apogee.store.time_search import Boundary, offset_by_time

N, L, U = Boundary.NEAREST, Boundary.LOWER, Boundary.UPPER


def search(times: list[int | None], ts: int, boundary: Boundary = N, lo: int = 0) -> int:
    return offset_by_time(lo, len(times), ts, lambda i: times[i], boundary)


def test_the_nearest_entry_as_rocketmq_4_9_8() -> None:
    times: list[int | None] = [10, 20, 30]
    assert [search(times, ts) for ts in (5, 10, 14, 15, 16, 20, 29, 30)] == [0, 0, 0, 0, 1, 1, 2, 2]
    # After the last message: the last one (max offset - 1), not the max offset.
    assert search(times, 10**13) == 2
    assert search([], 100) == 0


def test_among_equal_times_the_one_the_search_meets_first() -> None:
    assert search([5, 5, 5, 5, 5], 5) == 2  # RocketMQ's first midpoint, not the first entry
    assert search([1, 5, 5, 5, 9], 5) == 2
    assert search([1, 2, 5, 5, 5, 5, 9], 5) == 3


def test_a_lost_record_counts_as_earlier_and_an_unreadable_time_answers_0() -> None:
    assert search([None, None, 40, 50], 45) == 2  # tie between 40 and 50: the earlier
    assert search([None, None, 40, 50], 10) == 2
    assert search([None, None], 10) == 0
    assert search([10, -1, 30, 40, 50], 12) == 0  # the search reads the unreadable entry: 0
    assert search([0, 0, 0, 10, 20, 30], 21, lo=3) == 4  # from the min offset


def test_lower_and_upper_boundaries_as_rocketmq_5() -> None:
    times: list[int | None] = [10, 20, 20, 20, 30]
    assert [search(times, ts, L) for ts in (5, 10, 15, 20, 25, 30, 31)] == [0, 0, 1, 1, 4, 4, 5]
    assert [search(times, ts, U) for ts in (5, 10, 15, 20, 25, 30, 31)] == [0, 0, 0, 3, 3, 4, 4]
    assert search([None, 20], 15, L) == 1 and search([], 15, L) == 0 and search([], 15, U) == 0


def test_boundary_from_the_wire() -> None:
    assert Boundary.from_wire(None) is N
    assert Boundary.from_wire("UPPER") is U and Boundary.from_wire("upper") is U
    assert Boundary.from_wire("LOWER") is L and Boundary.from_wire("anything") is L


sorted_times = st.lists(st.integers(1, 60), max_size=40).map(sorted)


@given(sorted_times, st.integers(0, 70))
def test_nearest_is_an_entry_at_that_time_or_the_nearer_neighbour(times: list[int], ts: int) -> None:
    got = search(list(times), ts)
    if not times:
        assert got == 0
    elif ts in times:
        assert times[got] == ts
    else:
        right = bisect.bisect_left(times, ts)  # first entry after ts
        if right == 0:
            assert got == 0
        elif right == len(times):
            assert got == len(times) - 1
        else:  # the two entries around ts; the earlier on a tie
            assert got == (right - 1 if ts - times[right - 1] <= times[right] - ts else right)


@given(sorted_times, st.integers(0, 70))
def test_lower_and_upper_are_the_bisections(times: list[int], ts: int) -> None:
    assert search(list(times), ts, L) == bisect.bisect_left(times, ts)
    upper = bisect.bisect_right(times, ts) - 1
    assert search(list(times), ts, U) == (upper if upper >= 0 else 0)
