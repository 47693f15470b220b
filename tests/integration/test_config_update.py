"""UPDATE_BROKER_CONFIG (25) and UPDATE_NAMESRV_CONFIG (318) against real processes: a key
the running code reads on every use changes at once, is persisted into the conf file (or the
default path without ``-c``) and survives a restart; every other key is refused with the
reason and changes nothing."""

from __future__ import annotations

from pathlib import Path

import orjson

from apogee.admin.client import AdminClient
from apogee.cli.admin.topics import wait_for_route
from apogee.common.config import parse_properties
from apogee.remoting.bodies.route import TopicRouteData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import send_request

T = 5000


async def _call(client: RemotingClient, addr: str, code: int, body: bytes | None = None,
                ext: dict[str, str] | None = None) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), T)


async def _settings(client: RemotingClient, addr: str, code: int) -> dict[str, str]:
    resp = await _call(client, addr, code)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return parse_properties(resp.body_bytes().decode())


async def _route_perm(client: RemotingClient, namesrv: str, topic: str) -> int:
    resp = await _call(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, ext={"topic": topic})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return TopicRouteData.decode(resp.body_bytes()).queue_datas[0].perm


async def test_broker_config_changes_live_persists_and_survives_a_restart(tmp_path: Path) -> None:
    namesrv = start_namesrv(tmp_path / "ns")
    store = tmp_path / "store"
    conf = tmp_path / "store.conf"
    broker: ServerProcess | None = None
    client = RemotingClient()
    try:
        broker = start_broker(namesrv.addr, store, "# my broker\nbrokerName=broker-cfg\nfileReservedTime=72\n")
        topic = unique("CfgTopic")
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, broker.addr, queues=1)
            await wait_for_route(admin, topic)
        before = await _call(client, broker.addr, RequestCode.GET_BROKER_CONFIG)
        assert orjson.loads(before.ext_fields["version"])["counter"] == 0

        # Refused requests change nothing, and say why.
        for body, code, words in (
            (b"listenPort=1234\n", ResponseCode.NO_PERMISSION, ["listenPort", "restart"]),
            (b"fileReservedTme=1\n", ResponseCode.SYSTEM_ERROR, ["did you mean 'fileReservedTime'"]),
            (b"fileReservedTime=soon\n", ResponseCode.SYSTEM_ERROR, ["fileReservedTime", "integer"]),
            (b"fileReservedTime=1\nflushDiskType=SYNC_FLUSH\n", ResponseCode.NO_PERMISSION, ["flushDiskType"]),
        ):
            resp = await _call(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG, body)
            assert resp.code == code, (body, resp.code, resp.remark)
            assert all(w in (resp.remark or "") for w in words), resp.remark
        assert (await _settings(client, broker.addr, RequestCode.GET_BROKER_CONFIG))["fileReservedTime"] == "72"

        # mqadmin updateBrokerConfig -k fileReservedTime -v 12, and a read-only broker.
        resp = await _call(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG,
                           b"fileReservedTime=12\nbrokerPermission=4\n")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        after = await _call(client, broker.addr, RequestCode.GET_BROKER_CONFIG)
        assert orjson.loads(after.ext_fields["version"])["counter"] == 1
        settings = parse_properties(after.body_bytes().decode())
        assert settings["fileReservedTime"] == "12" and settings["brokerPermission"] == "4"
        refused = await client.invoke(broker.addr, send_request(topic), T)
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
        # Registered again at once with the topics' permissions masked (RocketMQ's registerBrokerAll).
        async def masked() -> bool:
            return await _route_perm(client, namesrv.addr, topic) == 4

        await wait_until(masked, 10, "the route's permission masked to read-only")
        text = conf.read_text()
        assert text.startswith("# my broker\nbrokerName=broker-cfg\nfileReservedTime=12\n")
        assert "brokerPermission=4" in text

        broker.close()
        broker = ServerProcess(["broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0",
                                "--store-dir", str(store), "--broker-ip", "127.0.0.1"]).start()
        settings = await _settings(client, broker.addr, RequestCode.GET_BROKER_CONFIG)
        assert settings["fileReservedTime"] == "12" and settings["brokerPermission"] == "4"
    finally:
        await client.close()
        if broker is not None:
            broker.close()
        namesrv.close()


async def test_without_c_changes_persist_under_the_store_root(tmp_path: Path) -> None:
    store = tmp_path / "store"
    args = ["broker", "--listen", "127.0.0.1:0", "--store-dir", str(store), "--broker-ip", "127.0.0.1"]
    client = RemotingClient()
    try:
        with ServerProcess(args) as broker:
            resp = await _call(client, broker.addr, RequestCode.UPDATE_BROKER_CONFIG, b"deleteWhen=02;03\n")
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        saved = store / "config" / "broker.properties"
        assert parse_properties(saved.read_text()) == {"deleteWhen": "02;03"}
        with ServerProcess(args) as broker:
            assert (await _settings(client, broker.addr, RequestCode.GET_BROKER_CONFIG))["deleteWhen"] == "02;03"
    finally:
        await client.close()


async def test_namesrv_config_changes_live_persists_and_survives_a_restart(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# my NameServer\norderMessageEnable=false\n")
    args = ["namesrv", "-c", str(conf), "--listen", "127.0.0.1:0", "--home", str(tmp_path / "home")]
    client = RemotingClient()
    try:
        with ServerProcess(args) as namesrv:
            for body, code, word in (
                (b"configStorePath=/tmp/elsewhere\n", ResponseCode.NO_PERMISSION, "configStorePath"),
                (b"listenPort=1\n", ResponseCode.NO_PERMISSION, "restart"),
                (b"orderMessageEnabled=true\n", ResponseCode.SYSTEM_ERROR, "did you mean 'orderMessageEnable'"),
            ):
                resp = await _call(client, namesrv.addr, RequestCode.UPDATE_NAMESRV_CONFIG, body)
                assert resp.code == code and word in (resp.remark or ""), resp.remark
            resp = await _call(client, namesrv.addr, RequestCode.UPDATE_NAMESRV_CONFIG, b"orderMessageEnable=true\n")
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            settings = await _settings(client, namesrv.addr, RequestCode.GET_NAMESRV_CONFIG)
            assert settings["orderMessageEnable"] == "true" and settings["configStorePath"] == str(conf)
        assert conf.read_text() == "# my NameServer\norderMessageEnable=true\n"
        with ServerProcess(args) as namesrv:
            settings = await _settings(client, namesrv.addr, RequestCode.GET_NAMESRV_CONFIG)
            assert settings["orderMessageEnable"] == "true"
    finally:
        await client.close()
