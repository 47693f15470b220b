"""Streaming queries run as driver processes of their own (the tests kill and restart them),
and the producer that keeps messages arriving meanwhile.

The feeder is paced by the query, not by the clock: one chunk of messages at start, one more
each time the query plans a batch (a new file under the checkpoint's ``offsets/``), and one
per second while nothing is planned (a driver being killed or starting).  Messages arrive
while batches are in flight and while no driver runs, as the tests need, but the source never
runs far ahead of the query: the final catch-up run stays a few batches long however slowly
a loaded machine starts the JVMs.
"""

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

from apogee.common.message import Message, MessageQueue
from tests.spark.conftest import BROKER, Apogee

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).parent / "jobs"


class Driver:
    """One run of a job under ``jobs/`` in its own session (process group), so a kill takes
    its JVM with it; output goes to a log under ``log_dir``."""

    def __init__(self, job: str, log_dir: Path, *args: str) -> None:
        self.log_path = log_dir / f"driver-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(JOBS / job), *args],
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
        except subprocess.TimeoutExpired:
            self.kill()  # never leave a Spark driver running behind a failed test
            raise
        finally:
            self.log.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def batch_files(checkpoint: Path, kind: str) -> set[int]:
    """Batch ids with a file in the checkpoint's ``offsets/`` (planned) or ``commits/`` (done)."""
    d = checkpoint / kind
    return {int(p.name) for p in d.iterdir() if p.name.isdigit()} if d.exists() else set()


class Feeder:
    """Sends ``prefix-<n>`` messages in chunks to random queues of ``topic`` from a thread,
    paced by the query's planned batches (see the module docstring).  ``sent`` counts them."""

    def __init__(
        self, cluster: Apogee, topic: str, checkpoint: Path, *, prefix: str, chunk: int, queues: int, seed: int
    ) -> None:
        self.cluster, self.topic, self.checkpoint = cluster, topic, checkpoint
        self.prefix, self.chunk, self.queues = prefix, chunk, queues
        self.rng = random.Random(seed)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        planned, last_send = -1, 0.0
        with self.cluster.producer() as producer:
            while not self._stop.is_set():
                now = len(batch_files(self.checkpoint, "offsets"))
                if now != planned or time.monotonic() - last_send >= 1.0:
                    planned, last_send = now, time.monotonic()
                    batch = [Message(self.topic, f"{self.prefix}-{self.sent + i}".encode()) for i in range(self.chunk)]
                    queue = MessageQueue(self.topic, BROKER, self.rng.randrange(self.queues))
                    producer.send_batch(batch, queue=queue)
                    self.sent += len(batch)
                self._stop.wait(0.01)
