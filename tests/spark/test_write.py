"""Batch and streaming writes (at least once): what is written reads back unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from apogee.spark import one_line
from tests.spark.conftest import Apogee, read, unique
from tests.support.waiting import block_until

pytestmark = pytest.mark.spark


def test_write_then_read_back_unchanged(spark: Any, apogee_cluster: Apogee) -> None:
    topic = apogee_cluster.create_topic(unique("Written"), 4)
    rows = [
        (f"body-{i}".encode() + bytes([i % 256]), f"key-{i} k{i % 3}", f"Tag{i % 3}", {"n": str(i), "kind": "x y"})
        for i in range(300)
    ]
    df = spark.createDataFrame(rows, "body binary, keys string, tags string, properties map<string,string>")
    df.write.format("apogee").option("namesrv", apogee_cluster.ns).option("topic", topic).mode("append").save()
    back = read(spark, apogee_cluster.ns, topic=topic).collect()
    assert len(back) == 300
    got = sorted((r.body, r.keys, r.tags, r.properties) for r in back)
    assert got == sorted((b, k, t, p) for b, k, t, p in rows)
    assert {r.queue_id for r in back} == {0, 1, 2, 3}  # round robin over the queues


def test_kafka_names_string_bodies_topic_column_and_sharding(spark: Any, apogee_cluster: Apogee) -> None:
    a = apogee_cluster.create_topic(unique("KafkaA"), 4)
    b = apogee_cluster.create_topic(unique("KafkaB"), 4)
    rows = [(a if i % 2 else b, f"value-{i}", f"order-{i % 5}".encode(), [("h", f"v{i}".encode())]) for i in range(100)]
    df = spark.createDataFrame(
        rows, "topic string, value string, key binary, headers array<struct<key:string,value:binary>>"
    )
    df.write.format("apogee").option("namesrv", apogee_cluster.ns).mode("append").save()
    back = read(spark, apogee_cluster.ns, topics=f"{a},{b}").collect()
    assert sorted((r.topic, r.body.decode(), r.keys, r.properties["h"]) for r in back) == sorted(
        (t, v, k.decode(), h[0][1].decode()) for t, v, k, h in rows
    )
    # sharding_key: one key, one queue, in row order.
    s = apogee_cluster.create_topic(unique("Sharded"), 4)
    events = [(f"order-{i % 3}", f"{i % 3}:{i}") for i in range(60)]
    spark.createDataFrame(events, "sharding_key string, body string").coalesce(1).write.format("apogee").option(
        "namesrv", apogee_cluster.ns
    ).option("topic", s).mode("append").save()
    back = read(spark, apogee_cluster.ns, topic=s).collect()
    queues: dict[str, set[int]] = {}
    for r in sorted(back, key=lambda r: (r.queue_id, r.queue_offset)):
        queues.setdefault(r.body.decode().split(":")[0], set()).add(r.queue_id)
    assert all(len(q) == 1 for q in queues.values())
    for key in ("0", "1", "2"):
        seq = [
            int(r.body.decode().split(":")[1])
            for r in sorted(back, key=lambda r: r.queue_offset)
            if r.body.decode().startswith(key + ":")
        ]
        assert seq == sorted(seq) and len(seq) == 20


def test_explicit_queue_and_delay_level(spark: Any, apogee_cluster: Apogee) -> None:
    topic = apogee_cluster.create_topic(unique("Queued"), 4)
    df = spark.createDataFrame(
        [(f"q{i}", i % 4, 0) for i in range(20)] + [("late", 2, 1)], "body string, queue_id int, delay_level int"
    )
    df.write.format("apogee").option("namesrv", apogee_cluster.ns).option("topic", topic).mode("append").save()
    back = read(spark, apogee_cluster.ns, topic=topic).collect()
    assert all(int(r.body.decode()[1:]) % 4 == r.queue_id for r in back if r.body != b"late")

    def late_arrived() -> list[Any]:
        back[:] = read(spark, apogee_cluster.ns, topic=topic).collect()
        return [r.queue_id for r in back if r.body == b"late"]

    assert block_until(late_arrived, 10, "the delayed row (level 1: 1 s)", interval_s=0.2) == [2]


def test_sink_schema_errors_are_one_line(spark: Any, apogee_cluster: Apogee) -> None:
    topic = apogee_cluster.create_topic(unique("Bad"), 1)

    def error(df: Any, **options: str) -> str:
        writer = df.write.format("apogee").option("namesrv", apogee_cluster.ns).mode("append")
        for k, v in options.items():
            writer = writer.option(k, v)
        with pytest.raises(Exception) as info:
            writer.save()
        return one_line(info.value)

    assert "does not know the column(s) text" in error(spark.createDataFrame([("x",)], "text string"), topic=topic)
    assert "needs a body (or value) column" in error(spark.createDataFrame([("x",)], "tags string"), topic=topic)
    assert (
        error(spark.createDataFrame([(1,)], "body int"), topic=topic)
        == "apogee: column body must be binary or string, not int"
    )
    assert (
        error(spark.createDataFrame([("x",)], "body string"))
        == "apogee: give the target topic: option topic, or a topic column"
    )
    assert "exactlyOnce applies to streaming writes" in error(
        spark.createDataFrame([("x",)], "body string"), topic=topic, deliveryGuarantee="exactlyOnce"
    )


def test_streaming_write_at_least_once(spark: Any, apogee_cluster: Apogee, tmp_path: Any) -> None:
    source = apogee_cluster.create_topic(unique("StreamIn"), 2)
    target = apogee_cluster.create_topic(unique("StreamOut"), 2)
    apogee_cluster.send_to_queues(source, 50, 2)
    df = (
        spark.readStream.format("apogee")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        df.selectExpr("body", "keys", "tags", "properties")
        .writeStream.format("apogee")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", target)
        .option("deliveryGuarantee", "atLeastOnce")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    out = read(spark, apogee_cluster.ns, topic=target).collect()
    assert sorted(r.body for r in out) == sorted(f"{source}-{q}-{i}".encode() for q in range(2) for i in range(50))
