"""Write a DataFrame into a topic, then read it back as a batch DataFrame with filters.

    python examples/spark_batch.py --namesrv 127.0.0.1:9876 --topic SparkExample

Needs Java 17+ and `pip install 'apogee[spark]'`.  Prints the rows read back per tag, and
the slice that the pushed-down queue/offset filter selected at the broker.
"""

from __future__ import annotations

import argparse
import os

from apogee.spark import local_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="SparkExample")
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()

    spark = local_session("spark-batch-example")
    try:
        rows = spark.range(args.rows).selectExpr(
            "cast(concat('event-', id) as binary) AS body",
            "concat('user-', id % 7) AS keys",
            "CASE WHEN id % 3 = 0 THEN 'click' ELSE 'view' END AS tags",
            "map('source', 'example', 'n', cast(id as string)) AS properties",
        )
        rows.write.format("apogee").option("namesrv", args.namesrv).option("topic", args.topic).mode("append").save()
        print(f"wrote {args.rows} rows to {args.topic}")

        df = spark.read.format("apogee").option("namesrv", args.namesrv).option("topic", args.topic).load()
        for row in df.groupBy("tags").count().orderBy("tags").collect():
            print(f"read back tag {row.tags}: {row['count']} rows")
        clicks = (
            spark.read.format("apogee")
            .option("namesrv", args.namesrv)
            .option("topic", args.topic)
            .option("tags", "click")
            .load()
        )
        print(f"tag filter at the broker: {clicks.count()} clicks")
        head = (
            df.where("queue_id = 0 AND queue_offset < 5").select("queue_offset", "body", "keys").orderBy("queue_offset")
        )
        for row in head.collect():
            print(f"queue 0 offset {row.queue_offset}: {row.body.decode()} ({row['keys']})")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
