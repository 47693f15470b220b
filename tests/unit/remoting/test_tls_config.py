"""TLS settings under RocketMQ's property names: parsing, tls.config.file, checks (no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from apogee.cli.broker import broker_command, load_broker_conf
from apogee.common.config import apply
from apogee.errors import ConfigError, RemoteProtocolError
from apogee.remoting.codec import FrameDecoder
from apogee.remoting.tls_config import (
    TLS_HANDSHAKE_RECORD,
    ClientAuth,
    TlsClientConfig,
    TlsMode,
    TlsServerConfig,
    apply_tls_file,
    secret_keys,
)


def test_rocketmq_keys_in_a_broker_conf_reach_the_tls_settings(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=b\ntls.server.mode=enforcing\ntls.server.certPath=/c.pem\ntls.server.keyPath=/k.pem\n"
        "tls.server.need.client.auth=require\ntls.server.trustCertPath=/ca.pem\ntls.enable=true\n"
        "tls.client.trustCertPath=/ca.pem\ntls.client.authServer=false\ntls.ha.enable=true\n"
    )
    server, client = TlsServerConfig(), TlsClientConfig()
    broker, _, _, unknown = load_broker_conf(str(conf), server, client)
    assert unknown == [] and broker.broker_name == "b"
    assert server.mode is TlsMode.ENFORCING and server.need_client_auth is ClientAuth.REQUIRE and server.ha_enable
    assert (server.cert_path, server.key_path, server.trust_cert_path) == ("/c.pem", "/k.pem", "/ca.pem")
    assert client.enable and client.ca_file == "/ca.pem" and not client.verifies
    server.validate()


def test_defaults_are_off_and_verify() -> None:
    server, client = TlsServerConfig(), TlsClientConfig()
    assert server.mode is TlsMode.DISABLED and not server.needs_context
    assert not client.enable and client.verifies
    server.validate()  # nothing to check while no port speaks TLS
    assert TLS_HANDSHAKE_RECORD == 0x16  # RocketMQ's HandshakeHandler HANDSHAKE_MAGIC_CODE


def test_a_tls_port_without_certificate_or_a_client_check_without_trust_is_refused() -> None:
    server = TlsServerConfig(mode=TlsMode.PERMISSIVE)
    with pytest.raises(ConfigError, match=r"tls.server.certPath and tls.server.keyPath"):
        server.validate()
    with pytest.raises(ConfigError, match="tls.server.certPath"):
        TlsServerConfig(ha_enable=True).validate()  # the HA port needs the certificate too
    server.cert_path, server.key_path = "/c.pem", "/k.pem"
    server.need_client_auth = ClientAuth.OPTIONAL
    with pytest.raises(ConfigError, match="tls.server.trustCertPath"):
        server.validate()
    with pytest.raises(ConfigError, match="tls.server.mode=.* expected one of"):
        apply(TlsServerConfig(), {"tls.server.mode": "strict"})
    with pytest.raises(ConfigError, match="tls.client.keyPath"):
        TlsClientConfig(enable=True, key_file="/k.pem").validate()


def test_tls_config_file_wins_over_the_servers_own_keys(tmp_path: Path) -> None:
    file = tmp_path / "tls.properties"
    file.write_text("tls.server.certPath=/new.pem\ntls.client.certPath=/client.pem\ntls.test.mode.enable=true\n")
    server = TlsServerConfig(mode=TlsMode.ENFORCING, cert_path="/old.pem", config_file=str(file))
    client = TlsClientConfig(enable=True)
    apply_tls_file(server, client)
    assert server.cert_path == "/new.pem" and server.mode is TlsMode.ENFORCING
    assert client.cert_file == "/client.pem" and not client.verifies


@pytest.mark.parametrize("key", ["tls.server.mode", "tls.enable", "tls.ha.enable"])
def test_tls_config_file_may_not_decide_which_ports_speak_tls(tmp_path: Path, key: str) -> None:
    file = tmp_path / "tls.properties"
    file.write_text(f"{key}=true\n")
    with pytest.raises(ConfigError, match=key):
        apply_tls_file(TlsServerConfig(config_file=str(file)), TlsClientConfig())


def test_unknown_keys_in_tls_config_file_are_named(tmp_path: Path) -> None:
    file = tmp_path / "tls.properties"
    file.write_text("tls.server.certpath=/typo.pem\n")
    with pytest.raises(ConfigError, match=r"unknown TLS keys tls.server.certpath"):
        apply_tls_file(TlsServerConfig(config_file=str(file)), TlsClientConfig())


def test_key_passwords_are_secret() -> None:
    assert secret_keys(TlsServerConfig(), TlsClientConfig()) == {"tls.server.keyPassword", "tls.client.keyPassword"}


def test_a_tls_client_on_a_plain_port_is_told_apart_from_a_bad_frame() -> None:
    client_hello_start = bytes([TLS_HANDSHAKE_RECORD, 3, 1, 2, 0, 1, 0, 1, 0xFC, 3, 3])
    with pytest.raises(RemoteProtocolError, match="a TLS handshake: the peer speaks TLS, this port does not"):
        FrameDecoder().feed(client_hello_start)
    with pytest.raises(RemoteProtocolError) as plain_garbage:
        FrameDecoder().feed(b"\x7f\x00\x00\x00rest")
    assert "TLS" not in str(plain_garbage.value)


def test_broker_options_override_the_file_and_print_config_hides_key_passwords(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("tls.server.mode=permissive\ntls.server.keyPassword=hunter2\ntls.client.keyPassword=hunter3\n")
    result = CliRunner().invoke(
        broker_command,
        ["-c", str(conf), "-p", "--tls-mode", "enforcing", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"],
    )
    assert result.exit_code == 0, result.output
    assert "tls.server.mode=ENFORCING" in result.output and "tls.server.certPath=/c.pem" in result.output
    assert "tls.server.keyPassword=***" in result.output and "tls.client.keyPassword=***" in result.output
    assert "hunter" not in result.output
