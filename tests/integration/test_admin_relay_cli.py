"""``apogee admin`` commands whose server side is codes 25 UPDATE_BROKER_CONFIG, 318
UPDATE_NAMESRV_CONFIG, 306 CLEAN_EXPIRED_CONSUMEQUEUE and the broker's relays of 307
GET_CONSUMER_RUNNING_INFO and 309 CONSUME_MESSAGE_DIRECTLY to a live Apogee push consumer,
through the command line against real processes on loopback.

The client side is RocketMQ's wire (header fields and bodies of 4.9.8's MQClientAPIImpl); the
servers answer these codes from the w4-opsrest branch on (before it they answer
REQUEST_CODE_NOT_SUPPORTED, which the commands report as "does not serve request code ...").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from apogee.cli.admin import admin_group
from apogee.client import ConsumeResult, PushConsumer
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    base = tmp_path_factory.mktemp("relay")
    namesrv = start_namesrv(base / "ns")
    try:
        broker = start_broker(namesrv.addr, base / "store", "brokerName=broker-relay\n")
        try:
            yield namesrv, broker
        finally:
            broker.close()
    finally:
        namesrv.close()


def admin_json(ns: str, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(admin_group, [*args, "-n", ns, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output, result.stderr)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_update_broker_config(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    admin_json(namesrv.addr, "updateBrokerConfig", "-b", broker.addr, "-k", "fileReservedTime", "-v", "48")
    assert admin_json(namesrv.addr, "getBrokerConfig", "-b", broker.addr)["config"]["fileReservedTime"] == "48"


def test_update_namesrv_config(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, _ = cluster
    admin_json(namesrv.addr, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert admin_json(namesrv.addr, "getNamesrvConfig")[namesrv.addr]["orderMessageEnable"] == "true"


def test_clean_expired_consume_queue(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    out = admin_json(namesrv.addr, "cleanExpiredCQ", "-c", "DefaultCluster")
    assert out["lines"] == [f"clean expired ConsumeQueue on {broker.addr} success"]


async def test_consumer_status_and_consume_directly_through_the_broker(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    namesrv, broker = cluster
    ns, topic, group = namesrv.addr, unique("Relay"), unique("RelayGroup")
    await asyncio.to_thread(admin_json, ns, "updateTopic", "-b", broker.addr, "-t", topic, "-q", "1")
    received: list[bytes] = []

    async def listener(msgs: Any, ctx: Any) -> ConsumeResult:
        received.extend(m.body for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(group, ns, listener=listener, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    async with consumer:
        (sent,) = (await asyncio.to_thread(admin_json, ns, "sendMessage", "-t", topic, "-p", "hello"))["sent"]
        await wait_until(lambda: received == [b"hello"], 20, "the consumer to receive the message")
        conns = await asyncio.to_thread(admin_json, ns, "consumerConnection", "-g", group)
        (client_id,) = [c["clientId"] for c in conns["connections"]]

        status = await asyncio.to_thread(admin_json, ns, "consumerStatus", "-g", group, "-i", client_id)
        info = status["runningInfo"][client_id]
        assert any(s["topic"] == topic for s in info["subscriptionSet"])

        result = await asyncio.to_thread(admin_json, ns, "queryMsgById", "-i", sent["offsetMsgId"], "-g", group,
                                         "-d", client_id)
        assert result["consumeResult"]["consumeResult"] == "CR_SUCCESS"
        await wait_until(lambda: received == [b"hello", b"hello"], 10, "the message consumed again, directly")
