"""The Spark connector with a broker group that has a slave (issue 19): with the master
down, a batch read and a streaming read of a topic come from the slave, and the sink, which
writes only to masters, has nowhere to write."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from tests.integration.test_replication import wait_in_step
from tests.integration.test_slave_sync import table
from tests.spark.conftest import BROKER, BROKER_CONF, Apogee, read, start_broker, unique
from tests.spark.test_stream_read import run_available_now, stream
from tests.support.processes import start_namesrv
from tests.support.waiting import block_until, wait_until

pytestmark = pytest.mark.spark

NAME = "broker-ha"
CONF = BROKER_CONF.replace(f"brokerName={BROKER}", f"brokerName={NAME}")
PER_QUEUE = 25


async def slave_in_step(master: Any, slave: Any, topic: str) -> None:
    client = RemotingClient()
    try:
        await wait_in_step(client, master, slave)

        async def knows_topic() -> bool:  # copied by the slave's first metadata round (3 s)
            return topic in await table(client, slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")

        await wait_until(knows_topic, 15, f"{topic} on the slave", interval_s=0.2)
    finally:
        await client.close()


def test_batch_and_streaming_reads_come_from_the_slave_with_the_master_down(spark: Any, tmp_path: Path) -> None:
    namesrv = start_namesrv(tmp_path / "ns")
    master = start_broker(namesrv.addr, tmp_path / "master", CONF)
    slave = None
    try:
        group = Apogee(namesrv, master)
        topic = group.create_topic(unique("FromSlave"), 4)
        sent = group.send_to_queues(topic, PER_QUEUE, 4, broker=NAME)
        slave = start_broker(namesrv.addr, tmp_path / "slave", CONF + "brokerRole=SLAVE\nbrokerId=1\n")
        asyncio.run(slave_in_step(master, slave, topic))
        master.kill()
        cluster = Cluster(runtime.runtime().api, namesrv.addr)

        def master_gone() -> bool:
            route = runtime.run(cluster.route(topic), 10)
            return all(0 not in bd.broker_addrs for bd in route.broker_datas)

        block_until(master_gone, 15, "the NameServer to drop the master")
        assert set(runtime.run(cluster.queues([topic]), 10).values()) == {slave.addr}

        rows = read(spark, namesrv.addr, topic=topic).collect()
        positions = sorted((r.queue_id, r.queue_offset) for r in rows)
        assert positions == [(q, i) for q in range(4) for i in range(PER_QUEUE)]
        assert {r.body for r in rows} == {m.body for m in sent}
        assert {r.broker for r in rows} == {NAME}

        df = stream(spark, namesrv.addr, topic, startingOffsets="earliest")
        run_available_now(df, str(tmp_path / "out"), str(tmp_path / "cp"))
        streamed = spark.read.parquet(str(tmp_path / "out")).collect()
        assert sorted((r.queue_id, r.queue_offset) for r in streamed) == positions

        # Writes go to masters only: with none, the sink refuses instead of writing to the slave.
        with pytest.raises(Exception, match="(?i)master|route|writable"):
            writer = spark.createDataFrame([("x",)], ["body"]).write.mode("append").format("apogee")
            writer.option("namesrv", namesrv.addr).option("topic", topic).save()
    finally:
        for server in (slave, master, namesrv):
            if server is not None:
                server.close()
