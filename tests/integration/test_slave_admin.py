"""A slave takes no topic or subscription-group changes from admin tools (RocketMQ's
``validateSlave``): it copies them from its master, so a change made on the slave would only
be lost at the next copy.  The operator is told where to make it instead."""

from __future__ import annotations

from pathlib import Path

import orjson

from apogee.broker.processors.admin import SLAVE_READ_ONLY_REMARK
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.support.processes import ServerProcess, start_broker

T = 5000


async def test_a_slave_refuses_topic_and_group_changes_with_rocketmqs_remark(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    slave = start_broker(namesrv.addr, tmp_path / "slave", "brokerName=admin-ha\nbrokerRole=SLAVE\nbrokerId=1\n")
    client = RemotingClient()
    try:
        create = {"topic": "OnSlave", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
                  "perm": "6", "topicFilterType": "SINGLE_TAG"}
        group = orjson.dumps({"groupName": "on-slave", "consumeEnable": True})
        for req in (
            RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create),
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "OnSlave"}),
            RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, group),
            RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "on-slave"}),
        ):
            resp = await client.invoke(slave.addr, req, T)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_READ_ONLY_REMARK), req.code
        resp = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), T)
        assert "OnSlave" not in orjson.loads(resp.body_bytes())["topicConfigTable"]
    finally:
        await client.close()
        slave.close()
