from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.common import constants as c
from apogee.common import message_codec as mc

text_chars = st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
topics = st.text(text_chars, min_size=1, max_size=40).filter(
    lambda t: 0 < len(t.encode()) <= 127
)
prop_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00\x01\x02"),
                    min_size=1, max_size=20)
props_dicts = st.dictionaries(prop_text, prop_text, max_size=6)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)
ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
hosts = st.tuples(ipv4, st.integers(0, 65535))


@given(
    topic=topics, body=st.binary(max_size=2000), queue_id=ints32, flag=ints32, qoff=ints64,
    phys=ints64, sysflag=st.integers(0, 0x7FF).map(lambda f: f & ~0x31), born_ts=ints64,
    born=hosts, store_ts=ints64, store=hosts, reconsume=ints32, prepared=ints64, props=props_dicts,
)
def test_record_round_trip(topic, body, queue_id, flag, qoff, phys, sysflag, born_ts, born,
                           store_ts, store, reconsume, prepared, props) -> None:
    raw = mc.encode_record(
        topic=topic, body=body, queue_id=queue_id, flag=flag, queue_offset=qoff,
        physical_offset=phys, sysflag=sysflag, born_timestamp=born_ts, born_host=born,
        store_timestamp=store_ts, store_host=store, reconsume_times=reconsume,
        prepared_transaction_offset=prepared, properties=props,
    )
    props_len = len(mc.properties_to_string(props).encode())
    assert len(raw) == 91 + len(body) + len(topic.encode()) + props_len
    m = mc.decode_record(raw, inflate=False)
    assert (m.topic, m.body, m.flag, m.queue_id, m.queue_offset, m.commit_log_offset) == (
        topic, body, flag, queue_id, qoff, phys)
    assert (m.sys_flag, m.born_timestamp, m.born_host, m.store_timestamp, m.store_host) == (
        sysflag, born_ts, born, store_ts, store)
    assert (m.reconsume_times, m.prepared_transaction_offset, m.store_size) == (
        reconsume, prepared, len(raw))
    assert m.properties == props
    assert m.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert mc.check_record(raw, 0, len(raw), phys) == len(raw)


def test_fixed_field_offsets_are_rocketmq_s() -> None:
    raw = mc.encode_record(topic="T", body=b"abc", queue_id=7, queue_offset=9, physical_offset=1234,
                           store_timestamp=55, store_host=("10.0.0.1", 10911), properties="A\x01b")
    assert struct.unpack_from(">i", raw, 0)[0] == len(raw) == 91 + 3 + 1 + 3
    assert struct.unpack_from(">I", raw, 4)[0] == 0xDAA320A7
    assert struct.unpack_from(">i", raw, 12)[0] == 7
    assert struct.unpack_from(">q", raw, 20)[0] == 9
    assert struct.unpack_from(">q", raw, 28)[0] == 1234
    assert struct.unpack_from(">q", raw, 56)[0] == 55
    assert raw[64:72] == bytes([10, 0, 0, 1]) + (10911).to_bytes(4, "big")
    assert struct.unpack_from(">i", raw, 84)[0] == 3 and raw[88:91] == b"abc"
    assert raw[91] == 1 and raw[92:93] == b"T" and raw[93:95] == b"\x00\x03"
    m = mc.decode_record(raw)
    assert m.offset_msg_id == "0A00000100002A9F00000000000004D2" == m.msg_id


def test_msg_id_prefers_uniq_key() -> None:
    raw = mc.encode_record(topic="T", body=b"", properties={c.UNIQ_KEY: "ABC"})
    assert mc.decode_record(raw).msg_id == "ABC"


def test_decode_ipv6_hosts() -> None:
    sysflag = c.BORNHOST_V6_FLAG | c.STOREHOSTADDRESS_V6_FLAG
    body, topic, props = b"xy", b"T", b""
    head = struct.pack(">iiiiiqqiq", 0, mc.MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, 1, 0, 2, 3, sysflag, 4)
    v6 = bytes(15) + b"\x01"
    rest = (v6 + struct.pack(">i", 5) + struct.pack(">q", 6) + v6 + struct.pack(">i", 7)
            + struct.pack(">iqi", 0, 0, len(body)) + body + bytes([len(topic)]) + topic
            + struct.pack(">h", len(props)) + props)
    raw = bytearray(head + rest)
    struct.pack_into(">i", raw, 0, len(raw))
    m = mc.decode_record(bytes(raw))
    assert m.born_host == ("::1", 5) and m.store_host == ("::1", 7) and m.body == body
    assert len(m.offset_msg_id) == 56
    assert mc.check_record(raw, 0, len(raw), 3) == len(raw)
    assert mc.read_store_timestamp(raw) == 6
    assert mc.read_dispatch_fields(raw, 0).store_timestamp == 6


def test_compressed_body_is_inflated_unless_asked_not_to() -> None:
    body = b"hello " * 1000
    raw = mc.encode_record(topic="T", body=zlib.compress(body, 5), sysflag=c.COMPRESSED_FLAG)
    assert mc.decode_record(raw).body == body
    assert mc.decode_record(raw, inflate=False).body == zlib.compress(body, 5)
    lz4 = mc.encode_record(topic="T", body=b"\x00junk", sysflag=c.COMPRESSED_FLAG | 0x100)
    assert mc.decode_record(lz4).body == b"\x00junk"  # not zlib: handed on as stored
    broken = mc.encode_record(topic="T", body=b"not zlib", sysflag=c.COMPRESSED_FLAG)
    assert mc.decode_record(broken).body == b"not zlib"


def test_decode_records_back_to_back_stops_at_blank() -> None:
    a = mc.encode_record(topic="A", body=b"1")
    b = mc.encode_record(topic="B", body=b"22")
    blank = struct.pack(">ii", 100, mc.BLANK_MAGIC_CODE)
    msgs = mc.decode_records(a + b + blank + bytes(92))
    assert [m.topic for m in msgs] == ["A", "B"]
    with pytest.raises(ValueError):
        mc.decode_record(a[:-1] + b"")
    with pytest.raises(ValueError):
        mc.decode_record(bytes(100))


def test_check_record_rejects_damage() -> None:
    raw = bytearray(mc.encode_record(topic="T", body=b"payload", physical_offset=100))
    n = len(raw)
    assert mc.check_record(raw, 0, n, 100) == n
    assert mc.check_record(raw, 0, n, 101) == mc.RECORD_INVALID  # stale record elsewhere
    assert mc.check_record(raw, 0, n - 1, 100) == mc.RECORD_INVALID  # torn
    bad_crc = bytearray(raw)
    bad_crc[90] ^= 0xFF
    assert mc.check_record(bad_crc, 0, n, 100) == mc.RECORD_INVALID
    assert mc.check_record(bad_crc, 0, n, 100, check_crc=False) == n
    bad_magic = bytearray(raw)
    bad_magic[4] ^= 1
    assert mc.check_record(bad_magic, 0, n, 100) == mc.RECORD_INVALID
    bad_len = bytearray(raw)
    struct.pack_into(">i", bad_len, 84, 6)  # body length no longer adds up
    assert mc.check_record(bad_len, 0, n, 100, check_crc=False) == mc.RECORD_INVALID
    assert mc.check_record(bytes(200), 0, 200, 0) == mc.RECORD_INVALID
    blank = struct.pack(">ii", 64, mc.BLANK_MAGIC_CODE) + bytes(56)
    assert mc.check_record(blank, 0, 64, 0) == mc.RECORD_BLANK
    assert mc.check_record(blank, 0, 63, 0) == mc.RECORD_INVALID


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("A\x011", {"A": "1"}),
        ("A\x011\x02", {"A": "1"}),
        ("A\x011\x02B\x012\x02", {"A": "1", "B": "2"}),
        ("A\x01\x02B\x012", {"B": "2"}),  # empty value dropped (Java)
        ("\x011\x02B\x012", {"B": "2"}),  # empty name dropped
        ("junk\x02B\x01x\x01y", {"B": "x\x01y"}),  # no separator dropped; value keeps \x01
        ("\x02\x02", {}),
    ],
)
def test_parse_properties_leniently(text: str, expected: dict[str, str]) -> None:
    assert mc.parse_properties(text) == expected
    assert mc.parse_properties(text.encode()) == expected


@given(props_dicts)
def test_properties_round_trip(props: dict[str, str]) -> None:
    text = mc.properties_to_string(props)
    assert not text.endswith("\x02")
    assert mc.parse_properties(text) == props
    for name, value in props.items():
        assert mc.get_property(text, name) == value
        assert mc.get_property(text + "\x02", name) == value


def test_get_property_matches_whole_names_only() -> None:
    text = "XKEYS\x01no\x02KEYS\x01yes"
    assert mc.get_property(text, "KEYS") == "yes"
    assert mc.get_property("KEYS\x01\x02A\x01b", "KEYS") is None
    assert mc.get_property("", "KEYS") is None


def test_join_properties() -> None:
    assert mc.join_properties("A\x01b", "C\x01d") == "A\x01b\x02C\x01d"
    assert mc.join_properties("A\x01b\x02", "C\x01d") == "A\x01b\x02C\x01d"
    assert mc.join_properties("", "C\x01d") == "C\x01d"
    assert mc.join_properties("A\x01b", "") == "A\x01b"


def test_limits() -> None:
    with pytest.raises(ValueError):
        mc.topic_field("t" * 128)
    with pytest.raises(ValueError):
        mc.topic_field("a\x00b")
    with pytest.raises(ValueError):
        mc.properties_field("A\x01\x00")
    with pytest.raises(ValueError):
        mc.topic_field("")
    with pytest.raises(ValueError):
        mc.properties_field("x" * 32768)
    assert mc.properties_field("x" * 32767)[:2] == b"\x7f\xff"


batch_items = st.lists(st.tuples(ints32, st.binary(max_size=300), props_dicts), max_size=8)


@given(batch_items)
def test_batch_round_trip(items) -> None:
    body = mc.encode_batch(items)
    decoded = mc.decode_batch(body)
    assert [(i.flag, i.body, mc.parse_properties(i.properties)) for i in decoded] == items


def test_batch_layout_and_errors() -> None:
    body = mc.encode_batch([(3, b"ab", "K\x01v")])
    assert body == struct.pack(">iiiii", 20 + 2 + 2 + 3, 0, 0, 3, 2) + b"ab" + b"\x00\x03K\x01v"
    for bad in (body[:-1], body[:10], body + b"\x00", body[:4] + b"\x00" * 4 + body[8:12]):
        with pytest.raises(ValueError):
            mc.decode_batch(bad)
    wrong_size = bytearray(body)
    struct.pack_into(">i", wrong_size, 0, 99)
    with pytest.raises(ValueError):
        mc.decode_batch(bytes(wrong_size))
