"""Address text without the socket module: the same text as socket's own conversions.

``socket.inet_ntoa`` / ``inet_ntop`` / ``inet_pton`` are pure functions (no socket is opened),
so they serve as the reference here."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.common.inet import ipv4_text, ipv6_bytes, ipv6_text
from apogee.common.message_id import ip_to_bytes

# Words that make zero runs of every length, IPv4-mapped and -compatible forms likely.
WORD = st.sampled_from([0, 0, 0, 1, 0xFFFF, 0x2001, 0xDB8]) | st.integers(0, 0xFFFF)
IPV6 = st.lists(WORD, min_size=8, max_size=8).map(lambda words: b"".join(w.to_bytes(2, "big") for w in words))


@given(st.binary(min_size=4, max_size=4), st.binary(max_size=8))
def test_ipv4_text_is_inet_ntoa(raw: bytes, before: bytes) -> None:
    assert ipv4_text(raw) == socket.inet_ntoa(raw)
    assert ipv4_text(memoryview(before + raw), len(before)) == socket.inet_ntoa(raw)


@given(IPV6 | st.binary(min_size=16, max_size=16))
def test_ipv6_text_is_inet_ntop(raw: bytes) -> None:
    text = ipv6_text(raw)
    assert text == socket.inet_ntop(socket.AF_INET6, raw)
    assert ipv6_bytes(text) == raw == socket.inet_pton(socket.AF_INET6, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("::", "::"), ("::1", "::1"), ("::2:0", "::0.2.0.0"), ("::ffff:0:0", "::ffff:0.0.0.0"),
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4"), ("::1.2.3.4", "::1.2.3.4"), ("1::", "1::"),
        ("1:0:0:2:0:0:0:3", "1:0:0:2::3"), ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"), ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
    ],
)
def test_ipv6_text_of_the_edge_cases(text: str, expected: str) -> None:
    raw = socket.inet_pton(socket.AF_INET6, text)
    assert ipv6_text(raw) == expected == socket.inet_ntop(socket.AF_INET6, raw)


@given(st.binary(min_size=4, max_size=4))
def test_ip_to_bytes_reads_what_inet_ntoa_writes(raw: bytes) -> None:
    assert ip_to_bytes(socket.inet_ntoa(raw)) == raw
