"""A Spark Connect client that drives the ``apogee`` source, as its own process.

    python connect_client.py NAMESRV SOURCE TARGET STREAM_OUT WORK_DIR

A Spark Connect session cannot live in a process that already holds a classic SparkContext
(the test session), so this script runs alone: ``SparkSession.builder.remote("local[2]")``
starts a local Connect server (a JVM with the Connect plugin) and talks to it over gRPC like
any remote client.  Each step prints one ``RESULT <name> <json>`` line; the test compares them
with what it stored in the brokers itself.

Steps: a batch read through auto-registration (no ``register`` call: the server's Python
workers find ``pyspark_apogee``), then explicit ``apogee.spark.register`` over Connect, a
DataFrame written to TARGET and read back, a streaming AvailableNow read of SOURCE into
Parquet, and a streaming copy SOURCE -> STREAM_OUT through the exactly-once sink.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[3]))  # the repository root: tests.support
from tests.support.wire import wait_cluster_caught_up  # noqa: E402

warnings.simplefilter("ignore", FutureWarning)


def emit(name: str, value: Any) -> None:
    print(f"RESULT {name} {json.dumps(value)}", flush=True)


def rows_of(df: Any) -> list[list[Any]]:
    return sorted(
        [r.queue_id, r.queue_offset, r.body.hex(), r.keys, r.tags, dict(r.properties or {})]
        for r in df.select("queue_id", "queue_offset", "body", "keys", "tags", "properties").collect()
    )


def input_rows(progress: Any) -> int:
    """Rows of one micro-batch: Connect hands progress objects, classic Spark dicts."""
    rows = getattr(progress, "numInputRows", None)
    return int(progress["numInputRows"] if rows is None else rows)


def main() -> None:
    namesrv, source, target, stream_out, work = sys.argv[1:6]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["SPARK_TESTING"] = "1"  # the local Connect server binds an ephemeral port
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from apogee.spark import register

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(Path(work) / "spark-local"))
        .getOrCreate()
    )
    emit("connect", isinstance(spark, ConnectSession))

    # 1. Auto-registration: nothing registered by this client yet.
    df = spark.read.format("apogee").option("namesrv", namesrv).option("topic", source).load()
    emit("batch_auto", rows_of(df))

    # 2. Explicit registration over Connect (pickled class + pushdown flag), with a pushed filter.
    register(spark)
    emit("pushdown_flag", spark.conf.get("spark.sql.python.filterPushdown.enabled"))
    df = spark.read.format("apogee").option("namesrv", namesrv).option("topic", source).load()
    emit("batch_filtered", rows_of(df.where("queue_id = 1 AND queue_offset >= 5")))

    # 3. Write a DataFrame, read it back.
    written = [(bytes([i % 256]) + f"w{i}".encode(), f"key-{i}", f"T{i % 2}", {"n": str(i)}) for i in range(50)]
    spark.createDataFrame(written, "body binary, keys string, tags string, properties map<string,string>").write.format(
        "apogee"
    ).option("namesrv", namesrv).option("topic", target).mode("append").save()
    asyncio.run(wait_cluster_caught_up(namesrv))  # the ConsumeQueues trail the sends' answers
    back = spark.read.format("apogee").option("namesrv", namesrv).option("topic", target).load()
    emit("written", [[b.hex(), k, t, p] for b, k, t, p in written])
    emit("written_back", rows_of(back))

    # 4. Streaming read, AvailableNow, two micro-batches, into Parquet.
    stream = (
        spark.readStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "50")
        .load()
    )
    out = str(Path(work) / "parquet")
    query = (
        stream.select("queue_id", "queue_offset", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", str(Path(work) / "cp-parquet"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    emit("stream_error", None if query.exception() is None else str(query.exception()))
    emit("stream_batches", [n for n in map(input_rows, query.recentProgress) if n])
    emit(
        "stream_rows",
        sorted([r.queue_id, r.queue_offset, r.body.hex()] for r in spark.read.parquet(out).collect()),
    )

    # 5. Streaming write through the exactly-once sink.
    query = (
        stream.selectExpr("body", "keys", "tags", "properties")
        .writeStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", stream_out)
        .option("checkpointLocation", str(Path(work) / "cp-topic"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    emit("sink_error", None if query.exception() is None else str(query.exception()))
    asyncio.run(wait_cluster_caught_up(namesrv))  # and the commits' answers
    back = spark.read.format("apogee").option("namesrv", namesrv).option("topic", stream_out).load()
    emit("sink_rows", sorted([r.body.hex(), r.keys, r.tags, dict(r.properties)] for r in back.collect()))
    spark.stop()
    emit("done", True)


if __name__ == "__main__":
    main()
