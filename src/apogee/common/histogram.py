"""A fixed-bucket latency histogram, cheap enough to feed from the store's flush and dispatch.

Prometheus histograms are cumulative ``le`` buckets with a sum and a count; this keeps one
plain count per bucket (and one above the last bound) so an observation is a bisect and two
additions, with no lock: every observation and every read happens on the owner's event loop.
``unit`` says what one observed unit is in seconds (1 for seconds, 0.001 for milliseconds), so
a caller can observe in the unit it already has and the exporter still reports seconds.

Pure: nothing here reads a clock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


class Histogram:
    __slots__ = ("bounds", "unit", "counts", "sum")

    def __init__(self, bounds: Sequence[float], unit: float = 1.0) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram bounds must increase strictly: {bounds}")
        self.bounds = tuple(bounds)
        self.unit = unit
        self.counts = [0] * (len(self.bounds) + 1)  # the last slot: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """One observation (``value <= bound`` falls in that bound's bucket, as Prometheus' ``le``)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le in seconds, observations <= le)`` for every bound, then ``(inf, count)``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((bound * self.unit, running))
        out.append((float("inf"), running + self.counts[-1]))
        return out


class NullHistogram(Histogram):
    """Observes nothing: what the store keeps when ``brokerStatsEnable=false``."""

    __slots__ = ()

    def observe(self, value: float) -> None:
        return None


# CommitLog fdatasync, seconds from asking the I/O thread to its answer.
FLUSH_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Store to ConsumeQueue (visible to consumers), milliseconds of store timestamps.
DISPATCH_BOUNDS_MS = (0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
