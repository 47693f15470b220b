"""decode_records_fast (the consume path's decoder) == decode_records, on any records."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.common import constants as c
from apogee.common import message_codec as mc

text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00\x01\x02"), min_size=0, max_size=12)
records = st.builds(
    lambda topic, body, qid, flag, qoff, phys, compress, props, host, recon, born: mc.encode_record(
        topic=topic,
        body=zlib.compress(body) if compress else body,
        queue_id=qid,
        flag=flag,
        queue_offset=qoff,
        physical_offset=phys,
        sysflag=c.COMPRESSED_FLAG if compress else 0,
        store_host=host,
        born_host=born,
        reconsume_times=recon,
        properties=props,
    ),
    st.text(st.characters(whitelist_categories=["L", "N"]), min_size=1, max_size=20).filter(
        lambda t: len(t.encode()) <= 127
    ),
    st.binary(max_size=300),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.booleans(),
    st.dictionaries(text, text, max_size=5),
    st.tuples(st.sampled_from(["127.0.0.1", "10.1.2.3", "192.168.0.9"]), st.integers(0, 65535)),
    st.integers(0, 20),
    # every address (the C decoder writes the dotted text itself, and keeps recent hosts)
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
)


@given(st.lists(records, max_size=6))
def test_same_messages_as_decode_records(recs: list[bytes]) -> None:
    body = b"".join(recs)
    assert mc.decode_records_fast(body) == mc.decode_records(body)
    assert mc.decode_records_fast(body, inflate=False) == mc.decode_records(body, inflate=False)


def test_ipv6_and_malformed_records_take_the_reference_path() -> None:
    good = mc.encode_record(topic="T", body=b"x", properties={"UNIQ_KEY": "U"})
    v6 = bytearray(good)
    v6[mc.OFF_SYSFLAG + 3] |= 0x10  # claims an IPv6 born host: layout no longer matches
    with pytest.raises(ValueError):
        mc.decode_records(bytes(v6))
    with pytest.raises(ValueError):
        mc.decode_records_fast(bytes(v6))
    truncated = good[:-3]
    assert mc.decode_records_fast(truncated) == mc.decode_records(truncated)
    (m,) = mc.decode_records_fast(good)
    assert m.msg_id == "U" and m.offset_msg_id == mc.create_offset_msg_id("127.0.0.1", 0, 0)


def test_hosts_beyond_the_kept_ones_decode_the_same() -> None:
    # More distinct hosts than the C decoder keeps across calls, each coming back: every
    # record still gets its own host, decoded one body at a time and all together.
    recs = [
        mc.encode_record(topic="T", body=b"x", queue_offset=i, physical_offset=i,
                         born_host=(f"10.0.{i % 20}.{255 - i}", 7000 + i % 20),
                         store_host=(f"192.168.{i % 11}.1", 10911 + i % 11))
        for i in range(60)
    ]
    for rec in recs:
        assert mc.decode_records_fast(rec) == mc.decode_records(rec)
    assert mc.decode_records_fast(b"".join(recs)) == mc.decode_records(b"".join(recs))
