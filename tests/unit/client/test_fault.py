"""Latency fault tolerance: isolation tables, availability over time, pick one at least."""

from __future__ import annotations

import random

from apogee.client.fault import FaultStrategy, LatencyFaultTolerance
from apogee.common.message import MessageQueue

LAT = (50, 100, 550, 1000, 2000, 3000, 15000)
DUR = (0, 0, 30000, 60000, 120000, 180000, 600000)


def queues() -> list[MessageQueue]:
    return [MessageQueue("T", b, q) for b in ("a", "b") for q in range(2)]


def test_not_available_duration_follows_the_tables() -> None:
    s = FaultStrategy(True, LAT, DUR)
    assert s.compute_not_available_duration(10) == 0
    assert s.compute_not_available_duration(100) == 0
    assert s.compute_not_available_duration(549) == 0
    assert s.compute_not_available_duration(550) == 30000
    assert s.compute_not_available_duration(1500) == 60000
    assert s.compute_not_available_duration(3000) == 180000
    assert s.compute_not_available_duration(20000) == 600000


def test_a_failed_broker_is_isolated_then_comes_back() -> None:
    s = FaultStrategy(True, LAT, DUR, rng=random.Random(1))
    s.update_fault_item("a", 10, isolation=True, now_ms=1000)  # counts as 30 s latency -> 600 s
    for counter in range(10):
        assert s.select(queues(), counter, None, 2000).broker_name == "b"
    assert s.tolerance.is_available("a", 1000 + 600_000)
    picked = {s.select(queues(), c, None, 1000 + 600_000).broker_name for c in range(8)}
    assert picked == {"a", "b"}


def test_slow_broker_isolated_for_30_seconds() -> None:
    s = FaultStrategy(True, LAT, DUR)
    s.update_fault_item("a", 600, isolation=False, now_ms=0)
    assert not s.tolerance.is_available("a", 29_999)
    assert s.tolerance.is_available("a", 30_000)


def test_pick_one_at_least_when_every_broker_is_isolated() -> None:
    s = FaultStrategy(True, LAT, DUR)
    s.update_fault_item("a", 10, True, now_ms=0)
    s.update_fault_item("b", 10, True, now_ms=0)
    mq = s.select(queues(), 0, None, 10)
    assert mq.broker_name in {"a", "b"}


def test_pick_one_at_least_prefers_low_latency_half() -> None:
    t = LatencyFaultTolerance(random.Random(0))
    t.update_fault_item("fast", 10, 100, now_ms=0)
    t.update_fault_item("slow", 5000, 100, now_ms=0)
    assert {t.pick_one_at_least(1) for _ in range(10)} == {"fast"}


def test_disabled_strategy_round_robins_and_avoids_last_broker() -> None:
    s = FaultStrategy(False, LAT, DUR)
    s.update_fault_item("a", 10, True, now_ms=0)  # ignored when disabled
    assert [s.select(queues(), c, None, 0).queue_id for c in range(4)] == [0, 1, 0, 1]
    assert [s.select(queues(), c, None, 0).broker_name for c in range(4)] == ["a", "a", "b", "b"]
    assert all(s.select(queues(), c, "a", 0).broker_name == "b" for c in range(4))
    only_a = [MessageQueue("T", "a", 0)]
    assert s.select(only_a, 3, "a", 0).broker_name == "a"
