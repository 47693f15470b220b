"""RocketMQ's StatsItem: a running value and call count, sampled into a minute, an hour and a
day window, from which a window's sum, TPS and average per call are read.  The broker's
statistics (``broker.stats``) and the client's consume figures (``client.consumer.stats``)
both keep them.  Pure: the owner samples on its own clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

MINUTE_SAMPLE_MS = 10_000
HOUR_SAMPLE_MS = 600_000
DAY_SAMPLE_MS = 3_600_000
# (sample interval, samples kept) of the minute, hour and day windows, as RocketMQ samples them.
WINDOWS = ((MINUTE_SAMPLE_MS, 7), (HOUR_SAMPLE_MS, 7), (DAY_SAMPLE_MS, 25))


@dataclass(frozen=True)
class StatsSnapshot:
    """One window of one item: what RocketMQ's BrokerStatsItem carries."""

    sum: int
    tps: float
    avgpt: float

    def to_json(self) -> dict[str, float | int]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


class StatsItem:
    """A running value and call count, with its three sampled windows."""

    __slots__ = ("value", "times", "_windows")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._windows: tuple[deque[tuple[int, int, int]], ...] = tuple(deque() for _ in WINDOWS)

    def sample(self, window: int, now_ms: int) -> None:
        samples = self._windows[window]
        interval, keep = WINDOWS[window]
        if not samples:  # as RocketMQ: a zero sample one interval back, so the first figure is a rate
            samples.append((now_ms - interval, 0, 0))
        samples.append((now_ms, self.times, self.value))
        while len(samples) > keep:
            samples.popleft()

    def snapshot(self, window: int) -> StatsSnapshot:
        samples = self._windows[window]
        if not samples:
            return StatsSnapshot(0, 0.0, 0.0)
        t0, times0, v0 = samples[0]
        t1, times1, v1 = samples[-1]
        total = v1 - v0
        tps = total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0
        times = times1 - times0
        return StatsSnapshot(total, tps, total / times if times > 0 else 0.0)


def sample_due(items: Iterable[StatsItem], due: list[int], now_ms: int) -> None:
    """Sample ``items`` in every window whose time has come (``due``: the next time of each
    window, updated here)."""
    windows = [w for w in range(len(WINDOWS)) if now_ms >= due[w]]
    if not windows:
        return
    for window in windows:
        due[window] = now_ms + WINDOWS[window][0]
    for item in items:
        for window in windows:
            item.sample(window, now_ms)
