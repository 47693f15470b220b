"""A real broker gives RocketMQ 4.9.8's answers where a Java client saw Apogee differ (issue 18):
request codes it does not serve are logged, searchOffset picks the offset RocketMQ picks, and
batch records are stored with the batch's own properties as RocketMQ stores them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.server import MAX_UNSERVED_CODES_LOGGED
from tests.support.processes import ServerProcess, start_broker, start_namesrv

T = 5000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("answers")
    namesrv = start_namesrv(base / "ns")
    try:
        server = start_broker(namesrv.addr, base / "store", "brokerName=broker-a\n")
        yield server
        server.close()
    finally:
        namesrv.close()


def _local_addr(conn: Connection) -> str:
    return f"{conn.local[0]}:{conn.local[1]}"


def _unserved_lines(broker: ServerProcess) -> list[tuple[str, int]]:
    """(client address, code) of every unserved-code warning the broker logged so far."""
    return [
        (m.group(1), int(m.group(2)))
        for m in re.finditer(r"WARNING.* (\S+:\d+) sent request code (-?\d+), which this server does not serve",
                             broker.stderr())
    ]


async def test_each_unserved_code_is_logged_once_per_client_with_its_address(broker: ServerProcess) -> None:
    first, second = RemotingClient(), RemotingClient()
    try:
        for client, codes in ((first, (4242, 4242, 4243, 4242)), (second, (4242,))):
            for code in codes:
                resp = await client.invoke(broker.addr, RemotingCommand.request(code), T)
                assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                   f" request type {code} not supported")
        # Each answer left after its warning was written: the lines are there now.
        a = _local_addr(await first.connection(broker.addr))
        b = _local_addr(await second.connection(broker.addr))
        lines = [line for line in _unserved_lines(broker) if line[0] in (a, b)]
        assert sorted(lines) == sorted([(a, 4242), (a, 4243), (b, 4242)])
    finally:
        await first.close()
        await second.close()


async def test_a_client_trying_every_code_leaves_a_bounded_number_of_lines(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        for code in range(-1_000_000, -1_000_000 + 3 * MAX_UNSERVED_CODES_LOGGED):
            resp = await client.invoke(broker.addr, RemotingCommand.request(code), T)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        me = _local_addr(await client.connection(broker.addr))
        mine = [code for addr, code in _unserved_lines(broker) if addr == me]
        assert mine == list(range(-1_000_000, -1_000_000 + MAX_UNSERVED_CODES_LOGGED + 1))
        assert broker.stderr().count("further ones from this connection are not logged") == 1
        # The broker still serves this connection.
        resp = await client.invoke(broker.addr, RemotingCommand.request(30, {"topic": "TBW102", "queueId": "0"}), T)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()
