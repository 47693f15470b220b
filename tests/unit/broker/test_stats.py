"""BrokerStats keeps RocketMQ's counters: per-topic puts, per group@topic gets and send-backs,
broker totals, their minute/hour/day windows, the store TPS strings and the put latency
distribution."""

from __future__ import annotations

from apogee.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
)


def test_puts_gets_and_send_backs_are_counted_under_rocketmq_keys() -> None:
    stats = BrokerStats("C", 0)
    stats.put("T", 1, 100, 0)
    stats.put("T", 3, 30, 0)  # a batch of three
    stats.got("G", "T", 2, 60)
    stats.got("G", "T", 0, 0)  # a miss
    stats.sent_back("G", "T")
    assert stats.find(TOPIC_PUT_NUMS, "T").value == 4  # type: ignore[union-attr]
    assert stats.find(TOPIC_PUT_SIZE, "T").value == 130  # type: ignore[union-attr]
    assert stats.find(GROUP_GET_NUMS, "T@G").value == 2  # type: ignore[union-attr]
    assert stats.find(GROUP_GET_SIZE, "T@G").value == 60  # type: ignore[union-attr]
    assert stats.find(SNDBCK_PUT_NUMS, "T@G").value == 1  # type: ignore[union-attr]
    assert stats.find(BROKER_PUT_NUMS, "C").value == 4  # type: ignore[union-attr]
    assert stats.find(BROKER_GET_NUMS, "C").value == 2  # type: ignore[union-attr]
    assert stats.find(TOPIC_PUT_NUMS, "Other") is None
    info = stats.runtime_info(1000)
    assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("4", "2")
    assert (info["putMessageTimesTotal"], info["putMessageSizeTotal"]) == ("4", "130")
    stats.forget_topic("T")
    assert stats.find(TOPIC_PUT_NUMS, "T") is None and stats.find(GROUP_GET_NUMS, "T@G") is None


def test_minute_window_gives_sum_tps_and_average_per_call() -> None:
    stats = BrokerStats("C", 0)
    stats.tick(10_000, 1)  # first sample: a zero sample 10 s before
    for _ in range(5):
        stats.put("T", 2, 10, 0)
    stats.tick(20_000, 1)
    snap = stats.find(TOPIC_PUT_NUMS, "T").snapshot(0)  # type: ignore[union-attr]
    # Created after the first tick: its window starts at its own first sample.
    assert snap.sum == 10 and snap.tps == 1.0 and snap.avgpt == 2.0
    for second in range(3, 12):
        stats.tick(second * 10_000, 1)
    assert stats.find(TOPIC_PUT_NUMS, "T").snapshot(0).sum == 0  # type: ignore[union-attr]  # aged out
    # An item made between samples joins the day window at the next hourly sample, as in RocketMQ.
    assert stats.find(TOPIC_PUT_NUMS, "T").snapshot(2).sum == 0  # type: ignore[union-attr]
    stats.tick(10_000 + 3_600_000, 1)
    assert stats.find(TOPIC_PUT_NUMS, "T").snapshot(2).sum == 10  # type: ignore[union-attr]


def test_tps_strings_have_rocketmqs_three_figures_and_wait_for_enough_samples() -> None:
    stats = BrokerStats("C", 0)
    stats.tick(0, 1)
    assert stats.runtime_info(0)["putTps"] == "  "  # no figure yet, as Java's empty strings
    assert stats.runtime_info(0)["getTotalTps"] == "0.0 0.0 0.0"
    for second in range(1, 12):
        stats.put("T", 5, 5, 0)
        stats.got("G", "T", 1, 1)
        stats.tick(second * 1000, 1)
    tps10, tps60, tps600 = stats.runtime_info(12_000)["putTps"].split(" ")
    assert (float(tps10), tps60, tps600) == (5.0, "", "")
    assert stats.runtime_info(12_000)["getTransferedTps"].split(" ")[0] == "1.0"


def test_day_change_moves_todays_totals_to_this_morning() -> None:
    stats = BrokerStats("C", 0)
    stats.tick(0, 1)
    stats.put("T", 7, 7, 0)
    stats.tick(1000, 2)
    info = stats.runtime_info(1000)
    assert (info["msgPutTotalTodayMorning"], info["msgPutTotalYesterdayMorning"]) == ("7", "0")


def test_latency_distribution_and_percentiles() -> None:
    stats = BrokerStats("C", 0)
    stats.tick(0, 1)
    for ms in [0] * 998 + [30, 3000]:
        stats.put("T", 1, 1, ms)
    assert stats.runtime_info(0)["putMessageDistributeTime"].startswith("[<=0ms]:0 ")  # last minute's
    stats.tick(60_000, 1)  # the minute rotates
    info = stats.runtime_info(60_000)
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:998 [0~10ms]:0 [10~50ms]:1 [50~100ms]:0 ")
    assert "[3~4s]:1 " in info["putMessageDistributeTime"]
    assert info["putMessageEntireTimeMax"] == "3000"
    # StoreStatsService's interpolation: p99 inside the first 1 ms bucket, p99.9 at the 28~30 ms one.
    assert float(info["putLatency99"]) < 1.0 and info["putLatency999"] == "30.00"
