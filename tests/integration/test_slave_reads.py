"""Reading from slaves, with real processes: a consumer keeps consuming from the slave while
its master is gone and returns to the master once it is back (RocketMQ's
findBrokerAddressInSubscribe), and follows the master's suggestWhichBrokerId to a slave and
back with slaveReadEnable."""

from __future__ import annotations

from pathlib import Path

import orjson

from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer, SendStatus
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from tests.integration.client.conftest import FAST, FAST_CONSUMER
from tests.integration.test_replication import GROUP, runtime, wait_in_step
from tests.integration.test_slave_sync import ask, master_and_slave, table
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker
from tests.support.waiting import wait_until

CONSUMER = {**FAST_CONSUMER, "broker_suspend_max_time_ms": 1000}


async def gets(client: RemotingClient, addr: str) -> int:
    """Messages this broker has served to pulls since it started."""
    return int((await runtime(client, addr))["msgGetTotalTodayNow"])


async def on_slave(client: RemotingClient, slave: ServerProcess, code: int, key: str, name: str) -> None:
    async def copied() -> bool:
        return name in await table(client, slave.addr, code, key)

    await wait_until(copied, 15, f"{name} copied to the slave", interval_s=0.2)


async def test_a_consumer_reads_from_the_slave_while_the_master_is_gone_and_returns(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    master, slave = master_and_slave(namesrv, tmp_path)
    client = RemotingClient()
    topic, group = unique("OnSlave"), unique("on_slave")
    received: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        received.extend(m.body for m in msgs)

    try:
        async with Producer(unique("P"), namesrv.addr, **FAST) as producer:
            first = [await producer.send(Message(topic, b"before %d" % i)) for i in range(40)]
            assert all(r.status is SendStatus.SEND_OK for r in first)
            await wait_in_step(client, master, slave)
            await on_slave(client, slave, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable", topic)
            master.kill()
            consumer = PushConsumer(group, namesrv.addr, listener=listener, **CONSUMER)
            consumer.subscribe(topic)
            async with consumer:
                await wait_until(lambda: len(set(received)) >= 40, 30, "the messages, from the slave")
                assert await gets(client, slave.addr) >= 40
                master.close()
                master = start_broker(namesrv.addr, tmp_path / "master", GROUP)  # back, on a new port
                await wait_until(lambda: consumer.instance is not None and consumer.instance.master_addr(
                    first[0].message_queue.broker_name) == master.addr, 15, "the route to name the master again")
                later = [await producer.send(Message(topic, b"after %d" % i)) for i in range(40)]
                assert all(r.status is SendStatus.SEND_OK for r in later)
                # The slave follows the master's new HA address only at its next registration
                # (30 s): these are on the master alone, so the consumer went back to it.
                await wait_until(lambda: len(set(received)) >= 80, 30, "the later messages, from the master")
                assert await gets(client, master.addr) >= 40
        assert set(received) == {b"before %d" % i for i in range(40)} | {b"after %d" % i for i in range(40)}
        # Offsets committed while the master was away went to the slave.
        resp = await ask(client, slave.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": topic, "queueId": "0"})
        assert resp.code == ResponseCode.SUCCESS and int((resp.ext_fields or {})["offset"]) > 0
    finally:
        await client.close()
        slave.close()
        master.close()


async def test_with_slave_read_enable_the_consumer_follows_the_suggestion_to_the_slave_and_back(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    master, slave = master_and_slave(namesrv, tmp_path, GROUP + "slaveReadEnable=true\n")
    client = RemotingClient()
    topic, group = unique("Suggested"), unique("pinned")
    received: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        received.extend(m.body for m in msgs)

    async def set_group(broker_id: int) -> None:
        made = await ask(client, master.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         body=orjson.dumps({"groupName": group, "brokerId": broker_id}))
        assert made.code == ResponseCode.SUCCESS, made.remark

        async def copied() -> bool:
            groups = await table(client, slave.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                 "subscriptionGroupTable")
            return group in groups and groups[group]["brokerId"] == broker_id  # type: ignore[index]

        await wait_until(copied, 15, f"group {group} with brokerId {broker_id} on the slave", interval_s=0.2)

    try:
        async with Producer(unique("P"), namesrv.addr, **FAST) as producer:
            await producer.send(Message(topic, b"first"))  # creates the topic: copied in the same round
            await set_group(1)  # the group reads from broker 1 (RocketMQ SubscriptionGroupConfig.brokerId)
            await on_slave(client, slave, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable", topic)
            consumer = PushConsumer(group, namesrv.addr, listener=listener, **CONSUMER)
            consumer.subscribe(topic)
            async with consumer:
                await wait_until(lambda: b"first" in received, 20, "the first message")
                sent = 0

                async def slave_serves() -> bool:  # the master's first answer sends the consumer to 1
                    nonlocal sent
                    await producer.send(Message(topic, b"to slave %d" % sent))
                    sent += 1
                    return await gets(client, slave.addr) > 0

                await wait_until(slave_serves, 20, "pulls served by the slave", interval_s=0.2)
                master_before = await gets(client, master.addr)
                await set_group(0)

                async def master_serves() -> bool:  # the slave's answers now send it home
                    nonlocal sent
                    await producer.send(Message(topic, b"to master %d" % sent))
                    sent += 1
                    return await gets(client, master.addr) > master_before

                await wait_until(master_serves, 20, "pulls served by the master again", interval_s=0.2)
                await wait_until(lambda: len(set(received)) >= sent + 1, 20, "every message")
    finally:
        await client.close()
        slave.close()
        master.close()
