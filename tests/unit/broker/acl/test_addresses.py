"""plain_acl.yml address patterns, as RocketMQ's RemoteAddressStrategyFactory reads them."""

from __future__ import annotations

import pytest

from apogee.broker.acl.addresses import AddressPatternError, parse_pattern


@pytest.mark.parametrize(
    ("pattern", "address", "matches"),
    [
        ("*", "203.0.113.9", True),
        ("*.*.*.*", "203.0.113.9", True),
        ("", "127.0.0.1", False),  # blank matches nothing
        (None, "127.0.0.1", False),
        ("192.168.0.1", "192.168.0.1", True),
        ("192.168.0.1", "192.168.0.2", False),
        ("192.168.1.*", "192.168.1.200", True),
        ("192.168.1.*", "192.168.2.200", False),
        ("192.168.*.*", "192.168.77.1", True),
        ("10.*.*.*", "10.1.2.3", True),
        ("10.*.*.*", "11.1.2.3", False),
        ("192.168.*.5", "192.168.7.9", True),  # RocketMQ does not look past the range part
        ("192.168.1.10-100", "192.168.1.10", True),
        ("192.168.1.10-100", "192.168.1.100", True),
        ("192.168.1.10-100", "192.168.1.101", False),
        ("192.168.1.{1,2,3}", "192.168.1.3", True),
        ("192.168.1.{1,2,3}", "192.168.1.4", False),
        ("192.168.1.1,10.0.0.1", "10.0.0.1", True),
        ("192.168.1.1,10.0.0.1", "10.0.0.2", False),
        ("::1", "::1", True),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("1050:0:0:0:5:600:300c:*", "1050::5:600:300c:326b", True),
        ("1050::5:600:300c:*", "1050::5:600:300d:1", False),
        ("1050::0005:{1,2}", "1050::5:2", True),
        ("127.0.0.1", "::ffff:127.0.0.1", True),  # an IPv4 peer on an IPv6 socket
        ("192.168.1.*", "::1", False),
    ],
)
def test_patterns_match_as_rocketmq_reads_them(pattern: str | None, address: str, matches: bool) -> None:
    assert parse_pattern(pattern).match(address) is matches


@pytest.mark.parametrize("pattern", ["10.1.1", "1-5.1.1.1", "abc", "192.*", "10.1.1.300", "1.2.3.4,x", "1.2.3.5-1"])
def test_patterns_rocketmq_refuses_are_refused_when_read(pattern: str) -> None:
    with pytest.raises(AddressPatternError, match="Netaddress|netaddress"):
        parse_pattern(pattern)
