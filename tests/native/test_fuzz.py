"""A fuzz of every C function that reads network bytes, against its pure-Python reference.

Inputs are valid ones (made by the reference encoders) with random damage: bits flipped, bytes
set, length words replaced by the values that break length arithmetic (0, -1, one off, the
int32 limits), cuts, insertions and duplicated spans, plus plain random bytes.  Each test checks
the function's contract, not only that it survives: whatever C accepts, the reference reads the
same way; whatever the reference refuses, C declines or raises.

``APOGEE_FUZZ_EXAMPLES`` sets the examples per test (a few dozen in the normal suite, where this
is a quick check; thousands under ``make check-native``, whose AddressSanitizer and
UndefinedBehaviorSanitizer build turns any out-of-bounds access, use after free or overflow into
a failure of the run).
"""

from __future__ import annotations

import contextlib
import os
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.common.message import MessageExt
from apogee.errors import HeaderError
from apogee.remoting.codec import encode_bytes
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import SendMessageRequestHeaderV2
from apogee.store.index_file import IndexFile
from tests.unit.common.test_accel import _broker_rewrite, _scan_reference
from tests.unit.remoting.test_native_frames import assert_same, frame, header_docs
from tests.unit.store.test_collect_native import check_against_the_loop, pulls
from tests.unit.store.test_native_dispatch import check_scan, encode_span, record_ends_checked
from tests.unit.store.test_native_dispatch import records as log_records

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

EXAMPLES = int(os.environ.get("APOGEE_FUZZ_EXAMPLES", "40"))
fuzz = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

INTERESTING = [0, 1, 2, 3, 4, 8, 20, 22, 23, 87, 88, 91, 127, 128, 255, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0xFFFFFF,
               0x1000000, 2**31 - 1, -(2**31), -1, -2, 1 << 20]


@st.composite
def damaged(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    """A valid input with up to six random injuries, or random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "set", "int32", "int16", "cut", "drop", "insert", "repeat"]))
        i = draw(st.integers(0, len(data)))
        if op == "flip" and i < len(data):
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and i < len(data):
            data[i] = draw(st.sampled_from([0, 1, 2, 0x20, 0x7F, 0x80, 0xC0, 0xED, 0xF4, 0xFF]))
        elif op == "int32" and i + 4 <= len(data):
            data[i : i + 4] = struct.pack(">I", draw(st.sampled_from(INTERESTING)) & 0xFFFFFFFF)
        elif op == "int16" and i + 2 <= len(data):
            data[i : i + 2] = struct.pack(">H", draw(st.sampled_from(INTERESTING)) & 0xFFFF)
        elif op == "cut":
            del data[i:]
        elif op == "drop":
            del data[i : i + draw(st.integers(1, 8))]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "repeat":
            data[i:i] = data[i : i + draw(st.integers(1, 40))]
    return bytes(data)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "TRAN_MSG", "CLUSTER", "a", "é", ""])


def _prop_texts(values: str) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(names, st.text(values, max_size=6)), max_size=6).map(
        lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs))


prop_texts = _prop_texts("xy é😀 \x00\x01\x02")
stored_prop_texts = _prop_texts("xy é😀 \x01\x02")  # what a record can hold: no NUL


# --- remoting frames --------------------------------------------------------------------------

commands = st.builds(
    lambda code, opaque, flag, remark, ext, body: encode_bytes(
        RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body)),
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, 2, 3]),
    st.one_of(st.none(), texts), st.one_of(st.none(), st.dictionaries(texts, texts, max_size=6)),
    st.one_of(st.none(), st.binary(max_size=40)),
)
frames = st.one_of(commands, st.builds(frame, header_docs(), st.binary(max_size=16)))


@fuzz
@given(damaged(st.lists(frames, min_size=1, max_size=4).map(b"".join)))
def test_decode_frames(data: bytes) -> None:
    """C accepts only what the pure decoder accepts, and reads it the same way."""
    assert_same(data)


# --- PULL bodies ------------------------------------------------------------------------------

records = st.builds(
    lambda topic, body, props, sysflag, flag, qoff: mc.encode_record(
        topic=topic, body=body, properties=props, sysflag=sysflag, flag=flag, queue_offset=qoff,
        born_host=("10.1.2.3", 5), store_host=("127.0.0.1", 10911)),
    st.text("abT中", min_size=1, max_size=6), st.binary(max_size=40), stored_prop_texts,
    st.sampled_from([0, 0, 0x4, 0x1]),
    st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**62),
)


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # the same kind of error from both paths
        return type(exc)


@fuzz
@given(damaged(st.lists(records, min_size=1, max_size=4).map(b"".join)), st.integers(-4, 400))
def test_decode_records(buf: bytes, pos: int) -> None:
    """The C decoder and the pure one give the same messages, or the same error."""
    assert _outcome(mc.decode_records_fast, buf) == _outcome(mc._decode_records_fast_py, buf)
    if pos < 0:
        with pytest.raises(ValueError):
            native.decode_records(buf, pos, MessageExt)
        return
    got, stop = native.decode_records(buf, pos, MessageExt)
    assert stop >= pos and (stop <= len(buf) or (not got and stop == pos))


# --- client batch bodies -> CommitLog records --------------------------------------------------

batch_items = st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(min_size=1, max_size=30), prop_texts),
                       min_size=1, max_size=5)
TOPIC = mc.topic_field("TopicX")
STORE_IP, BORN_IP = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def _write_batch(buf: bytearray, pos: int, body: bytes, bprops: bytes) -> Any:
    return native.write_batch(buf, pos, body, bprops, TOPIC, 3, 100, 5000, 0, 77, BORN_IP, 5000, 88, STORE_IP,
                              10911, 0, 12345)


@fuzz
@given(damaged(batch_items.map(mc.encode_batch_py)), st.sampled_from(["", "CLUSTER\x01c", "DELAY\x011", "A\x01\xff"]),
       st.integers(0, 64), st.integers(-3, 40))
def test_scan_and_write_batch(body: bytes, bprops_text: str, max_body: int, slack: int) -> None:
    bprops = bprops_text.encode("utf-8", "surrogateescape")
    scan = native.scan_batch(body, bprops, max_body)
    if scan is not None:
        assert scan == _scan_reference(body, bprops_text, max_body)
    accepted = native.scan_batch(body, bprops, 1 << 30)
    pos = 7
    need = accepted[1] + accepted[0] * len(TOPIC) if accepted else 4096
    buf = bytearray(pos + need + min(slack, 0) + max(slack, 0))
    before = bytes(buf)
    if accepted is None or slack < 0:
        with pytest.raises(ValueError):
            _write_batch(buf, pos, body, bprops)
        assert buf == before  # nothing written
        return
    cq, _index, ids, _tags = _write_batch(buf, pos, body, bprops)
    want = bytearray(pos)
    phys = 5000
    for n, (flag, item_body, props) in enumerate(mc.decode_batch(body)):
        want += mc.encode_record(topic="TopicX", body=item_body, queue_id=3, flag=flag, queue_offset=100 + n,
                                 physical_offset=phys, born_timestamp=77, born_host=("10.0.0.2", 5000),
                                 store_timestamp=88, store_host=("10.0.0.1", 10911),
                                 properties=mc.join_properties(props, bprops_text))
        phys = 5000 + len(want) - pos
    assert bytes(buf[: len(want)]) == bytes(want) and not any(buf[len(want):])
    assert len(cq) == 20 * accepted[0] and ids.count(",") == accepted[0] - 1


# --- a single send: header fields and properties -----------------------------------------------

KEYS = ("b", "e", "f", "g", "h", "i", "j", "m")
header_values = st.one_of(st.integers(-(2**40), 2**40), st.integers(-9, 9).map(str),
                          st.text("0123456789-+ .e", max_size=20),
                          st.none(), st.booleans(), st.floats(allow_nan=False), st.binary(max_size=4), texts,
                          st.just(["1"]))


@fuzz
@given(st.dictionaries(st.sampled_from(KEYS + ("x", "")), header_values, max_size=9),
       st.one_of(prop_texts, texts, st.none(), st.integers()))
def test_send_v2_fields(ext: dict[str, Any], props: Any) -> None:
    """Whatever C reads from a header, SendMessageRequestHeaderV2.decode reads the same."""
    ext = dict(ext, i=props) if props is not None else ext
    got = native.send_v2_fields(ext, b"CLUSTER\x01c", KEYS)
    if got is None:
        return
    try:
        h = SendMessageRequestHeaderV2.decode(ext | {"a": "g", "c": "TBW102", "d": "4"})
    except HeaderError:
        raise AssertionError(f"accepted a header its decoder refuses: {ext}") from None
    stored = h.properties or ""
    assert got == (h.topic, h.queue_id, h.sys_flag, h.born_timestamp, h.flag, stored, h.reconsume_times or 0,
                   native.scan_single(stored.encode(), b"CLUSTER\x01c"))


@fuzz
@given(damaged(prop_texts.map(lambda t: t.encode())), st.sampled_from([b"", b"CLUSTER\x01c"]), st.booleans())
def test_scan_and_write_single(props: bytes, extra: bytes, as_str: bool) -> None:
    """scan_single measures what write_single writes, and write_single refuses what it declines."""
    arg: Any = props
    if as_str:
        with contextlib.suppress(UnicodeDecodeError):
            arg = props.decode("utf-8")
    size = native.scan_single(arg, extra)
    buf = bytearray(70_000)
    call = (buf, 0, b"body", props, extra, TOPIC, 2, 41, 9000, 0, 5, 77, BORN_IP, 5000, 88, STORE_IP, 10911, 1, 12345)
    if size is None:
        with pytest.raises(ValueError):
            native.write_single(*call)
        assert not any(buf)
        return
    stored = _broker_rewrite(props.decode(), extra.decode().partition("\x01")[2]) if extra else \
        mc.properties_to_string({k: v for k, v in mc.parse_properties(props.decode()).items() if k != "WAIT"})
    assert size == len(stored.encode())
    native.write_single(*call)
    rec = mc.encode_record(topic="TopicX", body=b"body", queue_id=2, flag=5, queue_offset=41, physical_offset=9000,
                           born_timestamp=77, born_host=("10.0.0.2", 5000), store_timestamp=88,
                           store_host=("10.0.0.1", 10911), properties=stored, reconsume_times=1)
    assert bytes(buf[: len(rec)]) == rec


# --- the index: entries from the network's KEYS and UNIQ_KEY ------------------------------------


def _index_put_py(mm: bytearray, slots: int, num: int, messages: list[tuple[int, list[int], int]],
                  store_ts: int) -> Any:
    """IndexService.build's rules per message over IndexFile.put_keys: the reference."""
    f = IndexFile(SimpleNamespace(mm=mm), slots, num)  # type: ignore[arg-type]
    done = 0
    for phys, hashes, delta in messages:
        end = f.end_phy
        if not (phys < end or (phys == end and (end > 0 or f.index_count > 1))):
            if f.index_num - f.index_count < min(len(hashes), num - 1):
                break
            f.put_keys(hashes, phys, min(store_ts + delta, 2**63 - 1))
        done += len(hashes)
    return (f.begin_ts, f.end_ts, f.begin_phy, f.end_phy, f.slot_count, f.index_count), done


@fuzz
@given(st.integers(1, 9), st.integers(2, 40),
       st.lists(st.tuples(st.integers(0, 5), st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=12),
                          st.sampled_from([0, 0, 1, 999, 1000, 86_400_000, 2**31 - 1, 2**32 - 1])),
                max_size=8),
       st.integers(0, 10**13), st.integers(0, 10**13), st.integers(1, 3))
def test_index_put(slots: int, num: int, messages: list[tuple[int, list[int], int]], begin_ts: int, store_ts: int,
                   first_count: int) -> None:
    """The C index writer leaves the bytes IndexFile.put_keys leaves, message by message, each
    at store_ts plus its entries' delta (scan_dispatch's spans)."""
    phys, grouped = 0, []
    for step, hashes, delta in messages:
        phys += step  # 0: the same offset again (one message), or an offset already indexed
        grouped.append((phys, hashes, delta))
    merged: list[tuple[int, list[int], int]] = []
    for p, hashes, delta in grouped:  # consecutive entries with one offset are one message
        if merged and merged[-1][0] == p:
            merged[-1][1].extend(hashes)
        else:
            merged.append((p, list(hashes), delta))
    entries = b"".join(struct.pack("=IIq", h, delta, p) for p, hashes, delta in merged for h in hashes)
    size = 40 + slots * 4 + num * 20
    header = (begin_ts, begin_ts, 0, 0, 0, min(first_count, num))
    mm_c, mm_py = bytearray(size), bytearray(size)
    struct.pack_into(">qqqqii", mm_py, 0, *header)
    got = native.index_put(mm_c, slots, num, header, store_ts, entries, 0)
    want = _index_put_py(mm_py, slots, num, merged, store_ts)
    if got[1] < len(entries) // 16:  # stopped at a message that needs a new file: same place
        assert got[1] == want[1]
    assert got[0] == want[0]
    assert mm_c[40:] == mm_py[40:]


# --- pulls: ConsumeQueue entries -> records -----------------------------------------------------


@fuzz
@given(pulls)
def test_collect_records_against_the_loop(pull: tuple[Any, ...]) -> None:
    check_against_the_loop(pull)


@fuzz
@given(st.binary(max_size=240), st.binary(max_size=300), st.lists(st.sampled_from(INTERESTING), min_size=10,
                                                                    max_size=10),
       st.sampled_from([None, {1}, frozenset({0, -1}), {2**63}, {True}]))
def test_collect_records_on_random_entries(entries: bytes, file: bytes, numbers: list[int], codes: Any) -> None:
    """Any entries and limits: an answer whose records are slices of the file, or None."""
    units, start, wrote, first, max_msgs, max_total, max_bytes, max_count, low, _ = numbers
    with contextlib.suppress(OverflowError):
        done = native.collect_records(entries, units, file, start, wrote, first, max_msgs, max_total, max_bytes,
                                      max_count, low, codes)
        if done is not None:
            body, offsets, consumed, _last = done
            assert 0 <= consumed <= len(entries) // 20 and len(offsets) <= consumed
            assert len(body) <= len(offsets) * len(file)


# --- dispatch: a slave's replicated CommitLog bytes -> ConsumeQueue runs and index entries -------


@fuzz
@given(damaged(log_records.map(lambda items: encode_span(items, 4096))), st.integers(0, 64), st.integers(0, 64),
       st.integers(0, 40), st.booleans())
def test_scan_dispatch_and_record_ends(span: bytes, start: int, cut: int, max_records: int, index: bool) -> None:
    """Whatever the C scan takes of damaged bytes, the reference reads the same way."""
    start = min(start, len(span))
    end = max(start, len(span) - cut)
    check_scan(span, start, end, 4096 + start, max_records, index)
    record_ends_checked(span, start, end)
