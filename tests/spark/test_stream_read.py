"""Streaming reads inside the test session: AvailableNow, rate limits, new queues, lag in the
progress, offsets committed to a consumer group."""

from __future__ import annotations

from typing import Any

import pytest

from apogee.common.message import Message, MessageQueue
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from apogee.spark.offsets import QueueKey
from tests.spark.conftest import BROKER, Apogee, unique, wait_for_queues
from tests.support.waiting import block_until

pytestmark = pytest.mark.spark


def stream(spark: Any, ns: str, topic: str, **options: Any) -> Any:
    reader = spark.readStream.format("apogee").option("namesrv", ns).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, out: str, checkpoint: str) -> Any:
    """Run to the end of what is there into Parquet files under ``out`` (exactly-once sink)."""
    query = (
        df.select("queue_id", "queue_offset", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return query


def batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_with_message_limit_then_restart(spark: Any, apogee_cluster: Apogee, tmp_path: Any) -> None:
    topic = apogee_cluster.create_topic(unique("Avail"), 4)
    apogee_cluster.send_to_queues(topic, 100, 4)
    out = str(tmp_path / "out")
    df = stream(spark, apogee_cluster.ns, topic, startingOffsets="earliest", maxMessagesPerTrigger=150)
    query = run_available_now(df, out, str(tmp_path / "cp"))
    assert batch_sizes(query) == [150, 150, 100]
    rows = spark.read.parquet(out).collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == [(q, i) for q in range(4) for i in range(100)]
    # Lag was visible while the limit held the query back.
    first = query.recentProgress[0]["sources"][0]
    assert first["latestOffset"] and first["endOffset"] != first["latestOffset"]
    # More messages, restart from the checkpoint: exactly the new ones.
    apogee_cluster.send_to_queues(topic, 30, 4)
    query = run_available_now(df, out, str(tmp_path / "cp"))
    assert batch_sizes(query) == [120]
    rows = spark.read.parquet(out).collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == [(q, i) for q in range(4) for i in range(130)]


def test_byte_limit_bounds_each_batch(spark: Any, apogee_cluster: Apogee, tmp_path: Any) -> None:
    topic = apogee_cluster.create_topic(unique("Bytes"), 2)
    apogee_cluster.send_to_queues(topic, 50, 2, body=lambda q, i: bytes(1000))
    limit = 20_000
    df = stream(spark, apogee_cluster.ns, topic, startingOffsets="earliest", maxBytesPerTrigger=limit)
    query = run_available_now(df, str(tmp_path / "out"), str(tmp_path / "cp"))
    sizes = batch_sizes(query)
    assert sum(sizes) == 100 and len(sizes) >= 6
    record = 1000 + 91 + len(topic) + 120  # body + record overhead + topic + properties, roughly
    assert all(n * (record - 120) <= limit for n in sizes)


def test_new_queue_is_picked_up_and_group_offsets_committed(spark: Any, apogee_cluster: Apogee, tmp_path: Any) -> None:
    topic = apogee_cluster.create_topic(unique("Grow"), 2)
    group = unique("spark_group")
    apogee_cluster.send_to_queues(topic, 10, 2)
    name = unique("grow")
    df = stream(spark, apogee_cluster.ns, topic, startingOffsets="earliest", group=group)
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_rows(spark, name, 20)
        apogee_cluster.create_topic(topic, 4)  # two more queues while the query runs
        wait_for_queues(apogee_cluster.ns, topic, 4)
        with apogee_cluster.producer() as producer:
            for q in (1, 3):
                producer.send_batch(
                    [Message(topic, f"late-{q}-{i}".encode()) for i in range(5)], queue=MessageQueue(topic, BROKER, q)
                )
        wait_rows(spark, name, 30)
        rows = spark.table(name).collect()
        assert sorted((r.queue_id, r.queue_offset) for r in rows) == sorted(
            [(q, i) for q in range(2) for i in range(10)] + [(1, i) for i in range(10, 15)] + [(3, i) for i in range(5)]
        )
        # commit() runs after the batch: poll the group's offsets on the broker.
        expected = {0: 10, 1: 15, 2: 0, 3: 5}
        block_until(lambda: group_offsets(apogee_cluster.ns, group, topic, 4) == expected, 20, f"offsets {expected}")
    finally:
        query.stop()


def test_starting_from_group_resumes_where_the_group_is(spark: Any, apogee_cluster: Apogee, tmp_path: Any) -> None:
    topic = apogee_cluster.create_topic(unique("FromGroup"), 2)
    apogee_cluster.send_to_queues(topic, 10, 2)
    group = unique("g")
    cluster = Cluster(runtime.runtime().api, apogee_cluster.ns)
    queues = runtime.run(cluster.queues([topic]))
    runtime.run(cluster.commit_group(group, {QueueKey(topic, BROKER, 0): 7}, queues))
    df = stream(spark, apogee_cluster.ns, topic, startingFromGroup=group, startingOffsets="earliest")
    run_available_now(df, str(tmp_path / "out"), str(tmp_path / "cp"))
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == [(0, 7), (0, 8), (0, 9)] + [(1, i) for i in range(10)]
    batch = (
        spark.read.format("apogee")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", topic)
        .option("startingFromGroup", group)
        .load()
    )
    assert batch.count() == 13


def wait_rows(spark: Any, table: str, n: int, timeout_s: float = 60) -> None:
    block_until(lambda: spark.table(table).count() >= n, timeout_s, f"{n} rows in {table}", interval_s=0.1)


def group_offsets(ns: str, group: str, topic: str, queues: int) -> dict[int, int | None]:
    cluster = Cluster(runtime.runtime().api, ns)
    found = runtime.run(cluster.queues([topic]))
    offsets = runtime.run(cluster.group_offsets(group, found))
    return {k.queue_id: v for k, v in offsets.items() if k.queue_id < queues}
