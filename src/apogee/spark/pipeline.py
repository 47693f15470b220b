"""The order-events pipeline of ``apogee demo`` (the Spark side; the CLI presents it).

Two Structured Streaming queries read the order events through the connector:

* per-minute (event time) counts and revenue by status, a streaming aggregation in complete
  mode whose every micro-batch overwrites one small Parquet table (idempotent on replay);
* the cleaned event stream: valid events as normalised JSON, keys = order id, tags = status,
  ordered per order (``sharding_key``), into a second topic through the exactly-once sink.
"""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

EVENT_SCHEMA = "order_id string, customer string, status string, amount_cents long, items int, event_time string"
STATUSES = ("CREATED", "PAID", "COMPLETED")


def start_order_pipeline(
    spark: Any,
    namesrv: str,
    topic: str,
    clean_topic: str,
    out: Path,
    checkpoints: Path,
    *,
    group: str,
    trigger: str = "2 seconds",
) -> list[Any]:
    """Start the two queries; returns them (stats first)."""
    raw = (
        spark.readStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("group", group)
        .load()
    )
    parsed = raw.select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("e"))
    statuses = ", ".join(f"'{s}'" for s in STATUSES)
    valid = (
        parsed.where(
            f"e.order_id IS NOT NULL AND e.status IN ({statuses}) AND e.amount_cents >= 0 AND e.event_time IS NOT NULL"
        )
        .select("e.*")
        .withColumn("event_time", F.to_timestamp("event_time"))
    )

    minute_stats = valid.groupBy(F.window("event_time", "1 minute").start.alias("minute"), "status").agg(
        F.count("*").alias("events"), (F.sum("amount_cents") / 100).alias("revenue")
    )
    stats_path = str(out / "minute_stats")

    def write_stats(df: Any, batch_id: int) -> None:
        # Complete mode hands over the whole (small) table each batch: overwriting it is
        # idempotent when a batch is replayed after a failure.
        df.coalesce(1).write.mode("overwrite").parquet(stats_path)

    stats = (
        minute_stats.writeStream.outputMode("complete")
        .foreachBatch(write_stats)
        .option("checkpointLocation", str(checkpoints / "stats"))
        .trigger(processingTime=trigger)
        .queryName("minute_stats")
        .start()
    )
    clean = (
        valid.select(
            F.to_json(F.struct("order_id", "customer", "status", "amount_cents", "items", "event_time")).alias("body"),
            F.col("order_id").alias("keys"),
            F.col("status").alias("tags"),
            F.col("order_id").alias("sharding_key"),
        )
        .writeStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", clean_topic)
        .option("checkpointLocation", str(checkpoints / "clean"))
        .trigger(processingTime=trigger)
        .queryName("clean_events")
        .start()
    )
    return [stats, clean]


@dataclass
class Summary:
    read_back: int
    valid: int
    by_status: dict[str, tuple[int, float]]
    minutes: int
    first_minute: Any
    last_minute: Any
    clean_count: int


def summarize(spark: Any, namesrv: str, out: Path, clean_topic: str, stats_query: Any) -> Summary:
    read_back = sum(int(p["numInputRows"]) for p in stats_query.recentProgress)
    stats = spark.read.parquet(str(out / "minute_stats"))
    by_status = {
        r.status: (int(r.events), float(r.revenue or 0))
        for r in stats.groupBy("status")
        .agg(F.sum("events").alias("events"), F.sum("revenue").alias("revenue"))
        .collect()
    }
    span = stats.agg(
        F.min("minute").alias("lo"), F.max("minute").alias("hi"), F.countDistinct("minute").alias("n")
    ).collect()[0]
    clean = spark.read.format("apogee").option("namesrv", namesrv).option("topic", clean_topic).load()
    return Summary(
        read_back=read_back,
        valid=sum(e for e, _ in by_status.values()),
        by_status=by_status,
        minutes=int(span.n),
        first_minute=span.lo,
        last_minute=span.hi,
        clean_count=clean.count(),
    )


def stop_spark(spark: Any) -> None:
    """Stop the session and its JVM now (the JVM would otherwise live until the interpreter
    exits)."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):  # already gone
        gateway.shutdown()
    if proc is not None:
        try:
            proc.stdin.close()
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except Exception:
            pass
    SparkContext._gateway = None
    SparkContext._jvm = None
