"""A streaming pipeline: a topic to Parquet and, cleaned, exactly once into another topic.

    python examples/spark_streaming.py --namesrv 127.0.0.1:9876 --source Orders --target OrdersClean \
        --out /tmp/orders-parquet --checkpoint /tmp/orders-checkpoints

Runs with Trigger.AvailableNow: it reads what the source topic holds now (at most
--max-per-trigger messages per micro-batch), writes it, and stops.  Run it again after more
messages arrive: thanks to the checkpoints it continues exactly where it stopped.
"""

from __future__ import annotations

import argparse
import os

from _topics import require_topics  # examples/_topics.py: one line when the topic does not exist

from apogee.spark import local_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--source", default="Orders")
    parser.add_argument("--target", default="OrdersClean")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-per-trigger", type=int, default=10_000)
    args = parser.parse_args()
    require_topics(args.namesrv, args.source)

    spark = local_session("spark-streaming-example")
    try:
        events = (
            spark.readStream.format("apogee")
            .option("namesrv", args.namesrv)
            .option("topic", args.source)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", args.max_per_trigger)
            .option("group", "spark-streaming-example")  # lag visible in broker tools too
            .load()
        )
        to_parquet = (
            events.selectExpr("queue_id", "queue_offset", "cast(body as string) AS text", "tags", "store_timestamp")
            .writeStream.format("parquet")
            .option("path", args.out)
            .option("checkpointLocation", os.path.join(args.checkpoint, "parquet"))
            .trigger(availableNow=True)
            .start()
        )
        cleaned = (
            events.where("length(body) > 0")
            .selectExpr("upper(cast(body as string)) AS body", "keys", "tags")
            .writeStream.format("apogee")
            .option("namesrv", args.namesrv)
            .option("topic", args.target)
            .option("checkpointLocation", os.path.join(args.checkpoint, "topic"))  # exactly once by default
            .trigger(availableNow=True)
            .start()
        )
        for query in (to_parquet, cleaned):
            query.awaitTermination()
        read = sum(p["numInputRows"] for p in to_parquet.recentProgress)
        written = sum(p["numInputRows"] for p in cleaned.recentProgress)
        print(f"{read} messages to Parquet at {args.out}; {written} cleaned messages to topic {args.target}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
