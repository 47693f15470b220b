"""Latency fault tolerance for producers (RocketMQ's ``MQFaultStrategy``): pure, clock passed in.

After every send the producer reports the broker's latency.  A slow or failed broker is
avoided for a while, the longer the slower it was: latencies at or above ``latency_max_ms[i]``
earn ``not_available_duration_ms[i]`` of isolation (defaults 550 ms -> 30 s, 1 s -> 60 s,
... 15 s -> 10 min; a failure counts as 30 s of latency).  Queue selection then prefers
available brokers; when none is available it still "picks one at least": the broker that
becomes available soonest, among the better half by latency.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from apogee.common.message import MessageQueue

ISOLATION_LATENCY_MS = 30_000


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency_ms: int
    start_timestamp_ms: int

    def is_available(self, now_ms: int) -> bool:
        return now_ms >= self.start_timestamp_ms


class LatencyFaultTolerance:
    """Broker name -> when it becomes available again."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._items: dict[str, FaultItem] = {}
        self._rng = rng or random.Random()
        self._which = self._rng.randrange(1 << 16)

    def update_fault_item(self, name: str, current_latency_ms: int, not_available_ms: int, now_ms: int) -> None:
        item = self._items.get(name)
        start = now_ms + not_available_ms
        if item is None:
            self._items[name] = FaultItem(name, current_latency_ms, start)
        else:
            item.current_latency_ms = current_latency_ms
            item.start_timestamp_ms = start

    def is_available(self, name: str, now_ms: int) -> bool:
        item = self._items.get(name)
        return item is None or item.is_available(now_ms)

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def pick_one_at_least(self, now_ms: int) -> str | None:
        """Some broker to use when every one is isolated (RocketMQ's pickOneAtLeast).

        Sort by (available first, then lower latency, then sooner available), keep the
        better half and take them in turn.
        """
        if not self._items:
            return None
        items = sorted(
            self._items.values(),
            key=lambda i: (not i.is_available(now_ms), i.current_latency_ms, i.start_timestamp_ms),
        )
        half = max(1, len(items) // 2)
        self._which += 1
        return items[self._which % half].name

    def __len__(self) -> int:
        return len(self._items)


class FaultStrategy:
    """Queue selection with optional latency fault tolerance."""

    def __init__(
        self,
        enabled: bool,
        latency_max_ms: Sequence[int],
        not_available_duration_ms: Sequence[int],
        rng: random.Random | None = None,
    ) -> None:
        if len(latency_max_ms) != len(not_available_duration_ms):
            raise ValueError("latency and duration tables differ in length")
        self.enabled = enabled
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_duration_ms = tuple(not_available_duration_ms)
        self.tolerance = LatencyFaultTolerance(rng)

    def compute_not_available_duration(self, latency_ms: int) -> int:
        for i in range(len(self.latency_max_ms) - 1, -1, -1):
            if latency_ms >= self.latency_max_ms[i]:
                return self.not_available_duration_ms[i]
        return 0

    def update_fault_item(self, broker_name: str, latency_ms: int, isolation: bool, now_ms: int) -> None:
        """Report a send: its latency, or ``isolation=True`` when it failed."""
        if not self.enabled:
            return
        duration = self.compute_not_available_duration(ISOLATION_LATENCY_MS if isolation else latency_ms)
        self.tolerance.update_fault_item(broker_name, latency_ms, duration, now_ms)

    def select(
        self, queues: Sequence[MessageQueue], counter: int, last_broker: str | None, now_ms: int
    ) -> MessageQueue:
        """A queue of ``queues`` (non-empty) for the send numbered ``counter``.

        Without fault tolerance: round robin, skipping ``last_broker`` (the broker of the
        previous failed attempt) when another broker has queues.  With it: the first
        available broker's queue in round-robin order, else one "at least".
        """
        n = len(queues)
        if self.enabled:
            for i in range(n):
                mq = queues[(counter + i) % n]
                if self.tolerance.is_available(mq.broker_name, now_ms) and (
                    last_broker is None or mq.broker_name != last_broker
                ):
                    return mq
            at_least = self.tolerance.pick_one_at_least(now_ms)
            if at_least is not None:
                candidates = [q for q in queues if q.broker_name == at_least]
                if candidates:
                    return candidates[counter % len(candidates)]
                self.tolerance.remove(at_least)
            return queues[counter % n]
        if last_broker is not None:
            for i in range(n):
                mq = queues[(counter + i) % n]
                if mq.broker_name != last_broker:
                    return mq
        return queues[counter % n]
