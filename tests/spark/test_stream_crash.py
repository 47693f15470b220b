"""A streaming query to Parquet, killed with SIGKILL mid-stream and restarted while messages
keep arriving: the output holds every message exactly once."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from apogee.common.message import Message, MessageQueue
from tests.spark.conftest import BROKER, Apogee, unique

pytestmark = [pytest.mark.spark, pytest.mark.crash]

JOB = Path(__file__).parent / "jobs" / "stream_to_parquet.py"
ROOT = Path(__file__).resolve().parents[2]


class Driver:
    """One run of the job in its own session (process group), killed by its PID's group."""

    def __init__(self, *args: str) -> None:
        self.log = open(Path(args[3]).parent / f"driver-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def wait_batches(checkpoint: Path, n: int, driver: Driver, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while committed_batches(checkpoint) < n:
        if driver.proc.poll() is not None:
            raise AssertionError(f"the driver exited with {driver.proc.returncode}; see {driver.log.name}")
        if time.monotonic() > deadline:
            raise AssertionError(f"only {committed_batches(checkpoint)} batches committed; see {driver.log.name}")
        time.sleep(0.1)


def test_sigkill_and_restart_while_producing_is_exactly_once(
    spark: Any, apogee_cluster: Apogee, tmp_path: Path
) -> None:
    topic = apogee_cluster.create_topic(unique("Crash"), 4)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    sent = {"n": 0}
    stop = threading.Event()

    def produce() -> None:
        rng = random.Random(7)
        with apogee_cluster.producer() as producer:
            while not stop.is_set():
                q = rng.randrange(4)
                batch = [Message(topic, f"m-{sent['n'] + i}".encode()) for i in range(25)]
                producer.send_batch(batch, queue=MessageQueue(topic, BROKER, q))
                sent["n"] += len(batch)
                time.sleep(0.02)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    args = (apogee_cluster.ns, topic, str(out), str(checkpoint))
    try:
        first = Driver(*args, "processing")
        try:
            wait_batches(checkpoint, 3, first)
        finally:
            first.kill()
        done = committed_batches(checkpoint)
        second = Driver(*args, "processing")
        try:
            wait_batches(checkpoint, done + 3, second)
        finally:
            second.kill()
    finally:
        stop.set()
        producer.join(10)
    final = Driver(*args, "availableNow", "100000")
    assert final.wait(180) == 0, Path(final.log.name).read_text()[-3000:]
    rows = spark.read.parquet(str(out)).select("queue_id", "queue_offset", "body").collect()
    positions = [(r.queue_id, r.queue_offset) for r in rows]
    assert len(positions) == len(set(positions)), "a message was written twice"
    assert len(rows) == sent["n"], f"{len(rows)} rows for {sent['n']} messages sent"
    assert {r.body for r in rows} == {f"m-{i}".encode() for i in range(sent["n"])}
    per_queue: dict[int, list[int]] = {}
    for q, o in positions:
        per_queue.setdefault(q, []).append(o)
    for offsets in per_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))  # no gap in any queue
