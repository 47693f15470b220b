"""Batch reads of real topics: everything stored, slices by offsets and by time, tags, SQL92,
pushdown, partition planning, and the one-line errors."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from apogee.common.message import Message, MessageQueue
from apogee.spark import one_line
from tests.spark.conftest import BROKER, Apogee, read, unique
from tests.support.waiting import next_millisecond, now_ms

pytestmark = pytest.mark.spark

PER_QUEUE = 40


@pytest.fixture(scope="module")
def orders(apogee_cluster: Apogee) -> tuple[str, list[Message]]:
    topic = apogee_cluster.create_topic(unique("Orders"), 8)
    sent = apogee_cluster.send_to_queues(topic, PER_QUEUE)
    return topic, sent


def by_position(rows: list[Any]) -> dict[tuple[int, int], Any]:
    return {(r.queue_id, r.queue_offset): r for r in rows}


def test_reads_exactly_what_is_stored_with_offsets(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, sent = orders
    rows = read(spark, apogee_cluster.ns, topic=topic).collect()
    assert len(rows) == 8 * PER_QUEUE
    got = by_position(rows)
    assert len(got) == len(rows)  # no duplicates
    for q in range(8):
        for i in range(PER_QUEUE):
            row = got[(q, i)]
            assert row.topic == topic and row.broker == BROKER
            assert row.body == f"{topic}-{q}-{i}".encode()
            assert row.keys == f"k{q}-{i}" and row.tags == ("TagA", "TagB")[i % 2]
            assert row.properties == {"seq": str(i)}  # only user properties
            assert row.msg_id and row.born_host.startswith("127.0.0.1:")
            assert row.store_timestamp >= row.born_timestamp - datetime.timedelta(seconds=1)
            assert row.reconsume_times == 0
    assert {r.msg_id for r in rows} == {m.properties["UNIQ_KEY"] for m in sent}


def test_offsets_json_selects_slices(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    start = json.dumps({topic: {BROKER: {"0": 10, "3": 35, "5": -2}}})
    end = json.dumps({topic: {BROKER: {"0": 20, "3": -1, "5": 5, "7": 0}}})
    rows = read(spark, apogee_cluster.ns, topic=topic, startingOffsets=start, endingOffsets=end).collect()
    positions = sorted((r.queue_id, r.queue_offset) for r in rows)
    expected = [(0, i) for i in range(10, 20)] + [(3, i) for i in range(35, PER_QUEUE)] + [(5, i) for i in range(5)]
    # Queues the JSON does not name: from earliest (start) / to latest (end); queue 7 ends at 0.
    for q in (1, 2, 4, 6):
        expected += [(q, i) for i in range(PER_QUEUE)]
    assert positions == sorted(expected)


def test_timestamps_select_what_was_stored_between(spark: Any, apogee_cluster: Apogee) -> None:
    topic = apogee_cluster.create_topic(unique("Timed"), 4)
    with apogee_cluster.producer() as producer:
        mark = now_ms()
        for phase in ("before", "during", "after"):
            mark = next_millisecond(mark)  # after the previous phase was stored
            if phase == "during":
                start_ms = mark
            if phase == "after":
                end_ms = mark
            next_millisecond(mark)  # this phase is stored after the mark
            for q in range(4):
                producer.send_batch(
                    [Message(topic, f"{phase}-{q}-{i}".encode()) for i in range(5)],
                    queue=MessageQueue(topic, BROKER, q),
                )
            mark = now_ms()
    rows = read(spark, apogee_cluster.ns, topic=topic, startingTimestamp=start_ms, endingTimestamp=end_ms).collect()
    assert sorted(r.body.decode() for r in rows) == sorted(f"during-{q}-{i}" for q in range(4) for i in range(5))
    iso = datetime.datetime.fromtimestamp(start_ms / 1000, datetime.UTC).isoformat()
    later = read(spark, apogee_cluster.ns, topic=topic, startingTimestamp=iso).collect()
    assert {r.body.decode().split("-")[0] for r in later} == {"during", "after"}


def test_tags_option_filters_at_the_broker(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    rows = read(spark, apogee_cluster.ns, topic=topic, tags="TagB").collect()
    assert len(rows) == 8 * PER_QUEUE // 2 and {r.tags for r in rows} == {"TagB"}
    both = read(spark, apogee_cluster.ns, topic=topic, tags="TagA || TagB").count()
    assert both == 8 * PER_QUEUE
    assert read(spark, apogee_cluster.ns, topic=topic, tags="NoSuchTag").count() == 0


def test_sql92_filter_on_properties(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    rows = read(spark, apogee_cluster.ns, topic=topic, sqlFilter="seq >= 30 AND TAGS = 'TagA'").collect()
    assert len(rows) == 8 * 5 and all(int(r.properties["seq"]) >= 30 and r.tags == "TagA" for r in rows)


def test_pushdown_narrows_queues_and_offsets(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    df = read(spark, apogee_cluster.ns, topic=topic)
    narrowed = df.where("queue_id IN (2, 6) AND queue_offset >= 30 AND queue_offset < 35")
    rows = narrowed.collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == [(q, i) for q in (2, 6) for i in range(30, 35)]
    # The planner cut the read to exactly those queues and offsets: 2 partitions of 5 messages.
    assert narrowed.rdd.getNumPartitions() == 2
    tagged = df.where("tags = 'TagA' AND queue_id = 1").collect()
    assert len(tagged) == PER_QUEUE // 2 and {r.tags for r in tagged} == {"TagA"}


def test_partitions_split_and_min_partitions(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    df = read(spark, apogee_cluster.ns, topic=topic, maxRecordsPerPartition=15)
    assert df.rdd.getNumPartitions() == 8 * 3
    assert df.count() == 8 * PER_QUEUE
    wide = read(spark, apogee_cluster.ns, topic=topic, minPartitions=20)
    assert wide.rdd.getNumPartitions() == 20 and wide.count() == 8 * PER_QUEUE
    pruned = (
        spark.read.format("apogee")
        .schema("queue_offset bigint, body binary")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", topic)
        .load()
    )
    assert pruned.columns == ["queue_offset", "body"] and pruned.count() == 8 * PER_QUEUE


def test_topics_and_pattern(spark: Any, apogee_cluster: Apogee) -> None:
    prefix = unique("Multi")
    a = apogee_cluster.create_topic(prefix + "_a", 2)
    b = apogee_cluster.create_topic(prefix + "_b", 2)
    apogee_cluster.send_to_queues(a, 3, 2)
    apogee_cluster.send_to_queues(b, 4, 2)
    both = read(spark, apogee_cluster.ns, topics=f"{a},{b}").groupBy("topic").count().collect()
    assert {r.topic: r["count"] for r in both} == {a: 6, b: 8}
    pattern = read(spark, apogee_cluster.ns, topicPattern=prefix + "_.*").count()
    assert pattern == 14


def error_of(spark: Any, **options: Any) -> str:
    with pytest.raises(Exception) as info:
        read(spark, **options).collect()
    return one_line(info.value)


def test_clear_errors(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    ns = apogee_cluster.ns
    assert error_of(spark, ns=ns, topic="NoSuchTopic_x") == (
        f"apogee: topic 'NoSuchTopic_x' does not exist: the NameServer ({ns}) has no route for it"
    )
    message = error_of(spark, ns="127.0.0.1:1", topic=topic)
    assert message.startswith("apogee: cannot reach the NameServer at 127.0.0.1:1") and "\n" not in message
    message = error_of(spark, ns=ns, topic=topic, startingOffsets="{not json")
    assert message.startswith("apogee: option startingOffsets must be earliest, latest or JSON")
    message = error_of(spark, ns=ns, topic=topic, startingOffset="earliest")
    assert "unknown source option 'startingoffset'" in message and "startingOffsets" in message
    message = error_of(spark, ns=ns, topic=topic, startingOffsets=json.dumps({topic: {BROKER: {"99": 0}}}))
    assert "queue 99" in message


def test_registered_in_sql(spark: Any, apogee_cluster: Apogee, orders: Any) -> None:
    topic, _ = orders
    view = unique("v")
    spark.sql(f"CREATE TEMPORARY VIEW {view} USING apogee OPTIONS (namesrv '{apogee_cluster.ns}', topic '{topic}')")
    assert spark.sql(f"SELECT count(*) AS n FROM {view} WHERE queue_id = 3").collect()[0].n == PER_QUEUE
