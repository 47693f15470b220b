"""The Apache RocketMQ C++ client (rocketmq==0.4.4) against a NameServer and a broker in TLS
permissive mode: it speaks plain text (librocketmq 1.2.3 has no TLS: it links no TLS library)
and is served on the same ports that serve TLS clients."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.interop.conftest import Cluster, cpp, received, sent, start_broker, unique
from tests.support.processes import start_namesrv
from tests.support.tls import Certs, call, make_certs

pytestmark = [pytest.mark.interop]


@pytest.fixture(scope="module")
def permissive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Certs]]:
    base = tmp_path_factory.mktemp("tls-interop")
    certs = make_certs(base / "certs")
    tls = ("--tls-mode", "permissive", "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    namesrv = start_namesrv(base / "namesrv", *tls)
    try:
        broker = start_broker(namesrv.addr, base / "store", *tls)
        try:
            yield Cluster(namesrv, broker), certs
        finally:
            broker.close()
    finally:
        namesrv.close()


def test_cpp_client_produces_and_consumes_in_plain_text_on_a_permissive_cluster(
    permissive: tuple[Cluster, Certs],
) -> None:
    cluster, certs = permissive
    topic = unique("T_tls_plain")
    results = sent(cpp("produce", cluster.namesrv.addr, topic, "--count", 10, "--mode", "sync").wait())
    assert len(results) == 10 and all(r["status"] == 0 for r in results)
    got = received(cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 10).wait())
    assert sorted(int(m["props"]["seq"]) for m in got) == list(range(10))
    # The same ports take TLS meanwhile.
    for server, code in ((cluster.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO),
                         (cluster.broker, RequestCode.GET_BROKER_RUNTIME_INFO)):
        ctx = certs.client_context()
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=5),
                             server_hostname="127.0.0.1") as sock:
            assert call(sock, RemotingCommand.request(code)).code == ResponseCode.SUCCESS
