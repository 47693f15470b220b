"""The C speed-ups (apogee._native) against their pure-Python references.

Each C function must give exactly what its reference gives; where the reference raises or
the C path declines (scan_batch answering None), the pure path stays in charge.
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.common.java_hash import index_hashes_py, java_hash_unsigned_py, tags_code

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(texts, st.integers(0, 0xFFFFFFFF))
def test_java_hash_matches_reference(s: str, prefix: int) -> None:
    assert native.java_hash(s) == java_hash_unsigned_py(s)
    assert native.java_hash(s, prefix) == (prefix * pow(31, len(s.encode("utf-16-le")) // 2, 1 << 32)
                                           + java_hash_unsigned_py(s)) & 0xFFFFFFFF


def test_java_hash_known_values() -> None:
    assert native.java_hash("hello") == 99162322
    assert native.java_hash("\U0001F600") == java_hash_unsigned_py("\U0001F600")  # surrogate pair


@given(st.binary(max_size=600), st.integers(0, 0xFFFFFFFF), st.integers(0, 15))
def test_crc32_matches_zlib(data: bytes, value: int, skip: int) -> None:
    """Every length around the 64-byte fold block and the 16-byte steps, any start value, and
    views that do not start on a 16-byte boundary."""
    view = memoryview(data)[min(skip, len(data)) :]
    assert native.crc32(view, value) == zlib.crc32(view, value)
    assert native.crc32(data) == zlib.crc32(data)


def test_crc32_of_every_length_and_large_inputs() -> None:
    rng = random.Random(7)
    data = rng.randbytes(4096 + 64)
    for n in range(0, 300):
        assert native.crc32(data[:n], n * 0x9E3779B9 & 0xFFFFFFFF) == zlib.crc32(data[:n], n * 0x9E3779B9 & 0xFFFFFFFF)
    big = rng.randbytes(3 << 20)  # past the size from which the GIL is released
    assert native.crc32(big) == zlib.crc32(big)
    assert native.crc32(bytearray(big), 5) == zlib.crc32(big, 5)
    assert mc.body_crc(big) == zlib.crc32(big) & 0x7FFFFFFF


@given(st.integers(0, 0xFFFFFFFF), st.lists(texts, max_size=5))
def test_index_hashes_match_reference(prefix: int, keys: list[str]) -> None:
    assert native.index_hashes(prefix, keys) == index_hashes_py(prefix, keys)


items_strategy = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64),
              st.dictionaries(st.text("abcKEYS_ ", min_size=1, max_size=6), st.text("xyz é😀", min_size=1, max_size=8),
                              max_size=3).map(mc.properties_to_string)),
    max_size=6,
)


@given(items_strategy)
def test_encode_batch_matches_reference(items: list[tuple[int, bytes, str]]) -> None:
    assert native.encode_batch(items) == mc.encode_batch_py(items)


def _scan_reference(body: bytes, batch_props: str, max_body: int) -> tuple[int, int] | None:
    """What scan_batch must answer when it accepts: decode_batch's items, sized as records."""
    items = mc.decode_batch(body)
    size = 0
    for it in items:
        joined = mc.join_properties(it.properties, batch_props).encode()
        size += mc.OFF_BODY + len(it.body) + 2 + len(joined)
    return len(items), size


@settings(max_examples=300)
@given(items_strategy.filter(bool), st.sampled_from(["", "CLUSTER\x01DefaultCluster"]), st.data())
def test_scan_batch_accepts_only_what_the_pure_path_accepts(items: list[tuple[int, bytes, str]], bprops: str,
                                                            data: st.DataObject) -> None:
    body = bytearray(mc.encode_batch_py(items))
    if data.draw(st.booleans()) and body:  # damage it
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    body = bytes(body)
    got = native.scan_batch(body, bprops.encode(), 48)
    if got is None:
        return  # declined: the pure path decides
    assert got == _scan_reference(body, bprops, 48)
    decoded = mc.decode_batch(body)
    assert all(0 < len(it.body) <= 48 and "\x00" not in it.properties for it in decoded)
    assert all(mc.get_property(it.properties, "DELAY") is None for it in decoded)


def test_scan_batch_declines_what_needs_an_answer() -> None:
    ok = mc.encode_batch_py([(0, b"x", "TAGS\x01A")])
    assert native.scan_batch(ok, b"", 10) == (1, mc.OFF_BODY + 1 + 2 + len("TAGS\x01A"))
    assert native.scan_batch(b"", b"", 10) is None
    assert native.scan_batch(mc.encode_batch_py([(0, b"", "")]), b"", 10) is None  # empty body
    assert native.scan_batch(mc.encode_batch_py([(0, b"x" * 11, "")]), b"", 10) is None  # too big
    assert native.scan_batch(mc.encode_batch_py([(0, b"x", "DELAY\x013")]), b"", 10) is None
    assert native.scan_batch(mc.encode_batch_py([(0, b"x", "A\x01\x00")]), b"", 10) is None  # NUL
    assert native.scan_batch(ok[:-1], b"", 10) is None  # truncated
    bad_utf8 = ok[:-1] + b"\xff"
    assert native.scan_batch(bad_utf8, b"", 10) is None
    assert native.scan_batch(mc.encode_batch_py([(0, b"x", "K\x01" + "v" * 32760)]), b"CLUSTER\x01c", 10) is None


def test_write_batch_records_equal_write_record() -> None:
    rng = random.Random(7)
    items = []
    for i in range(40):
        props = {"TAGS": rng.choice(["A", "B", "é", ""]), "KEYS": rng.choice(["k1 k2", " k3  ", "😀 x", ""]),
                 "UNIQ_KEY": f"U{i}" if i % 3 else ""}
        items.append((rng.randrange(-5, 5), bytes(rng.randrange(256) for _ in range(rng.randrange(1, 30))),
                      mc.properties_to_string({k: v for k, v in props.items() if v})))
    body = mc.encode_batch_py(items)
    bprops = "CLUSTER\x01DefaultCluster"
    count, size = native.scan_batch(body, bprops.encode(), 1 << 20)
    tf = mc.topic_field("TopicX")
    buf = bytearray(size + count * len(tf) + 10)
    cq, index, ids, tags = native.write_batch(buf, 10, body, bprops.encode(), tf, 3, 100, 5000, 0, 77,
                                              bytes([10, 0, 0, 2]), 5000, 88, bytes([10, 0, 0, 1]), 10911, 0, 12345)
    expected = bytearray(10)
    phys = 5000
    want_cq = b""
    offsets = []
    for n, (flag, b, p) in enumerate(items):
        joined = mc.join_properties(p, bprops)
        rec = mc.encode_record(topic="TopicX", body=b, queue_id=3, flag=flag, queue_offset=100 + n,
                               physical_offset=phys, born_timestamp=77, born_host=("10.0.0.2", 5000),
                               store_timestamp=88, store_host=("10.0.0.1", 10911), properties=joined)
        expected += rec
        offsets.append(phys)
        want_cq += struct.pack(">qiq", phys, len(rec), tags_code(mc.get_property(joined, "TAGS")))
        phys += len(rec)
    assert bytes(buf) == bytes(expected)
    assert cq == want_cq
    assert ids.split(",") == [mc.create_offset_msg_id("10.0.0.1", 10911, off) for off in offsets]
    assert sorted(tags) == sorted({struct.unpack_from(">q", want_cq, i * 20 + 12)[0] for i in range(count)})
    # index entries: UNIQ_KEY, then KEYS tokens, per message, with its offset
    want_index = []
    phys = 5000
    for _flag, b, p in items:
        joined = mc.join_properties(p, bprops)
        tokens = [t for t in [mc.get_property(joined, "UNIQ_KEY")] if t]
        tokens += [t for t in (mc.get_property(joined, "KEYS") or "").split(" ") if t]
        want_index += [(h, phys) for h in index_hashes_py(12345, tokens)]
        phys += mc.record_size(len(b), len(tf), 2 + len(joined.encode()))
    got_index = [struct.unpack_from("=I4xq", index, i) for i in range(0, len(index), 16)]
    assert got_index == want_index


records_strategy = st.lists(
    st.fixed_dictionaries({
        "topic": st.text("abcé中", min_size=1, max_size=10),
        "body": st.binary(max_size=40),
        "props": st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "ü"]),
                                 st.text("xy 😀\x01", min_size=0, max_size=5), max_size=4),
        "sysflag": st.sampled_from([0, 0x1, 0x4]),
        "flag": st.integers(-(2**31), 2**31 - 1),
        "qoff": st.integers(0, 2**62),
        "store_host": st.sampled_from([("10.0.0.1", 10911), ("192.168.1.200", 1)]),
    }),
    max_size=6,
)


@settings(max_examples=200)
@given(records_strategy, st.booleans())
def test_decode_records_matches_reference(records: list[dict], inflate: bool) -> None:
    import zlib
    buf = b""
    for r in records:
        body = zlib.compress(r["body"]) if r["sysflag"] & 1 else r["body"]
        buf += mc.encode_record(topic=r["topic"], body=body, flag=r["flag"], queue_offset=r["qoff"],
                                physical_offset=len(buf), sysflag=r["sysflag"], born_host=("1.2.3.4", 5),
                                store_host=r["store_host"], properties=mc.properties_to_string(r["props"]))
    assert mc.decode_records_fast(buf, inflate=inflate) == mc._decode_records_fast_py(buf, inflate=inflate) \
        == mc.decode_records(buf, inflate=inflate)


def test_decode_records_stops_at_blank_and_reports_malformed() -> None:
    one = mc.encode_record(topic="T", body=b"x", properties="UNIQ_KEY\x01U1")
    blank = struct.pack(">ii", 64, mc.BLANK_MAGIC_CODE) + bytes(56)
    assert [m.msg_id for m in mc.decode_records_fast(one + blank + one)] == ["U1"]
    with pytest.raises(ValueError):
        mc.decode_records_fast(one + one[:50] + bytes(20))


@given(st.dictionaries(texts, st.one_of(st.none(), texts), max_size=5))
def test_properties_to_string_matches_reference(props: dict[str, str | None]) -> None:
    assert native.properties_to_string(props) == mc.properties_to_string_py(props)  # type: ignore[arg-type]


def test_properties_to_string_refuses_non_str_and_falls_back() -> None:
    with pytest.raises(TypeError):
        native.properties_to_string({"a": 1})
    assert mc.properties_to_string({"a": 1}) == "a\x011"  # type: ignore[dict-item]


def test_strict_properties_string_declines_what_validation_refuses() -> None:
    assert native.properties_to_string({"a": "b", "c": "d"}, True) == "a\x01b\x02c\x01d"
    for bad in ({"a": "x\x01y"}, {"a\x02": "y"}, {"": "y"}, {"a": None}, {"a": 1}):
        assert native.properties_to_string(bad, True) is None


def test_uniq_id_now_reads_the_clock_and_reports_the_month_rollover() -> None:
    import time

    now = int(time.time() * 1000)
    got = native.uniq_id_now("P", now - 5000, now + 60_000, 0x12345)
    assert got[:1] == "P" and got[-4:] == "2345" and 5000 <= int(got[1:9], 16) < 65_000
    assert native.uniq_id_now("P", now - 5000, now - 1, 1) is None


props_dicts = st.dictionaries(texts, st.one_of(texts, st.none(), st.integers()), max_size=5)


@given(props_dicts, st.binary(min_size=1, max_size=300), st.integers(0, 0x7FFFFFFF), st.booleans())
def test_batch_append_matches_the_checked_path(props: dict, body: bytes, flag: int, has_uniq: bool) -> None:
    """batch_append appends exactly encode_batch_item's bytes after giving the message a
    UNIQ_KEY, or declines, leaving the buffer alone, whenever the checked path refuses."""
    import time

    if has_uniq:
        props["UNIQ_KEY"] = "U1"
    before = dict(props)
    buf = bytearray(b"head")
    now = int(time.time() * 1000)
    uniq = native.batch_append(buf, flag, body, props, "AB", now - 1000, now + 60_000, 7)
    try:
        expected_text = mc.properties_to_string_py(props) if native.properties_to_string(props, True) else None
    except TypeError:
        expected_text = None
    if uniq is None:
        assert buf == b"head"
        assert expected_text is None or len(expected_text.encode("utf-8", "surrogatepass")) > 32767
        return
    assert expected_text is not None
    assert uniq == props["UNIQ_KEY"]
    if has_uniq:
        assert uniq == "U1" and props == before
    else:
        assert uniq.startswith("AB") and uniq.endswith("0007") and len(uniq) == 14
    assert bytes(buf) == b"head" + mc.encode_batch_item(flag, body, expected_text)
    assert mc.decode_batch(bytes(buf[4:]))[0].body == body


def test_batch_append_declines_long_properties_and_a_month_rollover() -> None:
    import time

    now = int(time.time() * 1000)
    buf = bytearray()
    assert native.batch_append(buf, 0, b"x", {"k": "v" * 40_000}, "P", now - 1, now + 60_000, 1) is None
    props: dict[str, str] = {}
    assert native.batch_append(buf, 0, b"x", props, "P", now - 5000, now - 1, 1) is None
    assert buf == b"" and props == {}
    with pytest.raises(ValueError):
        mc.encode_batch_item(0, b"x", "k\x01" + "v" * 40_000)


def test_complete_sends_matches_send_results() -> None:
    import asyncio

    from apogee.client.api import send_results
    from apogee.client.types import SendResult, SendStatus
    from apogee.common.message import MessageQueue

    loop = asyncio.new_event_loop()
    try:
        mq = MessageQueue("T", "b", 3)
        futures = [loop.create_future() for _ in range(4)]
        futures[2].set_result("already")
        uniqs, ids = ["u0", "", "u2", "u3"], ["o0", "o1", "o2", "o3"]
        native.complete_sends(futures, SendResult, SendStatus.SEND_OK, uniqs, ids, mq, 100, "r", True)
        expected = send_results(uniqs, SendStatus.SEND_OK, ids, mq, 100, "r", True)
        got = [f.result() for f in futures]
        assert got[2] == "already"
        assert [g for i, g in enumerate(got) if i != 2] == [e for i, e in enumerate(expected) if i != 2]
        assert type(got[0]) is SendResult and got[1].msg_id == "o1" and got[3].queue_offset == 103
        with pytest.raises(ValueError):
            native.complete_sends(futures, SendResult, SendStatus.SEND_OK, uniqs[:2], ids, mq, 0, "", False)
    finally:
        loop.close()


def test_complete_sends_results_cost_the_collector_nothing_and_are_still_freed() -> None:
    """An application that keeps its futures keeps their results: untracked, a full
    collection does not walk them, and a cycle holding their futures is still collected."""
    import asyncio
    import gc
    import weakref

    from apogee.client.types import SendResult, SendStatus
    from apogee.common.message import MessageQueue

    loop = asyncio.new_event_loop()
    try:
        futures = [loop.create_future() for _ in range(3)]
        native.complete_sends(
            futures, SendResult, SendStatus.SEND_OK, ["u0", "u1", "u2"], ["o0", "o1", "o2"], MessageQueue("T", "b", 0),
            7, "r", False,
        )
        results = [f.result() for f in futures]
        assert not any(gc.is_tracked(r) for r in results)
        assert gc.is_tracked(SendResult(SendStatus.SEND_OK, "u", "o", MessageQueue("T", "b", 0), 7))  # else tracked
        cycle: list[object] = [*futures]
        cycle.append(cycle)
        watch = weakref.ref(futures[0])
        del futures, results, cycle
        gc.collect()
        assert watch() is None
    finally:
        loop.close()


def _broker_rewrite(props: str, cluster: str) -> str:
    """What SendProcessor's full path stores for a single send: WAIT dropped, CLUSTER set."""
    parsed = mc.parse_properties(props)
    parsed.pop("WAIT", None)
    parsed["CLUSTER"] = cluster
    return mc.properties_to_string(parsed)


names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "é", "DELAY", "TRAN_MSG", "CLUSTER", ""])
values = st.text("xyz é😀\x01", max_size=6)


@settings(max_examples=300)
@given(st.lists(st.tuples(names, values), max_size=6), st.booleans())
def test_single_send_properties_are_stored_as_the_full_path_stores_them(
    pairs: list[tuple[str, str]], trailing: bool
) -> None:
    props = "\x02".join(f"{k}\x01{v}" for k, v in pairs) + ("\x02" if trailing and pairs else "")
    extra = "CLUSTER\x01c1"
    size = native.scan_single(props.encode(), extra.encode())
    names_seen = [k for k, _ in pairs]
    plain = (
        all(k and v for k, v in pairs)
        and len(set(names_seen)) == len(names_seen)
        and not {"DELAY", "TRAN_MSG", "CLUSTER"} & set(names_seen)
    )
    if not plain:
        assert size is None  # the full path decides
        return
    stored = _broker_rewrite(props, "c1")
    assert size == len(stored.encode())
    body = b"payload"
    tf = mc.topic_field("TopicX")
    total = mc.record_size(len(body), len(tf), 2 + size)
    buf = bytearray(total + 4)
    cq, index, msg_id, tags = native.write_single(
        buf, 4, body, props.encode(), extra.encode(), tf, 2, 41, 9000, 0, 5, 77, bytes([10, 0, 0, 2]), 5000, 88,
        bytes([10, 0, 0, 1]), 10911, 1, 12345,
    )
    rec = mc.encode_record(topic="TopicX", body=body, queue_id=2, flag=5, queue_offset=41, physical_offset=9000,
                           born_timestamp=77, born_host=("10.0.0.2", 5000), store_timestamp=88,
                           store_host=("10.0.0.1", 10911), properties=stored, reconsume_times=1)
    assert bytes(buf[4:]) == rec
    tcode = tags_code(mc.get_property(stored, "TAGS"))
    assert cq == struct.pack(">qiq", 9000, total, tcode)
    assert tags == (tcode,)
    assert msg_id == mc.create_offset_msg_id("10.0.0.1", 10911, 9000)
    tokens = [t for t in [mc.get_property(stored, "UNIQ_KEY")] if t]
    tokens += [t for t in (mc.get_property(stored, "KEYS") or "").split(" ") if t]
    got_index = [struct.unpack_from("=I4xq", index, i) for i in range(0, len(index), 16)]
    assert got_index == [(h, 9000) for h in index_hashes_py(12345, tokens)]


def test_scan_single_declines_what_needs_an_answer() -> None:
    extra = b"CLUSTER\x01c"
    assert native.scan_single(b"", extra) == len(extra)
    assert native.scan_single(b"WAIT\x01true", extra) == len(extra)
    assert native.scan_single(b"A\x01b\x02", b"") == 3
    assert native.scan_single(b"A\x01\x00", extra) is None  # NUL
    assert native.scan_single(b"A\x01\xff", extra) is None  # not UTF-8
    assert native.scan_single(b"A\x01b\x02\x02C\x01d", extra) is None  # an empty pair inside
    assert native.scan_single(b"K\x01" + b"v" * 32760, extra) is None  # over 32767 once joined
    assert native.scan_single(b"\x02".join(b"k%d\x01v" % i for i in range(65)), extra) is None  # too many pairs


_V2_KEYS = ("b", "e", "f", "g", "h", "i", "j", "m")  # topic, queueId, sysFlag, bornTimestamp, flag, properties, ...
field_values = st.one_of(
    st.integers(-9, 9).map(str),
    st.integers(-9, 9),
    st.integers(-(2**40), 2**40),
    st.sampled_from(["0", "7", "-3", "+4", " 5", "1_0", "٣", "", "x", "99999999999"]),
)


@settings(max_examples=300)
@given(st.fixed_dictionaries({
    "b": st.sampled_from(["T", "%RETRY%g"]), "e": field_values, "f": field_values, "g": field_values, "h": field_values,
}, optional={
    "i": st.sampled_from(["", "TAGS\x01A", "WAIT\x01true\x02KEYS\x01k", "DELAY\x013", "A\x01b\x02A\x01c"]),
    "j": field_values, "m": st.sampled_from(["true", "false", "False", " false", False, True, 0]),
}))
def test_send_v2_fields_read_the_header_as_its_decoder_does(ext: dict[str, object]) -> None:
    from apogee.errors import HeaderError
    from apogee.remoting.headers.send import SendMessageRequestHeaderV2

    got = native.send_v2_fields(ext, b"CLUSTER\x01c", _V2_KEYS)
    if got is None:
        return  # declined: the full path decides, whatever the header holds
    try:
        h = SendMessageRequestHeaderV2.decode(ext | {"a": "g", "c": "TBW102", "d": "4"})  # type: ignore[operator]
    except HeaderError:
        raise AssertionError(f"accepted a header its decoder refuses: {ext}") from None
    props = h.properties or ""
    assert got == (h.topic, h.queue_id, h.sys_flag, h.born_timestamp, h.flag, props, h.reconsume_times or 0,
                   native.scan_single(props.encode(), b"CLUSTER\x01c"))
    assert not h.batch


_PULL_KEYS = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
              "suspendTimeoutMillis", "subVersion", "subscription", "expressionType")
long_values = st.one_of(field_values, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1).map(str),
                        st.sampled_from(["9223372036854775807", "-9223372036854775808", "9223372036854775808"]))
text_values = st.one_of(st.sampled_from(["*", "TagA || TagB", "", "a > 1", "\u00e9"]), st.none(), st.integers(0, 9),
                        st.booleans())


@settings(max_examples=300)
@given(st.fixed_dictionaries({
    "consumerGroup": st.sampled_from(["CG", "", 7]), "topic": st.sampled_from(["T", "%RETRY%CG", None]),
    "queueId": field_values, "queueOffset": long_values, "maxMsgNums": field_values, "sysFlag": field_values,
    "commitOffset": long_values, "suspendTimeoutMillis": long_values, "subVersion": long_values,
}, optional={"subscription": text_values, "expressionType": text_values}))
def test_pull_fields_read_the_header_as_its_decoder_does(ext: dict[str, object]) -> None:
    from apogee.errors import HeaderError
    from apogee.remoting.headers.pull import PullMessageRequestHeader

    got = native.pull_fields(ext, _PULL_KEYS)
    if got is None:
        return  # declined: the decoder decides, whatever the header holds
    try:
        h = PullMessageRequestHeader.decode(ext)  # type: ignore[arg-type]
    except HeaderError:
        raise AssertionError(f"accepted a header its decoder refuses: {ext}") from None
    assert got == (h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, h.sys_flag,
                   h.commit_offset, h.suspend_timeout_millis, h.sub_version, h.subscription, h.expression_type)


def test_pull_fields_take_the_clients_pulls_and_decline_the_rest() -> None:
    java = {"consumerGroup": "CG", "topic": "T", "queueId": "3", "queueOffset": "1024", "maxMsgNums": "32",
            "sysFlag": "3", "commitOffset": "990", "suspendTimeoutMillis": "15000", "subVersion": "1700000000000",
            "expressionType": "TAG"}
    assert native.pull_fields(java, _PULL_KEYS) == ("CG", "T", 3, 1024, 32, 3, 990, 15000, 1700000000000, None, "TAG")
    numbers = java | {"queueId": 3, "queueOffset": 1024, "subscription": "TagA || TagB"}  # JSON numbers (C++ client)
    assert native.pull_fields(numbers, _PULL_KEYS)[2:4] == (3, 1024)  # type: ignore[index]
    assert native.pull_fields(numbers, _PULL_KEYS)[9] == "TagA || TagB"  # type: ignore[index]
    assert native.pull_fields(java | {"subscription": None}, _PULL_KEYS)[9] is None  # type: ignore[index]
    for bad in ({"queueId": "2147483648"}, {"queueId": " 1"}, {"queueOffset": "1.0"}, {"sysFlag": ""},
                {"maxMsgNums": True}, {"topic": 5}, {"consumerGroup": None}, {"subscription": 1},
                {"expressionType": False}, {"commitOffset": "9223372036854775808"}):
        assert native.pull_fields(java | bad, _PULL_KEYS) is None, bad
    for key in _PULL_KEYS[:9]:
        missing = dict(java)
        del missing[key]
        assert native.pull_fields(missing, _PULL_KEYS) is None, key


def test_send_v2_fields_declines_what_needs_an_answer() -> None:
    ok = {"b": "T", "e": "1", "f": "0", "g": "1700000000000", "h": "0", "i": "TAGS\x01A"}
    assert native.send_v2_fields(ok, b"CLUSTER\x01c", _V2_KEYS) == ("T", 1, 0, 1700000000000, 0, "TAGS\x01A", 0, 16)
    assert native.send_v2_fields(ok | {"e": 1}, b"", _V2_KEYS)[1] == 1  # a JSON number (the C++ client)
    for not_batch in ("false", False):  # the Java client's "m":"false" on every single send
        assert native.send_v2_fields(ok | {"m": not_batch}, b"CLUSTER\x01c", _V2_KEYS) is not None
    for bad in ({"e": "1.5"}, {"e": " 1"}, {"e": "+1"}, {"e": "2147483648"}, {"g": None}, {"m": "true"},
                {"m": "False"}, {"m": 0}, {"i": "DELAY\x012"}, {"i": "A\x01\ud800"}, {"b": 5}):
        assert native.send_v2_fields(ok | bad, b"CLUSTER\x01c", _V2_KEYS) is None, bad
    missing = dict(ok)
    del missing["f"]
    assert native.send_v2_fields(missing, b"CLUSTER\x01c", _V2_KEYS) is None
