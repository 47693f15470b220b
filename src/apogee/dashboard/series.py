"""The dashboard's time series: fixed-size rings of samples, aligned on one time axis.

A live chart (uPlot) draws ``[times, values_1, values_2, ...]``: one x array shared by every
line.  The sampler takes every figure of a chart at the same tick, so a ``Timeline`` keeps one
ring of tick times and, for each series, one ring of values of the same length; a series
missing at a tick (a broker that did not answer, a group that appeared later) holds ``None``
there, which uPlot draws as a gap.  Rings are ``deque(maxlen=capacity)``: memory is fixed
(capacity x series), the oldest sample falls out as a new one comes in, nothing is copied.

Bounds: a series that has had no value for a whole window is dropped, and a timeline holds
at most ``max_series`` series (new names beyond that are not recorded and are counted in
``refused``), so a cluster with thousands of groups costs at most that many rings.

``RateMeter`` turns cumulative counters (messages put since the broker started) into a rate
per second between two samples.

Pure: no clock, no I/O; the sampler passes the sample time in.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Value = float | None


def capacity_for(history_s: float, interval_s: float) -> int:
    """How many samples cover ``history_s`` at one sample every ``interval_s`` (both ends)."""
    if interval_s <= 0 or history_s <= 0:
        raise ValueError(f"history {history_s} s and interval {interval_s} s must be positive")
    return math.ceil(history_s / interval_s) + 1


@dataclass(frozen=True, slots=True)
class SeriesData:
    """A chart's data: the shared times (seconds since the epoch) and each series' values."""

    times: list[float]
    series: dict[str, list[Value]]

    def to_json(self) -> dict[str, object]:
        return {"times": self.times, "series": [{"name": n, "values": v} for n, v in self.series.items()]}


class Timeline:
    """Sample times and one aligned ring of values per series name."""

    def __init__(self, capacity: int, *, max_series: int = 500) -> None:
        if capacity < 2:
            raise ValueError(f"a timeline needs at least 2 samples, not {capacity}")
        self.capacity = capacity
        self.max_series = max_series
        self._times: deque[float] = deque(maxlen=capacity)
        self._values: dict[str, deque[Value]] = {}
        self._last_seen: dict[str, int] = {}  # series -> tick number of its last value
        self._ticks = 0
        self.refused = 0  # values of new series not recorded because max_series was reached

    def __len__(self) -> int:
        return len(self._times)

    @property
    def last_time(self) -> float | None:
        return self._times[-1] if self._times else None

    @property
    def names(self) -> list[str]:
        return list(self._values)

    def record(self, time_s: float, values: Mapping[str, Value]) -> None:
        """One sample of every series at ``time_s``; names absent from ``values`` get a gap."""
        if self._times and time_s <= self._times[-1]:
            raise ValueError(f"sample time {time_s} is not after the last one {self._times[-1]}")
        self._ticks += 1
        filled = len(self._times)  # samples each existing ring holds before this one
        self._times.append(time_s)
        for name, ring in self._values.items():
            value = values.get(name)
            ring.append(value)
            if value is not None:
                self._last_seen[name] = self._ticks
        for name, value in values.items():
            if name in self._values or value is None:
                continue
            if len(self._values) >= self.max_series:
                self.refused += 1
                continue
            ring = deque([None] * filled, maxlen=self.capacity)
            ring.append(value)
            self._values[name] = ring
            self._last_seen[name] = self._ticks
        for name in [n for n, seen in self._last_seen.items() if self._ticks - seen >= self.capacity]:
            del self._values[name], self._last_seen[name]

    def data(self, names: Iterable[str] | None = None) -> SeriesData:
        """The times and the series named (all when None; unknown names are left out)."""
        chosen = self._values if names is None else {n: self._values[n] for n in names if n in self._values}
        return SeriesData(list(self._times), {n: list(ring) for n, ring in chosen.items()})

    def latest(self) -> dict[str, Value]:
        """Each series' value at the last sample."""
        return {name: ring[-1] for name, ring in self._values.items() if ring}


class RateMeter:
    """Per key, the rate of a cumulative counter between its last two samples."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def rate(self, key: str, time_s: float, count: int) -> Value:
        """Events per second since the previous sample of ``key``; None for the first sample,
        a counter that went back (the server restarted) or no time elapsed."""
        previous = self._last.get(key)
        self._last[key] = (time_s, count)
        if previous is None:
            return None
        then, before = previous
        if time_s <= then or count < before:
            return None
        return (count - before) / (time_s - then)

    def keep_only(self, keys: Iterable[str]) -> None:
        """Forget the keys not in ``keys`` (a broker that left the cluster)."""
        wanted = set(keys)
        for key in [k for k in self._last if k not in wanted]:
            del self._last[key]
