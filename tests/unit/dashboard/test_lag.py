"""A group's lag in messages and in time, the group list's rows, the charted topics, and
RocketMQ's track types of a message per group."""

from __future__ import annotations

from apogee.admin.tracks import TrackType, push_track
from apogee.dashboard.lag import GroupRow, QueueLag, is_system_group, queue_lags, top_topics


def test_lag_in_time_is_the_newest_store_time_minus_the_last_consumed_one() -> None:
    rows = queue_lags(
        [("T", "b", 1, 10, 4, 1_000), ("T", "b", 0, 5, 5, 900), ("T", "b", 2, 3, 0, 0)],
        {("T", "b", 0): 900, ("T", "b", 1): 4_500, ("T", "b", 2): 2_000},
        {("T", "b", 1): "client-1"},
    )
    assert [(r.queue_id, r.lag, r.lag_ms, r.client) for r in rows] == [
        (0, 0, 0, ""),  # caught up: no lag in time either
        (1, 6, 3_500, "client-1"),
        (2, 3, None, ""),  # nothing consumed yet: the time lag cannot be told
    ]


def test_a_consumer_offset_past_the_broker_offset_is_no_lag() -> None:
    assert QueueLag("T", "b", 0, 5, 7, 100, 100).lag == 0
    assert QueueLag("T", "b", 0, 5, -1, 0, 100).lag == 5


def test_group_rows_sum_their_queues() -> None:
    row = GroupRow("g")
    row.add_queue("T", 10, 4)
    row.add_queue("%RETRY%g", 2, 2)
    assert (row.lag, row.topics) == (6, {"T", "%RETRY%g"})


def test_system_groups_are_rocketmqs() -> None:
    assert is_system_group("TOOLS_CONSUMER") and is_system_group("CID_RMQ_SYS_TRANS")
    assert not is_system_group("orders")


def test_charted_topics_are_those_asked_for_then_the_busiest_user_topics() -> None:
    rates = {"a": 5.0, "b": 50.0, "c": 0.0, "%RETRY%g": 99.0, "RMQ_SYS_TRACE_TOPIC": 80.0, "d": 7.0}
    assert top_topics(rates, 2) == ["b", "d"]
    assert top_topics(rates, 2, always=["c"]) == ["c", "b", "d"]


def test_track_types_of_a_push_consumer() -> None:
    assert push_track(False, ["*"], "A") is TrackType.NOT_CONSUME_YET
    assert push_track(True, ["*"], "A") is TrackType.CONSUMED
    assert push_track(True, [], "A") is TrackType.CONSUMED  # SQL92 or no tags: all
    assert push_track(True, None, "A") is TrackType.CONSUMED
    assert push_track(True, ["B", "C"], "A") is TrackType.CONSUMED_BUT_FILTERED
    assert push_track(True, ["A", "C"], "A") is TrackType.CONSUMED


def test_the_group_list_joins_configs_and_progress_of_every_master() -> None:
    from apogee.dashboard.sampler import Sampler
    from apogee.remoting.bodies.admin import ConsumeStats, OffsetWrapper
    from apogee.remoting.bodies.heartbeat import QueueKey

    configs = [{"g": {"retryMaxTimes": 3}}, {"g": {"retryMaxTimes": 3}, "only-b": {}}]
    stats = [
        [("g", ConsumeStats({QueueKey("T", "a", 0): OffsetWrapper(10, 4, 0)}, 1.5))],
        [("g", ConsumeStats({QueueKey("T", "b", 0): OffsetWrapper(5, 5, 0)}, 0.5)),
         ("offsets-only", ConsumeStats({QueueKey("U", "b", 1): OffsetWrapper(3, 1, 0)}, 0.0))],
    ]
    rows = Sampler._group_rows(["a", "b"], configs, stats)
    assert list(rows) == ["g", "offsets-only", "only-b"]
    g = rows["g"]
    assert (g.brokers, g.lag, g.tps, g.topics, g.retry_max_times) == (["a", "b"], 6, 2.0, {"T"}, 3)
    assert (rows["offsets-only"].brokers, rows["offsets-only"].lag) == (["b"], 2)
    assert rows["only-b"].lag == 0 and rows["only-b"].clients is None
