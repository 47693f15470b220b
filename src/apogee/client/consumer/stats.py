"""A consumer's pull and consume figures per topic (RocketMQ's ConsumerStatsManager), which
GET_CONSUMER_RUNNING_INFO reports as ConsumeStatus: pull RT and TPS, consume RT, OK and failed
TPS over the last minute, failed messages over the last hour.

The hot paths only add to plain counters of the topic's ``TopicCounters`` (found by one dict
lookup): messages pulled, consumed OK and failed, and the pull and consume times; the consume
time of one listener call in ``RT_SAMPLE_EVERY`` is measured (the average stays the average,
and the other calls read no clock).  ``tick``, every second or so, moves the counters into
RocketMQ's StatsItems and takes their minute/hour/day samples.  Pure: times are passed in.
"""

from __future__ import annotations

from apogee.common.stats_item import WINDOWS, StatsItem, sample_due
from apogee.remoting.bodies.consumer_info import ConsumeStatus

MINUTE, HOUR = 0, 1
RT_SAMPLE_EVERY = 8  # a power of two: the consume services test ``calls & (RT_SAMPLE_EVERY - 1)``


class TopicCounters:
    """Running totals of one topic, written by the hot paths; ``items`` are RocketMQ's
    StatsItems (pull RT, pull TPS, consume RT, consume OK TPS, consume failed TPS)."""

    __slots__ = ("pull_rt", "pulls", "pulled", "consume_rt", "consume_timed", "ok", "failed", "items")

    def __init__(self) -> None:
        self.pull_rt = 0  # ms, summed over ``pulls`` pulls that found messages
        self.pulls = 0
        self.pulled = 0  # messages
        self.consume_rt = 0  # ms, summed over ``consume_timed`` listener calls
        self.consume_timed = 0
        self.ok = 0
        self.failed = 0
        self.items = tuple(StatsItem() for _ in range(5))

    def publish(self) -> None:
        """Copy the totals into the StatsItems (value, times), as RocketMQ's addValue keeps them."""
        pull_rt, pull_tps, consume_rt, ok, failed = self.items
        pull_rt.value, pull_rt.times = self.pull_rt, self.pulls
        pull_tps.value, pull_tps.times = self.pulled, self.pulls
        consume_rt.value, consume_rt.times = self.consume_rt, self.consume_timed
        ok.value = ok.times = self.ok
        failed.value = failed.times = self.failed


class ConsumerStats:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self._due = [0] * len(WINDOWS)

    def topic(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    def pulled(self, topic: str, msgs: int, rt_ms: int) -> None:
        """A pull of ``topic`` that found ``msgs`` messages after ``rt_ms`` (once per pull)."""
        counters = self.topics.get(topic) or self.topic(topic)
        counters.pull_rt += rt_ms
        counters.pulls += 1
        counters.pulled += msgs

    def tick(self, now_ms: int) -> None:
        """Take the samples that are due (call it every second or so)."""
        topics = list(self.topics.values())
        for counters in topics:
            counters.publish()
        sample_due((item for counters in topics for item in counters.items), self._due, now_ms)

    def status(self, topic: str) -> ConsumeStatus:
        counters = self.topics.get(topic)
        if counters is None:
            return ConsumeStatus()
        pull_rt, pull_tps, consume_rt_item, ok, failed = counters.items
        consume_rt = consume_rt_item.snapshot(MINUTE)
        if consume_rt.sum == 0:
            consume_rt = consume_rt_item.snapshot(HOUR)
        return ConsumeStatus(
            pull_rt=pull_rt.snapshot(MINUTE).avgpt,
            pull_tps=pull_tps.snapshot(MINUTE).tps,
            consume_rt=consume_rt.avgpt,
            consume_ok_tps=ok.snapshot(MINUTE).tps,
            consume_failed_tps=failed.snapshot(MINUTE).tps,
            consume_failed_msgs=failed.snapshot(HOUR).sum,
        )
