"""A slave's copy of its master's metadata (RocketMQ SlaveSynchronize, codes 21 43 45 201),
between real broker processes: what is created on the master appears on the slave within
11 s, survives the slave's restart, and the master's absence only pauses the copying."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from apogee.common.lenient_json import loads
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.integration.test_replication import GROUP
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker
from tests.support.waiting import wait_until
from tests.support.wire import send_request

T = 5000
SLAVE = GROUP + "brokerRole=SLAVE\nbrokerId=1\n"


async def ask(client: RemotingClient, addr: str, code: int, ext: dict[str, str] | None = None,
              body: bytes | None = None) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), T)


async def table(client: RemotingClient, addr: str, code: int, key: str) -> dict[str, object]:
    resp = await ask(client, addr, code)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    found: dict[str, object] = loads(resp.body_bytes()).get(key) or {}
    return found


def master_and_slave(namesrv: ServerProcess, root: Path, conf: str = GROUP) -> tuple[ServerProcess, ServerProcess]:
    """A master (``root/master``) and its slave, brokerId 1 (``root/slave``), of one group."""
    master = start_broker(namesrv.addr, root / "master", conf)
    return master, start_broker(namesrv.addr, root / "slave", conf + "brokerRole=SLAVE\nbrokerId=1\n")


async def test_topics_groups_and_offsets_created_on_the_master_appear_on_the_slave(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    master, slave = master_and_slave(namesrv, tmp_path)
    other: ServerProcess | None = None
    client = RemotingClient()
    topic, group = unique("Synced"), unique("synced_group")
    try:
        created = await ask(client, master.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
            "topicFilterType": "SINGLE_TAG",
        })
        assert created.code == ResponseCode.SUCCESS, created.remark
        config = {"groupName": group, "retryMaxTimes": 5, "whichBrokerWhenConsumeSlowly": 1}
        made = await ask(
            client, master.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(config)
        )
        assert made.code == ResponseCode.SUCCESS, made.remark
        for i in range(3):
            sent = await client.invoke(master.addr, send_request(topic, b"x", queue_id=i), T)
            assert sent.code == ResponseCode.SUCCESS
        committed = await ask(client, master.addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": "2", "commitOffset": "1",
        })
        assert committed.code == ResponseCode.SUCCESS, committed.remark
        delayed = await client.invoke(master.addr, send_request(topic, b"later", delay_level=1), T)
        assert delayed.code == ResponseCode.SUCCESS
        started = time.monotonic()

        async def slave_offset() -> int:
            resp = await ask(client, slave.addr, RequestCode.QUERY_CONSUMER_OFFSET,
                             {"consumerGroup": group, "topic": topic, "queueId": "2"})
            return int((resp.ext_fields or {}).get("offset", -1)) if resp.code == ResponseCode.SUCCESS else -1

        async def copied() -> bool:
            topics = await table(client, slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
            groups = await table(client, slave.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                 "subscriptionGroupTable")
            return topic in topics and group in groups and await slave_offset() == 1

        await wait_until(copied, 11, "the master's topic, group and offset on the slave", interval_s=0.2)
        assert time.monotonic() - started < 11
        topics = await table(client, slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
        assert topics[topic] == (await table(client, master.addr, RequestCode.GET_ALL_TOPIC_CONFIG,
                                             "topicConfigTable"))[topic]
        groups = await table(client, slave.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable")
        assert groups[group]["retryMaxTimes"] == 5  # type: ignore[index]

        async def delay_copied() -> bool:  # level 1 (1 s) delivered on the master, progress copied
            return (await table(client, slave.addr, RequestCode.GET_ALL_DELAY_OFFSET, "offsetTable")).get("1") == 1

        await wait_until(delay_copied, 15, "the master's delay progress on the slave", interval_s=0.2)

        # The master goes away: a slave that knows it says so at its next round and keeps
        # serving.  A second slave learns the master when it registers, and its first round
        # (3 s after it starts) finds the master gone; waiting for the first slave's next
        # round would take 10 s.
        other = start_broker(namesrv.addr, tmp_path / "other", GROUP + "brokerRole=SLAVE\nbrokerId=2\n")
        master.kill()
        # A restarted slave has the copies from its own files: there is no master to copy from.
        slave.close()
        slave = start_broker(namesrv.addr, tmp_path / "slave", SLAVE)
        assert topic in await table(client, slave.addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
        assert group in await table(client, slave.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                    "subscriptionGroupTable")
        assert await slave_offset() == 1
        assert (await table(client, slave.addr, RequestCode.GET_ALL_DELAY_OFFSET, "offsetTable")).get("1") == 1
        await wait_until(lambda: "cannot copy metadata from master" in other.stderr(), 15, "the slave to notice")
        await table(client, other.addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")  # still serving
    finally:
        await client.close()
        for server in (other, slave, master):
            if server is not None:
                server.close()
