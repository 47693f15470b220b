"""Which queue offset a store time names: searchOffset's answers (pure).

A queue's store times grow with its offsets (equal times are common: one millisecond holds
many messages), so each answer is a binary search over the queue's entries, given a function
that reads an entry's store time.  Three rules:

* ``NEAREST``, RocketMQ 4.9.8's ``ConsumeQueue.getOffsetInQueueByTime`` and what every 4.x
  client gets (its request has no ``boundaryType``): an entry stored exactly then, else the
  nearer of the two entries around the time (the earlier one on a tie); before the first
  entry the first, after the last entry the *last* (max offset - 1, not the max offset).
  With several entries stored in that millisecond, the one the search meets first (not
  necessarily the first of them).  An entry whose CommitLog record is gone counts as earlier;
  a store time that cannot be read answers 0, and so does a queue with nothing to search.
* ``LOWER`` (RocketMQ 5's ``BoundaryType.LOWER``): the first entry stored at or after the
  time; the max offset when every entry is older.  What a reader that must not miss a
  message asks (the Spark source).
* ``UPPER`` (RocketMQ 5's ``BoundaryType.UPPER``): the last entry stored at or before the
  time; 0 when every entry is newer (RocketMQ 5 answers 0 there too).

RocketMQ first picks one ConsumeQueue file by its modification time and searches inside it;
Apogee searches the queue's whole range, which is the same search while a queue fits in one
file (300,000 entries by default) and can differ only for a time between two files' entries.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

# An entry's store time: milliseconds; -1 when it cannot be read; None when the entry's
# record lies below the CommitLog's first offset (deleted by cleanup).
TimeAt = Callable[[int], "int | None"]


class Boundary(Enum):
    NEAREST = "nearest"
    LOWER = "lower"
    UPPER = "upper"

    @classmethod
    def from_wire(cls, boundary_type: str | None) -> Boundary:
        """SearchOffsetRequestHeader's ``boundaryType``: absent (every 4.x client) is 4.9.8's
        rule; otherwise RocketMQ 5's ``BoundaryType.getType``: "upper" in any case is UPPER,
        anything else LOWER."""
        if boundary_type is None:
            return cls.NEAREST
        return cls.UPPER if boundary_type.lower() == "upper" else cls.LOWER


def offset_by_time(lo: int, hi: int, timestamp: int, time_at: TimeAt, boundary: Boundary = Boundary.NEAREST) -> int:
    """The queue offset ``timestamp`` names among entries ``lo`` .. ``hi - 1`` (see the module)."""
    if boundary is Boundary.NEAREST:
        return _nearest(lo, hi, timestamp, time_at)
    if boundary is Boundary.LOWER:
        return _first_after(lo, hi, timestamp - 1, time_at)
    after = _first_after(lo, hi, timestamp, time_at)
    return after - 1 if after > lo else 0


def _first_after(lo: int, hi: int, timestamp: int, time_at: TimeAt) -> int:
    """The first offset in ``lo`` .. ``hi - 1`` stored after ``timestamp``; ``hi`` if none
    (an entry that is gone or unreadable counts as older)."""
    while lo < hi:
        mid = (lo + hi) // 2
        t = time_at(mid)
        if t is None or t <= timestamp:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _nearest(lo: int, hi: int, timestamp: int, time_at: TimeAt) -> int:
    """RocketMQ 4.9.8's search, step for step: the same midpoints, so the same entry among
    several stored in the same millisecond."""
    low, high = lo, hi - 1
    left = right = -1
    left_time = right_time = -1
    while high >= low:
        mid = (low + high) // 2
        t = time_at(mid)
        if t is None:  # its record is gone: RocketMQ moves on without a time to compare
            low, left = mid + 1, mid
            continue
        if t < 0:
            return 0
        if t == timestamp:
            return mid
        if t > timestamp:
            high, right, right_time = mid - 1, mid, t
        else:
            low, left, left_time = mid + 1, mid, t
    if left_time == -1:
        return max(right, 0)
    if right_time == -1:
        return left
    return right if abs(timestamp - left_time) > abs(timestamp - right_time) else left
