"""Fixtures of the Spark tests: real ``apogee namesrv`` + ``apogee broker`` processes on loopback
and one local SparkSession for the whole run (JVM start-up costs ~5-8 s on this machine).

Spark runs at local[2] with the UI off and two shuffle partitions; the broker uses 64 MiB
CommitLog files and fast transaction check-backs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from apogee.client.sync import SyncProducer
from apogee.common.message import Message, MessageQueue
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from tests.support.names import unique as unique  # re-exported: the tests import it from here
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import block_until
from tests.support.wire import wait_cluster_caught_up

BROKER = "broker-s"
BROKER_CONF = (
    f"brokerName={BROKER}\n"
    "mappedFileSizeCommitLog=67108864\n"
    "enablePropertyFilter=true\n"
    "transactionCheckInterval=500\n"
    "transactionTimeOut=2000\n"
    "flushConsumerOffsetInterval=1000\n"
)


def start_broker(namesrv: str, store: Path, conf: str = BROKER_CONF) -> ServerProcess:
    conf_path = store.parent / f"{store.name}.conf"
    conf_path.parent.mkdir(parents=True, exist_ok=True)
    conf_path.write_text(conf)
    return ServerProcess(
        [
            "broker",
            "-n",
            namesrv,
            "-c",
            str(conf_path),
            "--listen",
            "127.0.0.1:0",
            "--store-dir",
            str(store),
            "--broker-ip",
            "127.0.0.1",
            "--log-level",
            "WARNING",
        ]
    ).start()


@dataclass
class Apogee:
    namesrv: ServerProcess
    broker: ServerProcess

    @property
    def ns(self) -> str:
        return self.namesrv.addr

    def create_topic(self, topic: str, queues: int = 8, broker: ServerProcess | None = None) -> str:
        api = runtime.runtime().api
        runtime.run(api.create_topic((broker or self.broker).addr, topic, queues), 10)
        wait_for_queues(self.ns, topic, queues)
        return topic

    def producer(self) -> SyncProducer:
        return SyncProducer(f"tp_{uuid.uuid4().hex[:6]}", self.ns, retry_times_when_send_failed=0).start()

    def send_to_queues(
        self,
        topic: str,
        per_queue: int,
        queues: int = 8,
        *,
        tags: tuple[str, ...] = ("TagA", "TagB"),
        body: Any = None,
        broker: str = BROKER,
    ) -> list[Message]:
        """``per_queue`` messages in each queue, queue by queue, with keys, tags and a property;
        returns once the brokers have made them readable."""
        sent = []
        with self.producer() as producer:
            for q in range(queues):
                batch = []
                for i in range(per_queue):
                    payload = body(q, i) if body else f"{topic}-{q}-{i}".encode()
                    msg = Message(topic, payload, properties={"seq": str(i)})
                    msg.tags = tags[i % len(tags)]
                    msg.keys = f"k{q}-{i}"
                    batch.append(msg)
                for start in range(0, len(batch), 256):
                    producer.send_batch(batch[start : start + 256], queue=MessageQueue(topic, broker, q))
                sent.extend(batch)
        asyncio.run(wait_cluster_caught_up(self.ns))
        return sent


def wait_for_queues(namesrv: str, topic: str, queues: int, timeout_s: float = 15) -> None:
    cluster = Cluster(runtime.runtime().api, namesrv)

    def routed() -> bool:
        try:
            return len(runtime.run(cluster.queues([topic]), 10)) >= queues
        except Exception:
            return False  # no route yet

    block_until(routed, timeout_s, f"a route for {topic} with {queues} queues", interval_s=0.05)


@pytest.fixture(scope="session")
def apogee_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apogee]:
    base = tmp_path_factory.mktemp("spark-cluster")
    namesrv = start_namesrv(base / "ns")
    broker = start_broker(namesrv.addr, base / "store")
    try:
        yield Apogee(namesrv, broker)
    finally:
        broker.close()
        namesrv.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from apogee.spark import local_session

    session = local_session("apogee-tests", memory="1g")
    try:
        yield session
    finally:
        session.stop()



def read(spark: Any, ns: str, **options: Any) -> Any:
    """A batch read of what the brokers hold once they have dispatched every message they
    acknowledged (a read right after a send could otherwise miss the last ones).  A NameServer
    that does not answer has nothing to wait for: the read itself reports it."""
    with contextlib.suppress(ConnectionError):
        asyncio.run(wait_cluster_caught_up(ns))
    reader = spark.read.format("apogee").option("namesrv", ns)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
