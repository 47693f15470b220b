from __future__ import annotations

import re

import pytest

from apogee.common.message_id import create_offset_msg_id, decode_offset_msg_id, ip_to_bytes
from apogee.common.uniq_id import UniqIdGenerator, create_uniq_id


def test_offset_msg_id_layout() -> None:
    msg_id = create_offset_msg_id("10.0.0.1", 10911, 0x1234)
    assert msg_id == "0A000001" + "00002A9F" + "0000000000001234"
    assert decode_offset_msg_id(msg_id) == ("10.0.0.1", 10911, 0x1234)


def test_offset_msg_id_accepts_raw_ip_bytes_and_large_offsets() -> None:
    msg_id = create_offset_msg_id(b"\x7f\x00\x00\x01", 1, (1 << 40) + 5)
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == ("127.0.0.1", 1, (1 << 40) + 5)


def test_decode_ipv6_offset_id() -> None:
    raw = bytes(15) + b"\x01" + (10911).to_bytes(4, "big") + (7).to_bytes(8, "big")
    assert decode_offset_msg_id(raw.hex().upper()) == ("::1", 10911, 7)


@pytest.mark.parametrize("bad", ["", "XYZ", "00" * 10])
def test_decode_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_offset_msg_id(bad)


def test_ipv6_peers_map_to_ipv4() -> None:
    assert ip_to_bytes("::ffff:10.1.2.3") == bytes([10, 1, 2, 3])
    assert ip_to_bytes("::1") == bytes(4)
    assert ip_to_bytes("not an ip") == bytes(4)


def test_uniq_ids_follow_java_layout_and_are_unique() -> None:
    gen = UniqIdGenerator("192.168.1.2", pid=0x1234)
    ids = [gen.next_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for msg_id in ids[:3]:
        assert re.fullmatch(r"[0-9A-F]{32}", msg_id)
        assert msg_id.startswith("C0A80102" + "1234")
    assert re.fullmatch(r"[0-9A-F]{32}", create_uniq_id())
