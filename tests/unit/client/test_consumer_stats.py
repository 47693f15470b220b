"""The consume figures GET_CONSUMER_RUNNING_INFO reports (RocketMQ's ConsumerStatsManager):
per topic, pull RT and TPS, consume RT, OK and failed TPS over the last minute, failures over
the last hour; and the answer bodies' shapes."""

from __future__ import annotations

import orjson

from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.stats import ConsumerStats
from apogee.common.message import MessageExt
from apogee.remoting.bodies.consumer_info import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
)
from apogee.remoting.bodies.heartbeat import QueueKey, SubscriptionData


def consumed(stats: ConsumerStats, topic: str, ok: int, failed: int, rt_ms: int) -> None:
    """What a consume service adds after one (timed) listener call."""
    counters = stats.topics.get(topic) or stats.topic(topic)
    counters.ok += ok
    counters.failed += failed
    counters.consume_rt += rt_ms
    counters.consume_timed += 1


def test_minute_figures_after_two_samples() -> None:
    stats = ConsumerStats()
    stats.tick(0)
    for _ in range(100):
        stats.pulled("T", 32, 4)
        consumed(stats, "T", 30, 2, 10)
    stats.tick(10_000)
    status = stats.status("T")
    # An item's first sample comes with a zero one interval back (RocketMQ's): 10 s of window.
    assert status.pull_tps == 320.0 and status.pull_rt == 4.0
    assert status.consume_ok_tps == 300.0 and status.consume_rt == 10.0
    assert status.consume_failed_tps == 20.0
    assert status.consume_failed_msgs == 0  # the hour window has not sampled again yet
    stats.tick(600_000)
    assert stats.status("T").consume_failed_msgs == 200
    assert stats.status("Other") == ConsumeStatus()


def test_consume_rt_falls_back_to_the_hour_when_the_minute_saw_nothing() -> None:
    stats = ConsumerStats()
    stats.tick(0)
    consumed(stats, "T", 1, 0, 8)
    stats.tick(600_000)  # minute and hour sampled
    for t in range(610_000, 700_000, 10_000):
        stats.tick(t)  # the minute window slides past the call; the hour keeps it
    assert stats.status("T").consume_rt == 8.0


def _msg(offset: int) -> MessageExt:
    msg = MessageExt("T", b"x")
    msg.queue_offset = offset
    return msg


def test_process_queue_info_bounds() -> None:
    pq = ProcessQueue(0)
    assert pq.info()["cached_msg_count"] == 0
    pq.put([_msg(5), _msg(6), _msg(7)])
    pq.remove([_msg(5)])
    info = pq.info()
    assert (info["cached_msg_min_offset"], info["cached_msg_max_offset"], info["cached_msg_count"]) == (6, 7, 2)
    pq.take(1, 0)
    info = pq.info()
    assert (info["transaction_msg_min_offset"], info["transaction_msg_count"], info["cached_msg_count"]) == (6, 1, 1)


def test_bodies_in_fastjson_shapes_round_trip() -> None:
    info = ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
        subscriptions=[SubscriptionData(topic="b", sub_string="*"), SubscriptionData(topic="a", sub_string="*")],
        mq_table={QueueKey("T", "bk", 1): ProcessQueueInfo(commit_offset=7),
                  QueueKey("T", "bk", 0): ProcessQueueInfo()},
        status_table={"T": ConsumeStatus(pull_tps=1.5)},
    )
    body = info.encode()
    assert body.startswith(b'{"mqTable":{{"brokerName":"bk","queueId":0,"topic":"T"}:{"cachedMsgCount":0,')
    assert b'"subscriptionSet":[{"classFilterMode":false,' in body and body.index(b'"topic":"a"') < body.index(
        b'"topic":"b"')
    again = ConsumerRunningInfo.decode(body)
    assert again.mq_table[QueueKey("T", "bk", 1)].commit_offset == 7 and again.status_table["T"].pull_tps == 1.5
    result = ConsumeMessageDirectlyResult(consume_result="CR_SUCCESS", spent_time_mills=3)
    assert orjson.loads(result.encode()) == {"autoCommit": True, "consumeResult": "CR_SUCCESS", "order": False,
                                             "spentTimeMills": 3}
    assert ConsumeMessageDirectlyResult.decode(result.encode()) == result
