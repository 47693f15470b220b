"""The start-up warning of a server reachable beyond this machine without ACL (issue 22, item 4)."""

from __future__ import annotations

import pytest

from apogee.common.exposure import is_loopback, open_port_warning


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_stays_open_and_quiet(host: str) -> None:
    assert is_loopback(host)
    assert open_port_warning("broker", host, acl=False) is None
    assert open_port_warning("NameServer", host, acl=False) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "192.168.1.5", "10.0.0.1", "broker.example.com"])
def test_any_other_address_without_acl_warns_once_clearly(host: str) -> None:
    warning = open_port_warning("broker", host, acl=False)
    assert warning is not None and "ACL off" in warning and "aclEnable=true" in warning
    assert (host or "0.0.0.0") in warning


def test_a_broker_with_acl_does_not_warn_a_nameserver_has_none_and_does() -> None:
    assert open_port_warning("broker", "0.0.0.0", acl=True) is None
    warning = open_port_warning("NameServer", "0.0.0.0", acl=False)
    assert warning is not None and "no access control" in warning
