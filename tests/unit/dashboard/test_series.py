"""The live charts' ring buffers: aligned series, gaps, fixed memory, rates from counters."""

from __future__ import annotations

import pytest

from apogee.dashboard.series import RateMeter, Timeline, capacity_for


def test_capacity_covers_the_history_at_the_interval() -> None:
    assert capacity_for(3600, 5) == 721
    assert capacity_for(10, 3) == 5
    with pytest.raises(ValueError):
        capacity_for(3600, 0)


def test_series_stay_aligned_with_the_times_and_gaps_are_none() -> None:
    t = Timeline(4)
    t.record(1.0, {"a": 1.0})
    t.record(2.0, {"a": 2.0, "b": 20.0})  # b appears later: None before it
    t.record(3.0, {"b": 30.0})  # a missing this tick: a gap
    data = t.data()
    assert data.times == [1.0, 2.0, 3.0]
    assert data.series == {"a": [1.0, 2.0, None], "b": [None, 20.0, 30.0]}
    assert t.latest() == {"a": None, "b": 30.0}


def test_the_oldest_sample_falls_out_and_memory_stays_fixed() -> None:
    t = Timeline(3)
    for i in range(10):
        t.record(float(i), {"a": float(i)})
    data = t.data()
    assert data.times == [7.0, 8.0, 9.0]
    assert data.series["a"] == [7.0, 8.0, 9.0]
    assert len(t) == 3


def test_a_series_without_values_for_a_whole_window_is_dropped() -> None:
    t = Timeline(3)
    t.record(1.0, {"gone": 1.0, "kept": 1.0})
    for i in range(2, 5):
        t.record(float(i), {"kept": float(i)})
    assert t.names == ["kept"]


def test_new_series_beyond_the_limit_are_refused_and_counted() -> None:
    t = Timeline(3, max_series=2)
    t.record(1.0, {"a": 1.0, "b": 1.0, "c": 1.0})
    assert t.names == ["a", "b"]
    assert t.refused == 1


def test_data_picks_the_series_asked_for_and_skips_unknown_ones() -> None:
    t = Timeline(3)
    t.record(1.0, {"a": 1.0, "b": 2.0})
    assert t.data(["b", "nope"]).series == {"b": [2.0]}
    assert t.data(["b"]).to_json() == {"times": [1.0], "series": [{"name": "b", "values": [2.0]}]}


def test_sample_times_must_advance() -> None:
    t = Timeline(3)
    t.record(2.0, {})
    with pytest.raises(ValueError):
        t.record(2.0, {})


def test_rates_come_from_the_change_of_a_counter_between_samples() -> None:
    r = RateMeter()
    assert r.rate("b", 10.0, 100) is None  # first sample: no rate yet
    assert r.rate("b", 15.0, 150) == 10.0
    assert r.rate("b", 20.0, 20) is None  # the counter went back: the broker restarted
    assert r.rate("b", 25.0, 70) == 10.0
    r.keep_only([])
    assert r.rate("b", 30.0, 80) is None
