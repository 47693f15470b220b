"""The Spark connector on local[2] against a real broker, next to the same queries on Parquet.

Starts `apogee namesrv` + `apogee broker` on loopback (separate processes; the broker shares the
2 cores with Spark), a local[2] Spark session, and a data set of --messages rows with a
--body-byte binary body (written once to Parquet, not timed).  Then, each timed end to end
(wall clock from the action's start, Spark start-up excluded):

  batch write          df.write.format("apogee")                 vs  df.write.parquet
  batch read           read.format("apogee") -> noop             vs  read.parquet -> noop
  stream read          readStream apogee, AvailableNow -> Parquet vs  readStream Parquet -> Parquet
  stream write (ALO)   readStream Parquet -> apogee atLeastOnce  vs  readStream Parquet -> Parquet
  stream write (EOS)   readStream Parquet -> apogee exactlyOnce  vs  the same rows to Parquet
                       (--eos-messages rows, 200,000 by default: every message is a transactional
                       half sent and committed on its own, ~10x slower than atLeastOnce)

Run:  .venv/bin/python benchmarks/spark_bench.py [--messages 1000000] [--body 1024] [--queues 8]
      [--pull-batch 32] [--big-pulls]

--big-pulls lets the broker answer pulls of up to 1024 messages / 4 MiB (its default is
RocketMQ's 32 / 256 KiB) and the connector ask for --pull-batch at a time.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.spark import local_session, runtime  # noqa: E402
from apogee.spark.broker import Cluster  # noqa: E402
from tests.spark.conftest import start_broker, wait_for_queues  # noqa: E402
from tests.support.processes import start_namesrv  # noqa: E402

REPEAT = 1


def timed(
    label: str, n: int, action: Callable[[int], Any], results: list[tuple[str, int, float]], repeat: int = 0
) -> float:
    """Run ``action(run)`` ``REPEAT`` times; print every run's rate and their median (the
    machine is shared, so single runs are noisy)."""
    walls = []
    for run in range(repeat or REPEAT):
        start = time.perf_counter()
        action(run)
        walls.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    results.append((label, n, wall))
    runs = "" if len(walls) == 1 else "  runs: " + ", ".join(f"{n / w:,.0f}" for w in walls)
    print(f"  {label:<44} {n / wall:>10,.0f} msgs/s  ({wall:6.1f} s){runs}", flush=True)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--pull-batch", type=int, default=32)
    parser.add_argument("--big-pulls", action="store_true")
    parser.add_argument("--eos-messages", type=int, default=200_000, help="rows for the exactly-once write (slow)")
    parser.add_argument("--skip", default="", help="comma-separated: write,read,stream,swrite,eos")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each timed query (the median is printed)")
    args = parser.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    skip = set(filter(None, args.skip.split(",")))
    n = args.messages
    base = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    conf = "brokerName=bench\nmappedFileSizeCommitLog=268435456\nenablePropertyFilter=true\n" + (
        "maxTransferCountOnMessageInMemory=1024\nmaxTransferBytesOnMessageInMemory=4194304\n" if args.big_pulls else ""
    )
    namesrv = start_namesrv(base / "ns")
    broker = start_broker(namesrv.addr, base / "store", conf)
    spark = None
    results: list[tuple[str, int, float]] = []
    try:
        ns = namesrv.addr
        api = runtime.runtime().api
        topics = {name: f"Bench{name}" for name in ("W", "S", "E")}
        for topic in topics.values():
            runtime.run(api.create_topic(broker.addr, topic, args.queues), 10)
            wait_for_queues(ns, topic, args.queues)
        spark = local_session("spark-bench", memory="2g", **{"spark.sql.files.maxPartitionBytes": "64m"})
        from pyspark.sql import functions as F

        src = str(base / "source.parquet")
        chunk = F.unhex(F.sha2(F.col("id").cast("string"), 512))  # 64 bytes
        body = F.substring(F.concat(*[chunk] * (args.body // 64 + 1)), 1, args.body).alias("body")
        spark.range(n).select(body).write.parquet(src)
        print(
            f"{n:,} messages of {args.body} B, {args.queues} queues, pull batch {args.pull_batch}"
            f"{' (broker: big pulls)' if args.big_pulls else ''}",
            flush=True,
        )

        def reader(topic: str, stream: bool = False) -> Any:
            r = (spark.readStream if stream else spark.read).format("apogee").option("namesrv", ns)
            r = r.option("topic", topic).option("pullBatchSize", args.pull_batch)
            return r.option("startingOffsets", "earliest").load()

        # Warm-up (not timed): the first Python data source calls start Spark's Python workers.
        spark.createDataFrame([(b"warm-up",)], "body binary").write.format("apogee").option("namesrv", ns).option(
            "topic", topics["E"]
        ).mode("append").save()
        reader(topics["E"]).count()
        timed(
            "batch write: apogee",
            n,
            lambda run: (
                spark.read.parquet(src)
                .write.format("apogee")
                .option("namesrv", ns)
                .option("topic", topics["W"])
                .mode("append")
                .save()
            ),
            results,
            repeat=1,  # loads the topic the reads use
        )
        if "write" not in skip:
            timed(
                "batch write: parquet",
                n,
                lambda run: spark.read.parquet(src).write.mode("overwrite").parquet(str(base / "w.parquet")),
                results,
            )
        # The broker indexes (dispatches) what it stored asynchronously: wait until the topic's
        # queues hold every message before timing reads.
        cluster = Cluster(api, ns)
        queues = runtime.run(cluster.queues([topics["W"]]))
        deadline = time.monotonic() + 120
        while (stored := sum(hi - lo for lo, hi in runtime.run(cluster.bounds(queues)).values())) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"the topic holds {stored} messages, not {n}")
            time.sleep(0.5)
        if reader(topics["W"]).select("queue_offset").count() != n:
            raise SystemExit("a read of the whole topic does not return every message")
        if "read" not in skip:
            timed(
                "batch read: apogee -> noop",
                n,
                lambda run: reader(topics["W"]).write.format("noop").mode("overwrite").save(),
                results,
            )
            timed(
                "batch read: parquet -> noop",
                n,
                lambda run: spark.read.parquet(src).write.format("noop").mode("overwrite").save(),
                results,
            )
            timed(
                "batch read: apogee body only -> noop",
                n,
                lambda run: (
                    spark.read.format("apogee")
                    .schema("body binary")
                    .option("namesrv", ns)
                    .option("topic", topics["W"])
                    .option("pullBatchSize", args.pull_batch)
                    .load()
                    .write.format("noop")
                    .mode("overwrite")
                    .save()
                ),
                results,
            )

        def run_stream(df: Any, fmt: str, name: str, **options: str) -> None:
            w = df.writeStream.format(fmt).option("checkpointLocation", str(base / f"cp-{name}"))
            for k, v in options.items():
                w = w.option(k, v)
            q = w.trigger(availableNow=True).start()
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))

        schema = spark.read.parquet(src).schema
        if "stream" not in skip:
            timed(
                "stream read: apogee AvailableNow -> parquet",
                n,
                lambda run: run_stream(
                    reader(topics["W"], stream=True).select("topic", "queue_id", "queue_offset", "body"),
                    "parquet",
                    f"sr{run}",
                    path=str(base / f"sr{run}.parquet"),
                ),
                results,
            )
            timed(
                "stream read: parquet AvailableNow -> parquet",
                n,
                lambda run: run_stream(
                    spark.readStream.schema(schema).parquet(src),
                    "parquet",
                    f"srp{run}",
                    path=str(base / f"srp{run}.parquet"),
                ),
                results,
            )
        if "swrite" not in skip:
            timed(
                "stream write: parquet -> apogee atLeastOnce",
                n,
                lambda run: run_stream(
                    spark.readStream.schema(schema).parquet(src),
                    "apogee",
                    f"sw{run}",
                    namesrv=ns,
                    topic=topics["S"],
                    deliveryGuarantee="atLeastOnce",
                ),
                results,
            )
            timed(
                "stream write: parquet -> parquet",
                n,
                lambda run: run_stream(
                    spark.readStream.schema(schema).parquet(src),
                    "parquet",
                    f"swp{run}",
                    path=str(base / f"swp{run}.parquet"),
                ),
                results,
            )
        if "eos" not in skip:
            k = min(n, args.eos_messages)
            src_eos = str(base / "source-eos.parquet")
            spark.read.parquet(src).limit(k).write.parquet(src_eos)
            timed(
                "stream write: parquet -> apogee exactlyOnce",
                k,
                lambda run: run_stream(
                    spark.readStream.schema(schema).parquet(src_eos),
                    "apogee",
                    f"se{run}",
                    namesrv=ns,
                    topic=topics["E"],
                ),
                results,
            )
            timed(
                "stream write: parquet -> parquet (same rows)",
                k,
                lambda run: run_stream(
                    spark.readStream.schema(schema).parquet(src_eos),
                    "parquet",
                    f"sep{run}",
                    path=str(base / f"sep{run}.parquet"),
                ),
                results,
            )
    finally:
        if spark is not None:
            spark.stop()
        broker.close()
        namesrv.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
