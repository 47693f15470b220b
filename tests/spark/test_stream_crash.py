"""A streaming query to Parquet, killed with SIGKILL mid-stream and restarted while messages
keep arriving: the output holds every message exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import Apogee, unique
from tests.spark.drivers import Driver, Feeder, batch_files
from tests.spark.jobs import stream_to_parquet
from tests.support.waiting import block_until

pytestmark = [pytest.mark.spark, pytest.mark.crash]

JOB = "stream_to_parquet.py"


def wait_batches(checkpoint: Path, n: int, driver: Driver, timeout_s: float = 90) -> None:
    def committed() -> bool:
        assert driver.alive(), f"the driver exited with {driver.proc.returncode}; see {driver.log_path}"
        return len(batch_files(checkpoint, "commits")) >= n

    block_until(committed, timeout_s, f"{n} committed batches (see {driver.log_path})", interval_s=0.05)


def test_sigkill_and_restart_while_producing_is_exactly_once(
    spark: Any, apogee_cluster: Apogee, tmp_path: Path
) -> None:
    topic = apogee_cluster.create_topic(unique("Crash"), 4)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = (apogee_cluster.ns, topic, str(out), str(checkpoint))
    with Feeder(apogee_cluster, topic, checkpoint, prefix="m", chunk=25, queues=4, seed=7) as feeder:
        first = Driver(JOB, tmp_path, *args, "processing")
        try:
            wait_batches(checkpoint, 3, first)
        finally:
            first.kill()
        done = len(batch_files(checkpoint, "commits"))
        second = Driver(JOB, tmp_path, *args, "processing")
        try:
            wait_batches(checkpoint, done + 3, second)
        finally:
            second.kill()
    sent = feeder.sent
    # The last restart runs to the end in this process's session (a third JVM would only add
    # its start-up).
    final = stream_to_parquet.start(spark, *args, "availableNow", "100000")
    final.awaitTermination(180)
    assert final.exception() is None, final.exception()
    rows = spark.read.parquet(str(out)).select("queue_id", "queue_offset", "body").collect()
    positions = [(r.queue_id, r.queue_offset) for r in rows]
    assert len(positions) == len(set(positions)), "a message was written twice"
    assert len(rows) == sent, f"{len(rows)} rows for {sent['n']} messages sent"
    assert {r.body for r in rows} == {f"m-{i}".encode() for i in range(sent)}
    per_queue: dict[int, list[int]] = {}
    for q, o in positions:
        per_queue.setdefault(q, []).append(o)
    for offsets in per_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))  # no gap in any queue
