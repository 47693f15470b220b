"""The dispatcher's C reading of unhinted records (``native.scan_dispatch``, ``record_ends``)
against the pure-Python reference (``Dispatcher._decode``'s fields, ``CommitLog.complete_end``).

A slave dispatches only such records (the master's bytes come without hints), and so does a
store after recovery: the ConsumeQueue and index files built with the C scan must be
byte-identical to those the reference builds, whatever mix of topics, queues, tags, keys,
transaction types, delays and file boundaries the log holds.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.common import constants as c
from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.common.java_hash import index_hashes, index_prefix_hash, tags_code
from apogee.store import StoreConfig
from apogee.store import commitlog as commitlog_module
from apogee.store import dispatch as dispatch_module
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.dispatch import Dispatcher
from apogee.store.index_service import IndexService
from apogee.store.mapped_file_queue import MappedFileQueue

from .conftest import make_msg

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

CLOCK = 1_700_000_000_000


def scan_reference(buf: Any, start: int, count: int, phys: int, index: bool) -> tuple[Any, ...]:
    """What the reference reads from the first ``count`` records at ``start``, in
    ``scan_dispatch``'s shape: (next, count, first_ts, last_ts, groups, index_entries)."""
    groups: dict[tuple[str, int], list[Any]] = {}
    entries = bytearray()
    pos, first_ts, last_ts = start, 0, 0
    for n in range(count):
        f = mc.read_dispatch_fields(buf, pos)
        record_phys = phys + pos - start
        tags = tags_code(mc.get_property(f.properties, c.PROPERTY_TAGS)) if f.properties else 0
        if n == 0:
            first_ts = f.store_timestamp
        last_ts = f.store_timestamp
        g = groups.setdefault((f.topic, f.queue_id), [f.topic, f.queue_id, f.queue_offset, 0, b"", []])
        assert f.queue_offset == g[2] + g[3]
        g[3] += 1
        g[4] += struct.pack(">qiq", record_phys, f.size, tags)
        if tags not in g[5]:
            g[5].append(tags)
        if index and f.properties:
            uniq = mc.get_property(f.properties, c.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            keys = mc.get_property(f.properties, c.PROPERTY_KEYS)
            tokens = ([uniq] if uniq else []) + [k for k in (keys or "").split(" ") if k]
            for h in index_hashes(index_prefix_hash(f.topic), tokens):
                entries += struct.pack("=IIq", h, f.store_timestamp - first_ts, record_phys)
        pos += f.size
    out = [(t, q, first, k, bytes(cq), tuple(tags) if len(tags) <= 8 else None)
           for t, q, first, k, cq, tags in groups.values()]
    return pos, count, first_ts, last_ts, out, bytes(entries)


def check_scan(buf: Any, start: int, end: int, phys: int, max_records: int, index: bool) -> tuple[Any, ...]:
    """scan_dispatch on ``buf``, checked against the reference for every record it took."""
    got = native.scan_dispatch(buf, start, end, phys, max_records, index)
    assert start <= got[0] <= end and 0 <= got[1] <= min(max_records, 4096)
    if got[1]:
        assert got == scan_reference(buf, start, got[1], phys, index)
    else:
        assert got[0] == start
    return got


def complete_end_reference(buf: Any, start: int, end: int) -> list[int]:
    """The record starts CommitLog.complete_end's walk visits inside one file."""
    seen, pos = [start], start
    while pos + 8 <= end:
        total, magic = struct.unpack_from(">ii", buf, pos)
        if magic == mc.BLANK_MAGIC_CODE or total <= 0 or pos + total > end:
            break
        pos += total
        seen.append(pos)
    return seen


def record_ends_checked(buf: Any, start: int, end: int) -> int:
    got = native.record_ends(buf, start, end)
    assert got in complete_end_reference(buf, start, end)  # the reference's path, stopping no later
    return got


props_texts = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "a", "é"]),
    st.sampled_from(["", "A", "k1 k2", " k3  k4 ", "订单 😀", "3", "x" * 40]),
    max_size=4,
).map(mc.properties_to_string)
records = st.lists(
    st.tuples(st.sampled_from(["A", "B", "Tópico", c.SCHEDULE_TOPIC]), st.integers(0, 2), props_texts,
              st.sampled_from([0, 0, 0, c.TRANSACTION_PREPARED_TYPE, c.TRANSACTION_COMMIT_TYPE,
                               c.TRANSACTION_ROLLBACK_TYPE]),
              st.integers(0, 3000), st.binary(max_size=40)),
    max_size=30,
)


def encode_span(items: list[tuple[str, int, str, int, int, bytes]], phys: int) -> bytes:
    out = bytearray()
    next_qoff: dict[tuple[str, int], int] = {}
    ts = CLOCK
    for topic, qid, props, sysflag, step, body in items:
        ts += step
        qoff = next_qoff.get((topic, qid), 0)
        next_qoff[(topic, qid)] = qoff + 1
        out += mc.encode_record(topic=topic, body=body, queue_id=qid, queue_offset=qoff,
                                physical_offset=phys + len(out), sysflag=sysflag, store_timestamp=ts,
                                properties=props)
    return bytes(out)


@settings(max_examples=150, deadline=None)
@given(records, st.integers(0, 1 << 40), st.integers(0, 40), st.booleans())
def test_scan_dispatch_reads_what_the_reference_reads(items: list, phys: int, max_records: int,
                                                      index: bool) -> None:
    span = encode_span(items, phys)
    buf = b"\x00" * 7 + span + mc.BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True) * 3
    start, taken = 7, 0
    while taken < len(items):
        got = check_scan(buf, start, 7 + len(span), phys + start - 7, max_records or 1, index)
        if not got[1]:  # declined: the reference takes this one record
            start += mc.read_dispatch_fields(buf, start).size
            taken += 1
            continue
        start, taken = got[0], taken + got[1]
    assert start == 7 + len(span)
    assert record_ends_checked(buf, 7, len(buf)) == 7 + len(span)


def test_scan_dispatch_declines_what_the_reference_must_decide() -> None:
    plain = mc.encode_record(topic="A", body=b"x", physical_offset=100, properties="TAGS\x01t")
    assert check_scan(plain, 0, len(plain), 100, 10, True)[1] == 1
    assert native.scan_dispatch(plain, 0, len(plain), 101, 10, True)[1] == 0  # PHYSICALOFFSET disagrees
    assert native.scan_dispatch(plain, 0, len(plain) - 1, 100, 10, True)[1] == 0  # not whole
    declined = [
        mc.encode_record(topic=c.SCHEDULE_TOPIC, body=b"x", properties="DELAY\x013"),
        mc.encode_record(topic="A", body=b"x", sysflag=c.TRANSACTION_PREPARED_TYPE),
        mc.encode_record(topic="A", body=b"x", sysflag=c.TRANSACTION_ROLLBACK_TYPE),
        mc.encode_record(topic="A", body=b"x", queue_id=-1),
    ]
    for record in declined:
        assert native.scan_dispatch(record, 0, len(record), 0, 10, True)[1] == 0
    bad_text = bytearray(mc.encode_record(topic="A", body=b"x", properties="K\x01v"))
    bad_text[-1] = 0xFF  # not UTF-8: the reference decodes with replacement
    assert native.scan_dispatch(bytes(bad_text), 0, len(bad_text), 0, 10, True)[1] == 0
    # a queue offset that does not follow, a clock that went back: a new span starts there
    a = mc.encode_record(topic="A", body=b"x", queue_offset=5, store_timestamp=CLOCK)
    b = mc.encode_record(topic="A", body=b"x", queue_offset=7, physical_offset=len(a), store_timestamp=CLOCK)
    assert native.scan_dispatch(a + b, 0, len(a + b), 0, 10, True)[:2] == (len(a), 1)
    b = mc.encode_record(topic="A", body=b"x", queue_offset=6, physical_offset=len(a), store_timestamp=CLOCK - 1)
    assert native.scan_dispatch(a + b, 0, len(a + b), 0, 10, True)[:2] == (len(a), 1)
    # store times far apart must not overflow (a UBSan report under make check-native)
    a = mc.encode_record(topic="A", body=b"x", store_timestamp=-(2**62))
    b = mc.encode_record(topic="A", body=b"x", queue_offset=1, physical_offset=len(a), store_timestamp=2**63 - 1)
    assert native.scan_dispatch(a + b, 0, len(a + b), 0, 10, True)[:2] == (len(a), 1)
    assert native.scan_dispatch(b, 0, len(b), len(a), 10, True)[1] == 0
    for args in ((-1, 5), (6, 5), (0, len(a) + 1)):
        with pytest.raises(ValueError):
            native.scan_dispatch(a, args[0], args[1], 0, 10, True)


def _build(cfg: StoreConfig, clog: CommitLog, root: Path, use_native: bool,
           monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Dispatch all of ``clog`` without hints into fresh queues and index under ``root``."""
    monkeypatch.setattr(dispatch_module, "native", native if use_native else None)
    queues = ConsumeQueueTable(root / "consumequeue", cfg.mapped_file_size_consume_queue)
    index = IndexService(root / "index", 16, 40, 64)
    ticks = iter(range(CLOCK, CLOCK + 10**9))
    d = Dispatcher(clog, queues, index, clock=lambda: next(ticks))
    d.dispatch_all_inline(clog.max_offset)
    assert d.offset == clog.max_offset
    index.close()
    queues.close()
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("seed", range(4))
def test_queues_and_index_built_from_the_log_are_byte_identical(
    seed: int, store_config: Callable[..., StoreConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small ConsumeQueue and index files make spans stop for new files and start again."""
    rng = random.Random(seed)
    cfg = store_config(mapped_file_size_consume_queue=20 * 7)
    ticks = iter(range(CLOCK, CLOCK + 10**12, 37))
    clog = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog), clock=lambda: next(ticks))
    for i in range(300):
        sysflag = rng.choice([0] * 8 + [c.TRANSACTION_PREPARED_TYPE, c.TRANSACTION_COMMIT_TYPE,
                                         c.TRANSACTION_ROLLBACK_TYPE])
        topic = rng.choice(["A", "B", "Tópico"] + ([c.SCHEDULE_TOPIC] if i % 17 == 0 else []))
        extra = {"DELAY": "2"} if topic == c.SCHEDULE_TOPIC else {}
        clog.put_message(make_msg(topic, rng.randrange(3), rng.randbytes(rng.randrange(1, 300)),
                                  tags=rng.choice([None, "t1", "t2", "é"]), keys=rng.choice([None, "k1", "k1 k2 k3"]),
                                  uniq=rng.choice([None, f"U{i}"]), sysflag=sysflag, extra=extra))
    assert len(clog.mfq.files) >= 3  # records cross CommitLog files (EOF blanks)
    clog.hints.clear()
    try:
        want = _build(cfg, clog, tmp_path / "py", False, monkeypatch)
        got = _build(cfg, clog, tmp_path / "c", True, monkeypatch)
        assert len([n for n in want if n.startswith("index")]) >= 2
        assert got == want
    finally:
        clog.mfq.close()


def test_complete_end_walks_in_c_as_the_reference_does(
    store_config: Callable[..., StoreConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = store_config()
    clog = CommitLog(cfg, MappedFileQueue(cfg.commitlog_dir, cfg.mapped_file_size_commitlog))
    try:
        for i in range(40):
            clog.put_message(make_msg("E", 0, b"z" * (i * 30)))
        ends = {}
        for use_native in (True, False):
            monkeypatch.setattr(commitlog_module, "native", native if use_native else None)
            ends[use_native] = [clog.complete_end(0), clog.complete_end(clog.mfq.files[1].start)]
        assert ends[True] == ends[False] == [clog.max_offset, clog.max_offset]
    finally:
        clog.mfq.close()
