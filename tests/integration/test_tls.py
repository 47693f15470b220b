"""TLS on real NameServer and broker processes (issue 22, TLS): RocketMQ's three modes, mutual
TLS, bad handshakes, certificate reload on SIGHUP, Apogee's clients and admin CLI, and HA
replication over TLS.

One cluster for the module, certificates made by ``openssl`` in a temporary directory:
an enforcing NameServer, an enforcing broker (TLS on its HA port too, a short handshake
timeout) with a slave for the HA test, and a permissive broker that asks TLS clients for a
certificate (mutual TLS).  Both brokers register over TLS (``tls.enable``).  A permissive
NameServer serving the C++ client in plain text: tests/interop/test_cpp_tls_permissive.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apogee.client import LitePullConsumer, Message, Producer, TlsClientConfig
from apogee.errors import ConnectionClosedError
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.tls import client_tls
from tests.integration.test_replication import assert_replicas, send_many, wait_in_step
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.tls import Certs, call, make_certs, server_conf
from tests.support.waiting import block_until, wait_until

GROUP = "brokerName=tls-a\nmappedFileSizeCommitLog=1048576\nhaSendHeartbeatInterval=1000\n"
HANDSHAKE_MS = 1000


@dataclass
class Cluster:
    root: Path
    certs: Certs
    namesrv: ServerProcess
    master: ServerProcess  # enforcing, TLS on its HA port, certificate files of its own (reloaded)
    mtls: ServerProcess  # permissive, client certificate required on TLS connections
    master_cert: Path
    master_key: Path

    def client_tls(self, *, with_cert: bool = False) -> TlsClientConfig:
        return TlsClientConfig(
            enable=True, ca_file=str(self.certs.ca), cert_file=str(self.certs.client_cert) if with_cert else "",
            key_file=str(self.certs.client_key) if with_cert else "",
        )


def enforcing_conf(certs: Certs, cert: Path, key: Path) -> str:
    """An enforcing broker of group tls-a, which registers and calls its master with TLS."""
    return (
        GROUP + f"tls.server.mode=enforcing\ntls.server.certPath={cert}\ntls.server.keyPath={key}\n"
        f"tls.server.handshakeTimeoutMillis={HANDSHAKE_MS}\ntls.ha.enable=true\n"
        f"tls.enable=true\ntls.client.trustCertPath={certs.ca}\n"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("tls")
    certs = make_certs(root / "certs")
    own = root / "master-tls"
    own.mkdir()
    cert, key = own / "server.pem", own / "server.key"
    shutil.copy(certs.server_cert, cert)
    shutil.copy(certs.server_key, key)
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(root / "ns", "--tls-mode", "enforcing", "--tls-cert", str(certs.server_cert),
                                "--tls-key", str(certs.server_key))
        started.append(namesrv)
        master = start_broker(namesrv.addr, root / "master", enforcing_conf(certs, cert, key))
        started.append(master)
        mtls = start_broker(namesrv.addr, root / "mtls", "brokerName=tls-m\n" + server_conf(
            certs, "permissive", client_auth="require") + f"tls.enable=true\ntls.client.trustCertPath={certs.ca}\n")
        started.append(mtls)
        yield Cluster(root, certs, namesrv, master, mtls, cert, key)
    finally:
        for server in reversed(started):
            server.close()


def runtime_info() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)


def tls_socket(cluster: Cluster, port: int, *, with_cert: bool = False) -> ssl.SSLSocket:
    ctx = cluster.certs.client_context(with_cert=with_cert)
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="127.0.0.1")


def closed_by_server(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True once the server closed ``sock`` (end of stream or a reset) within ``timeout_s``."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def logged(server: ServerProcess, text: str) -> bool:
    return text in server.stderr()


def test_enforcing_broker_closes_a_plain_connection_and_answers_tls(cluster: Cluster) -> None:
    with socket.create_connection(("127.0.0.1", cluster.master.port), timeout=5) as plain, pytest.raises(OSError):
        call(plain, runtime_info())
    block_until(lambda: logged(cluster.master, "plain-text connection on a port that takes TLS only"), 10,
                "the broker's log line")
    with tls_socket(cluster, cluster.master.port) as sock:
        answer = call(sock, runtime_info())
    assert answer.code == ResponseCode.SUCCESS
    assert b"commitLogMaxOffset" in answer.body_bytes()


def test_enforcing_namesrv_closes_a_plain_connection_and_answers_tls(cluster: Cluster) -> None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    with socket.create_connection(("127.0.0.1", cluster.namesrv.port), timeout=5) as plain, pytest.raises(OSError):
        call(plain, request)
    block_until(lambda: logged(cluster.namesrv, "plain-text connection on a port that takes TLS only"), 10,
                "the NameServer's log line")
    with tls_socket(cluster, cluster.namesrv.port) as sock:
        answer = call(sock, request)
    assert answer.code == ResponseCode.SUCCESS
    # Both brokers registered over TLS (tls.enable).
    assert b"tls-a" in answer.body_bytes() and b"tls-m" in answer.body_bytes()


def test_permissive_port_serves_plain_and_tls_and_mutual_tls_wants_a_certificate(cluster: Cluster) -> None:
    port = cluster.mtls.port
    with tls_socket(cluster, port) as anonymous, pytest.raises((ssl.SSLError, ConnectionError)):
        call(anonymous, runtime_info())  # TLS 1.3: the refusal arrives after the client's handshake
    block_until(lambda: logged(cluster.mtls, "TLS handshake failed"), 10, "the broker's log line")
    with tls_socket(cluster, port, with_cert=True) as sock:
        assert call(sock, runtime_info()).code == ResponseCode.SUCCESS
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:  # permissive: plain on the same port
        assert call(plain, runtime_info()).code == ResponseCode.SUCCESS


async def test_apogee_client_produces_and_consumes_over_tls(cluster: Cluster) -> None:
    topic = unique("TlsTopic")
    tls = cluster.client_tls()
    async with Producer("tls-producer", cluster.namesrv.addr, tls=tls) as producer:
        sent = [await producer.send(Message(topic, f"secret-{i}".encode())) for i in range(10)]
    assert {r.message_queue.broker_name for r in sent} == {"tls-a"}
    consumer = LitePullConsumer(unique("tls-group"), cluster.namesrv.addr, tls=tls, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic)
    async with consumer:
        got: list[bytes] = []

        async def all_received() -> bool:
            got.extend(m.body for m in await consumer.poll(1000))
            return len(got) >= 10

        await wait_until(all_received, 20, "the 10 messages")
    assert sorted(got) == sorted(f"secret-{i}".encode() for i in range(10))


def test_spark_connector_tls_options_reach_the_enforcing_broker(cluster: Cluster) -> None:
    """The connector's runtime (no Spark needed): its TLS options pick a client that speaks TLS."""
    from apogee.spark import runtime
    from apogee.spark.broker import Cluster as SparkCluster
    from apogee.spark.options import parse_source_options

    topic = unique("TlsSpark")
    opts = parse_source_options({"namesrv": cluster.namesrv.addr, "topic": topic, "tlsCaFile": str(cluster.certs.ca)},
                                streaming=False)

    async def produce_then_ask() -> int:
        async with Producer("tls-spark", cluster.namesrv.addr, tls=opts.tls) as producer:
            sent = await producer.send(Message(topic, b"x"))
        api = runtime.runtime().api_for(opts.tls)
        route = await SparkCluster(api, opts.namesrv, opts.request_timeout_ms).route(topic)
        addr = route.broker_datas[0].broker_addrs[0]
        # Asked until the message is dispatched (the ConsumeQueue trails the send's answer); the
        # wire helpers cannot wait here: they speak plain text, and this broker enforces TLS.
        return await wait_until(lambda: api.get_max_offset(addr, topic, sent.message_queue.queue_id), 10,
                                "the message in the queue's max offset")

    try:
        assert runtime.run(produce_then_ask(), 30) >= 1
    finally:
        runtime.shutdown()


async def test_server_name_option_checks_the_certificate_for_that_name(cluster: Cluster) -> None:
    """A certificate for "localhost" reached at 127.0.0.1: the server name is what is checked."""
    for name, works in (("wrong.example", False), ("localhost", True)):
        cfg = cluster.client_tls()
        cfg.server_name = name
        client = RemotingClient(tls=client_tls(cfg))
        try:
            if works:
                answer = await client.invoke(cluster.master.addr, runtime_info(), 5000)
                assert answer.code == ResponseCode.SUCCESS
            else:
                with pytest.raises(ConnectionClosedError, match="tls.client.serverName"):
                    await client.invoke(cluster.master.addr, runtime_info(), 5000)
        finally:
            await client.close()


def test_stalled_and_broken_handshakes_close_that_connection_only(cluster: Cluster) -> None:
    port = cluster.master.port
    silent = socket.create_connection(("127.0.0.1", port), timeout=5)
    stalled = socket.create_connection(("127.0.0.1", port), timeout=5)
    garbage = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, then nothing
        garbage.sendall(b"\x16" + b"\xff" * 600)  # a handshake record byte, then noise
        assert closed_by_server(garbage)
        with tls_socket(cluster, port) as sock:  # served meanwhile
            assert call(sock, runtime_info()).code == ResponseCode.SUCCESS
        started = time.monotonic()
        assert closed_by_server(stalled) and closed_by_server(silent)
        assert time.monotonic() - started < HANDSHAKE_MS / 1000 * 5
    finally:
        for sock in (silent, stalled, garbage):
            sock.close()
    block_until(lambda: logged(cluster.master, "no complete TLS handshake within 1000 ms"), 10, "the timeout log line")
    assert "TLS handshake failed" in cluster.master.stderr()
    with tls_socket(cluster, port) as sock:
        assert call(sock, runtime_info()).code == ResponseCode.SUCCESS


def test_admin_cli_speaks_tls_with_options_and_environment(cluster: Cluster) -> None:
    env = {**os.environ, "APOGEE_TLS_CA": str(cluster.certs.ca)}
    result = subprocess.run(
        [sys.executable, "-m", "apogee", "admin", "cluster-list", "-n", cluster.namesrv.addr, "--json",
         "--tls-cert", str(cluster.certs.client_cert), "--tls-key", str(cluster.certs.client_key)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # Both brokers answered their runtime info: the enforcing one and the mutual-TLS one.
    assert cluster.master.addr in result.stdout and cluster.mtls.addr in result.stdout
    assert "error" not in result.stderr.lower()


async def test_ha_replicates_over_tls(cluster: Cluster) -> None:
    ha_port = int(re.search(r"HA port listening on [\d.]+:(\d+) \(TLS\)", cluster.master.stderr()).group(1))  # type: ignore[union-attr]
    with socket.create_connection(("127.0.0.1", ha_port), timeout=5) as plain:
        plain.sendall((0).to_bytes(8, "big"))  # a RocketMQ slave's plain report: refused
        assert closed_by_server(plain)
    slave = start_broker(cluster.namesrv.addr, cluster.root / "slave1",
                         enforcing_conf(cluster.certs, cluster.certs.server_cert, cluster.certs.server_key)
                         + "brokerRole=SLAVE\nbrokerId=1\n")
    client = RemotingClient(tls=client_tls(cluster.client_tls()))
    topic = unique("TlsReplicated")
    try:
        await send_many(client, cluster.master.addr, topic, 0, 300)
        await wait_in_step(client, cluster.master, slave)
        assert_replicas(cluster.root, topic, ("slave1",))
        assert "connected to the master's HA port" in slave.stderr()
    finally:
        await client.close()
        slave.close()


def test_sighup_reloads_certificates_and_keeps_open_connections(cluster: Cluster) -> None:
    port = cluster.master.port
    der = ssl.PEM_cert_to_DER_cert
    old = der(cluster.master_cert.read_text())
    with tls_socket(cluster, port) as before:
        assert before.getpeercert(binary_form=True) == old
        assert call(before, runtime_info()).code == ResponseCode.SUCCESS
        new_cert, new_key = cluster.certs.issue_server("reloaded")
        os.replace(new_key, cluster.master_key)
        os.replace(new_cert, cluster.master_cert)
        new = der(cluster.master_cert.read_text())
        assert new != old
        os.kill(cluster.master.pid, signal.SIGHUP)
        block_until(lambda: logged(cluster.master, "TLS certificates reloaded"), 10, "the reload log line")
        assert call(before, runtime_info()).code == ResponseCode.SUCCESS  # the open connection lives on
        with tls_socket(cluster, port) as after:
            seen = after.getpeercert(binary_form=True)
            assert call(after, runtime_info()).code == ResponseCode.SUCCESS
        assert seen is not None and hashlib.sha256(seen).digest() == hashlib.sha256(new).digest()


def test_dashboard_reaches_an_enforcing_cluster_with_tls_options(cluster: Cluster) -> None:
    dashboard = ServerProcess(["dashboard", "-n", cluster.namesrv.addr, "--listen", "127.0.0.1:0",
                               "--tls-ca", str(cluster.certs.ca), "--tls-cert", str(cluster.certs.client_cert),
                               "--tls-key", str(cluster.certs.client_key)])
    with dashboard, urllib.request.urlopen(f"http://{dashboard.addr}/cluster", timeout=30) as page:
        html = page.read().decode()
    # Both brokers are listed with their figures: the dashboard spoke TLS to NameServer and brokers.
    assert cluster.master.addr in html and cluster.mtls.addr in html
    assert "down" not in html.lower()
