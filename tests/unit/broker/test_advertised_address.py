"""Which IP a broker registers with its NameServers (and writes into STOREHOST)."""

from __future__ import annotations

import pytest

from apogee.broker import config
from apogee.broker.config import advertised_ip


@pytest.fixture(autouse=True)
def _lan_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "local_ip", lambda: "192.0.2.9")  # what detection would find


def test_broker_ip1_wins() -> None:
    assert advertised_ip("10.1.2.3", "127.0.0.1")[0] == "10.1.2.3"


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.7", "::ffff:127.0.0.1"])
def test_a_specific_listen_address_is_advertised(host: str) -> None:
    ip, why = advertised_ip("", host)
    assert ip == host.removeprefix("::ffff:")
    assert "listens on" in why


def test_a_listen_host_name_is_advertised_as_its_address() -> None:
    assert advertised_ip("", "localhost")[0] == "127.0.0.1"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_a_wildcard_keeps_detection(host: str) -> None:
    ip, why = advertised_ip("", host)
    assert ip == "192.0.2.9" and "wildcard" in why and "brokerIP1" in why


def test_an_ipv6_only_listen_address_falls_back_to_detection_and_says_so() -> None:
    ip, why = advertised_ip("", "::1")
    assert ip == "192.0.2.9" and "no IPv4 address" in why
