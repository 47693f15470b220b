"""The exactly-once streaming sink: transactional halves committed per micro-batch, replays
rolled back, orphans decided by the check-back, and a driver killed mid-batch."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from apogee.client.sync import SyncPullConsumer
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.options import parse_sink_options
from apogee.spark.txn import (
    COMMIT,
    NAMESPACE,
    BatchEntry,
    CommitRecord,
    Resolver,
    TxnCommit,
    commit_batch,
    end_all,
    half_tag,
    load_record,
)
from apogee.spark.writer import check_sink_schema, send_partition
from tests.spark.conftest import BROKER, Apogee, read, unique
from tests.spark.drivers import Driver, Feeder, batch_files
from tests.spark.jobs import stream_to_topic
from tests.support.waiting import block_until
from tests.support.wire import wait_checked_past

pytestmark = pytest.mark.spark

JOB = "stream_to_topic.py"


def bodies(spark: Any, ns: str, topic: str) -> list[bytes]:
    return sorted(r.body for r in read(spark, ns, topic=topic).select("body").collect())


def wait_bodies(spark: Any, ns: str, topic: str, expected: list[bytes], timeout_s: float = 30) -> list[bytes]:
    """The topic's bodies once they equal ``expected``, or as they are at the deadline."""
    got: list[bytes] = []

    def complete() -> bool:
        got[:] = bodies(spark, ns, topic)
        return got == sorted(expected)

    with contextlib.suppress(AssertionError):
        block_until(complete, timeout_s, f"the bodies of {topic}", interval_s=0.2)
    return got


def test_streaming_write_is_exactly_once_and_rows_survive(spark: Any, apogee_cluster: Apogee, tmp_path: Path) -> None:
    source = apogee_cluster.create_topic(unique("EosIn"), 2)
    target = apogee_cluster.create_topic(unique("EosOut"), 2)
    sent = apogee_cluster.send_to_queues(source, 60, 2)
    df = (
        spark.readStream.format("apogee")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", 50)
        .load()
    )
    query = (
        df.selectExpr("body", "keys", "tags", "properties")
        .writeStream.format("apogee")
        .option("namesrv", apogee_cluster.ns)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    out = read(spark, apogee_cluster.ns, topic=target).collect()
    assert sorted((r.body, r.keys, r.tags, r.properties) for r in out) == sorted(
        (m.body, " ".join(m.keys), m.tags, {"seq": m.properties["seq"]}) for m in sent
    )  # the sink's transaction tag is not among the properties
    record = runtime.run(load_record(Cluster(runtime.runtime().api, apogee_cluster.ns), str(query.id)))
    assert record.batch == 2 and sorted(record.batches) == [0, 1, 2]
    assert all(entry.ended for entry in record.batches.values())


def sink(ns: str, topic: str) -> Any:
    opts = parse_sink_options({"namesrv": ns, "topic": topic, "transactionTimeoutSeconds": "2"}, streaming=True)
    return opts, check_sink_schema(StructType([StructField("body", BinaryType())]), opts)


def halves(ns: str, topic: str, query: str, batch: int, task: str, payloads: list[bytes]) -> TxnCommit:
    opts, columns = sink(ns, topic)
    rows = pa.record_batch([pa.array(payloads, pa.binary())], names=["body"])
    tag = half_tag(opts, query, batch, task)
    count, sent = send_partition(opts, columns, iter([rows]), half_properties=tag)
    assert count == len(payloads) == len(sent)
    return TxnCommit(0, count, task=task, halves=sent, query_id=query, batch_id=batch)


def test_replays_roll_back_and_check_backs_decide_orphans(spark: Any, apogee_cluster: Apogee) -> None:
    ns = apogee_cluster.ns
    topic = apogee_cluster.create_topic(unique("Txn"), 2)
    opts, _ = sink(ns, topic)
    query = f"q-{uuid.uuid4()}"
    first = halves(ns, topic, query, 0, "t1", [b"a", b"b"])
    assert bodies(spark, ns, topic) == []  # halves are invisible
    commit_batch(opts, [first], 0)
    assert bodies(spark, ns, topic) == [b"a", b"b"]
    # Spark re-runs batch 0 (its commit-log entry was lost): the new halves roll back.
    replay = halves(ns, topic, query, 0, "t2", [b"a-again", b"b-again"])
    commit_batch(opts, [replay], 0)
    # Batch 1: the driver recorded it (task t3) and died before committing the halves; t4 was
    # a failed task attempt of the same batch.  Batch 2 is still running.
    done = halves(ns, topic, query, 1, "t3", [b"c"])
    halves(ns, topic, query, 1, "t4", [b"zombie"])
    halves(ns, topic, query, 2, "t5", [b"later"])
    cluster = Cluster(runtime.runtime().api, ns)
    record = CommitRecord(1, {0: BatchEntry(["t1"], ended=True), 1: BatchEntry([done.task])})
    runtime.run(cluster.kv_put(NAMESPACE, query, record.encode()))
    # A live driver registers the producer group; the broker checks the halves back.
    runtime.run(Resolver.ensure(opts))
    assert wait_bodies(spark, ns, topic, [b"a", b"b", b"c"]) == [b"a", b"b", b"c"]
    # The check passes every half stored by now once more (t4 rolled back, t5 asked again and
    # still unknown): nothing else becomes visible.
    asyncio.run(wait_checked_past(apogee_cluster.broker.addr))
    assert bodies(spark, ns, topic) == [b"a", b"b", b"c"]
    assert record.decide(2, "t5") == 0 and record.decide(1, "t4") == 12 and record.decide(1, "t3") == 8
    assert record.decide(0, "t1") == 12  # ended: a half still asked about is a stale copy


def checked_back_bodies(ns: str, topic: str, queues: int) -> tuple[list[bytes], set[bytes]]:
    """Every body of ``topic`` (sorted), and those of messages a check-back committed (the
    commit of a check's copy carries TRANSACTION_CHECK_TIMES; the reader hides it)."""
    got: list[bytes] = []
    checked: set[bytes] = set()
    with SyncPullConsumer(f"cp_{uuid.uuid4().hex[:6]}", ns) as consumer:
        for q in range(queues):
            offset = 0
            while msgs := (result := consumer.pull(MessageQueue(topic, BROKER, q), "*", offset, 32)).messages:
                got += [m.body for m in msgs]
                checked |= {m.body for m in msgs if c.TRANSACTION_CHECK_TIMES in m.properties}
                offset = result.next_begin_offset
    return sorted(got), checked


def test_a_commit_after_the_check_back_copied_the_halves_writes_once(apogee_cluster: Apogee) -> None:
    """A batch that runs longer than transactionTimeoutSeconds: the broker checks its halves
    back while it runs (unknown: each check leaves a copy of its half), then the driver
    records the batch and commits the original halves, and dies before it marks the batch
    ended (the after-record kill of the streaming test on a loaded machine), or a check of
    the copies is answered before it marks it.  The copies are checked back from the record:
    each message must still be in the topic once, not once from the original and once from
    its copy."""
    ns, broker = apogee_cluster.ns, apogee_cluster.broker.addr
    topic = apogee_cluster.create_topic(unique("Late"), 2)
    opts, _ = sink(ns, topic)
    query = f"q-{uuid.uuid4()}"
    runtime.run(Resolver.ensure(opts))  # a live driver of the group answers the checks
    cluster = Cluster(runtime.runtime().api, ns)
    state: list[tuple[list[bytes], set[bytes]]] = []

    def copies_decided(expected: list[bytes]) -> bool:
        state[:] = [checked_back_bodies(ns, topic, 2)]
        return set(expected) <= state[0][1]

    late = halves(ns, topic, query, 0, "t1", [b"x", b"y", b"z"])
    # Checked back, unknown: their copies wait.
    asyncio.run(wait_checked_past(broker, half_offset=max(h[2] for h in late.halves)))
    runtime.run(cluster.kv_put(NAMESPACE, query, CommitRecord(0, {0: BatchEntry(["t1"])}).encode()))
    with contextlib.suppress(ApogeeSparkError):  # Apogee's broker refuses: the copies decide now
        runtime.run(end_all(cluster, opts.producer_group, late.halves, COMMIT))
    block_until(lambda: copies_decided([b"x", b"y", b"z"]), 30, "the copies committed by the check-back")
    assert state[0][0] == [b"x", b"y", b"z"]
    # The driver's own commit of such a batch: what the broker refuses is left to the check-back.
    slow = halves(ns, topic, query, 1, "t2", [b"u", b"v"])
    asyncio.run(wait_checked_past(broker, half_offset=max(h[2] for h in slow.halves)))
    commit_batch(opts, [slow], 1)
    block_until(lambda: copies_decided([b"u", b"v"]), 30, "the copies committed by the check-back")
    assert state[0][0] == [b"u", b"v", b"x", b"y", b"z"]


@pytest.mark.crash
def test_driver_killed_mid_batch_and_after_the_sink_commit_writes_once(
    spark: Any, apogee_cluster: Apogee, tmp_path: Path
) -> None:
    ns = apogee_cluster.ns
    source = apogee_cluster.create_topic(unique("KillIn"), 4)
    target = apogee_cluster.create_topic(unique("KillOut"), 4)
    checkpoint = tmp_path / "checkpoint"
    args = (ns, source, target, str(checkpoint))
    with Feeder(apogee_cluster, source, checkpoint, prefix="e", chunk=20, queues=4, seed=3) as feeder:
        # 1. Killed while a batch is in flight (planned in the offset log, not yet committed).
        first = Driver(JOB, tmp_path, *args, "processing")
        try:

            def in_flight() -> bool:
                assert first.alive(), first.tail()
                offsets, commits = batch_files(checkpoint, "offsets"), batch_files(checkpoint, "commits")
                return len(commits) >= 2 and bool(offsets - commits)

            block_until(in_flight, 120, "a batch in flight after two commits", interval_s=0.005)
        finally:
            first.kill()
        # 2. Killed by the sink right after it recorded the next batch as committed, before it
        #    committed the batch's half messages (the replay must not write them twice).
        doomed = max(batch_files(checkpoint, "offsets")) + 1
        second = Driver(JOB, tmp_path, *args, "processing", f"after-record:{doomed}")
        assert second.wait(120) == -signal.SIGKILL, second.tail()
    # 3. Restart and run to the end of the source (in this process's session: a third JVM
    #    would only add its start-up).
    final = stream_to_topic.start(spark, *args, "availableNow")
    final.awaitTermination(180)
    assert final.exception() is None, final.exception()
    expected = sorted(f"e-{i}".encode() for i in range(feeder.sent))
    # Halves orphaned by the kills are decided by check-backs, answered by a live driver of the
    # sink's producer group (the restarted query's, or as here any other one).
    runtime.run(Resolver.ensure(sink(ns, target)[0]))
    got = wait_bodies(spark, ns, target, expected, timeout_s=60)
    duplicates = len(got) - len(set(got))
    assert duplicates == 0, f"{duplicates} messages written twice"
    assert got == expected, f"{len(got)} messages in the target for {len(expected)} sent"
