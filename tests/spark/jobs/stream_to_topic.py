"""A streaming copy topic -> topic through the exactly-once sink, as its own driver process.

    python stream_to_topic.py NAMESRV SOURCE TARGET CHECKPOINT processing|availableNow [FAULT]

FAULT (optional) is ``after-record:<batch>``: the sink kills this driver (SIGKILL on its
process group) right after recording that batch as committed, before committing its halves.
``start`` runs the same query in a session the caller already has.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from apogee.spark import local_session


def start(spark: Any, namesrv: str, source: str, target: str, checkpoint: str, trigger: str) -> Any:
    """Start the copy on ``spark`` (a test restarts it in its own session this way)."""
    df = (
        spark.readStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        # The final AvailableNow run catches up on whatever arrived meanwhile (more on a busy
        # machine) in bigger micro-batches, so its time stays bounded.
        .option("maxMessagesPerTrigger", "1000" if trigger == "availableNow" else "300")
        .load()
    )
    writer = (
        df.selectExpr("body", "keys", "tags", "properties")
        .writeStream.format("apogee")
        .option("namesrv", namesrv)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .option("transactionTimeoutSeconds", "2")
    )
    writer = (
        writer.trigger(availableNow=True)
        if trigger == "availableNow"
        else writer.trigger(processingTime="200 milliseconds")
    )
    return writer.start()


def main() -> None:
    namesrv, source, target, checkpoint, trigger = sys.argv[1:6]
    if len(sys.argv) > 6:
        os.environ["APOGEE_SPARK_FAULT"] = f"{sys.argv[6]}:{os.getpgid(0)}"
    # Spark's scratch space next to the checkpoint: a SIGKILLed driver leaves it in the test's tmp dir.
    local_dir = str(Path(checkpoint).parent / "spark-local")
    spark = local_session("stream-to-topic", **{"spark.local.dir": local_dir})
    query = start(spark, namesrv, source, target, checkpoint, trigger)
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
