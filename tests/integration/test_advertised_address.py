"""A broker started with ``--listen 127.0.0.1:PORT`` and no ``--broker-ip`` registers the address
it listens on, not the machine's first non-loopback one where nothing listens (issue 17 §8)."""

from __future__ import annotations

from pathlib import Path

from apogee.remoting.bodies.route import TopicRouteData, decode_cluster_info
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.support.processes import ServerProcess


async def test_a_broker_listening_on_loopback_registers_its_loopback_address(
    tmp_path: Path, namesrv: ServerProcess
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-lo\n")
    broker = ServerProcess(
        ["broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0", "--store-dir", str(tmp_path / "s")]
    ).start()
    client = RemotingClient()
    try:
        expected = f"127.0.0.1:{broker.port}"
        resp = await client.invoke(namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000)
        brokers, _ = decode_cluster_info(resp.body_bytes())
        assert brokers["broker-lo"].broker_addrs == {0: expected}
        # The route a client asks for (the broker's own topic exists from the start).
        resp = await client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "broker-lo"}), 3000
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert TopicRouteData.decode(resp.body_bytes()).broker_datas[0].broker_addrs == {0: expected}
        assert f"advertising {expected} to NameServers and in STOREHOST: the broker listens on 127.0.0.1 only" in (
            broker.stderr()
        )
    finally:
        await client.close()
        broker.close()
