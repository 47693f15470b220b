"""A streaming query run as its own driver process (the SIGKILL tests kill and restart it).

python stream_to_parquet.py NAMESRV TOPIC OUT CHECKPOINT processing|availableNow [MAX_PER_TRIGGER]

``start`` runs the same query in a session the caller already has.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from apogee.spark import local_session


def start(spark: Any, namesrv: str, topic: str, out: str, checkpoint: str, trigger: str, max_per_trigger: str) -> Any:
    """Start the query on ``spark`` (a test restarts it in its own session this way)."""
    df = (
        spark.readStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", max_per_trigger)
        .load()
    )
    writer = (
        df.select("topic", "broker", "queue_id", "queue_offset", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if trigger == "availableNow"
        else writer.trigger(processingTime="300 milliseconds")
    )
    return writer.start()


def main() -> None:
    namesrv, topic, out, checkpoint, trigger = sys.argv[1:6]
    max_per_trigger = sys.argv[6] if len(sys.argv) > 6 else "200"
    # Spark's scratch space next to the checkpoint: a SIGKILLed driver leaves it in the test's tmp dir.
    local_dir = str(Path(checkpoint).parent / "spark-local")
    spark = local_session("stream-to-parquet", **{"spark.local.dir": local_dir})
    query = start(spark, namesrv, topic, out, checkpoint, trigger, max_per_trigger)
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
