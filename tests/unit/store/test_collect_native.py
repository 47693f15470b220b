"""``native.collect_records`` (the C path of a pull) against ``StoreReader._collect``'s loop.

Whatever the C path answers, the Python loop answers the same way: the same records byte for
byte, queue offsets, next begin offset, status and slave suggestion.  And the usual pull (good
entries, records in one file and in memory, no or a tag filter) is never declined, so pulls do
take it.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.common.accel import native
from apogee.store import reads
from apogee.store.config import StoreConfig
from apogee.store.reads import StoreReader
from apogee.store.results import GetResult, GetStatus, TagCodeFilter

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

_UNIT = struct.Struct(">qiq")
FILE_SIZE = 4096


class _File:
    """What ``_collect`` reads of a MappedFile."""

    def __init__(self, start: int, data: bytes, wrote: int) -> None:
        self.start, self.view, self.wrote, self.end = start, memoryview(data), wrote, start + len(data)


class _Files:
    def __init__(self, files: list[_File]) -> None:
        self.files = files

    def find(self, offset: int) -> _File | None:
        return next((f for f in self.files if f.start <= offset < f.end), None)


class _CommitLog:
    def __init__(self, files: list[_File], min_offset: int, max_offset: int) -> None:
        self.mfq, self.min_offset, self.max_offset = _Files(files), min_offset, max_offset

    def roll_next_file(self, offset: int) -> int:
        return offset + FILE_SIZE - offset % FILE_SIZE


class _Queue:
    topic, queue_id = "T", 0


def _reader(clog: _CommitLog, memory_limit: int, **config: Any) -> StoreReader:
    reader = StoreReader(StoreConfig(**config), clog, None, None)  # type: ignore[arg-type]
    reader.memory_limit = memory_limit
    return reader


def _outcome(result: GetResult) -> tuple[Any, ...]:
    return (result.status, b"".join(result.buffers), result.queue_offsets, result.next_begin_offset,
            result.buffer_total_size, result.suggest_pulling_from_slave)


def _both(reader: StoreReader, entries: bytes, offset: int, max_msgs: int, max_total: int,
          message_filter: TagCodeFilter | None, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(the C path's outcome or None when it declined, the Python loop's)."""
    fast = GetResult()
    taken = reader._collect_native(fast, memoryview(entries), offset, max_msgs, max_total, message_filter)
    with monkeypatch.context() as m:
        m.setattr(reads, "native", None)
        slow = GetResult()
        reader._collect(slow, _Queue(), memoryview(entries), offset, max_msgs, max_total,  # type: ignore[arg-type]
                        message_filter)
    return (_outcome(fast) if taken else None), _outcome(slow)


@st.composite
def stores(draw: st.DrawFn) -> tuple[_CommitLog, list[tuple[int, int, int]]]:
    """Two CommitLog files of records (their bytes random) and the entries of a queue: mostly
    entries of those records, in order, some of them damaged."""
    sizes = draw(st.lists(st.integers(1, 300), min_size=1, max_size=40))
    records: list[tuple[int, int]] = []
    pos = 0
    for size in sizes:
        if pos % FILE_SIZE + size > FILE_SIZE:
            pos += FILE_SIZE - pos % FILE_SIZE  # the rest of a file is left blank, as a CommitLog does
        records.append((pos, size))
        pos += size
    data = draw(st.binary(min_size=pos, max_size=pos)) + bytes(2 * FILE_SIZE)
    files = [_File(s, data[s : s + FILE_SIZE], FILE_SIZE) for s in range(0, pos, FILE_SIZE)]
    damaged = draw(st.booleans())  # else every entry is good and every record readable
    if damaged:
        files[-1].wrote = draw(st.integers(0, pos - files[-1].start))
    min_offset = draw(st.sampled_from([0, 0, 0, records[len(records) // 2][0]])) if damaged else 0
    clog = _CommitLog(files, min_offset, pos)
    entries = []
    for phys, size in records:
        tags = draw(st.sampled_from([1, 2, 3, -5]))
        damage = draw(st.integers(0, 30)) if damaged else 2
        if damage == 0:
            size = draw(st.sampled_from([0, -1, size + 1, 2**31 - 1]))
        elif damage == 1:
            phys = draw(st.sampled_from([-1, phys + 1, pos + 10, 2**63 - 1, -(2**63)]))
        entries.append((phys, size, tags))
    return clog, entries


filters = st.sampled_from([None, TagCodeFilter(None), TagCodeFilter({1}), TagCodeFilter(frozenset({2, -5})),
                           TagCodeFilter(set(range(100))), TagCodeFilter({1.0}), TagCodeFilter(set())])


# A pull over a generated store: (store, entries skipped, max msgs, max total bytes, memory limit,
# in-memory transfer limits, filter).
pulls = st.tuples(stores(), st.integers(0, 5), st.integers(1, 40), st.sampled_from([1 << 62, 1000, 200, 1]),
                  st.sampled_from([1 << 62, 1 << 62, 6000, 100]), st.sampled_from([(262144, 32), (500, 3), (1, 1)]),
                  filters)


def check_against_the_loop(pull: tuple[Any, ...]) -> None:
    """The C path's answer, when it gives one, is the Python loop's (tests/native fuzzes this)."""
    (clog, entries), skip, max_msgs, max_total, memory_limit, in_memory, message_filter = pull
    reader = _reader(clog, memory_limit, max_transfer_bytes_on_message_in_memory=in_memory[0],
                     max_transfer_count_on_message_in_memory=in_memory[1])
    data = b"".join(_UNIT.pack(*e) for e in entries[skip:])
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _both(reader, data, 100 + skip, max_msgs, max_total, message_filter, monkeypatch)
    if fast is not None:
        assert fast == slow


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pulls)
def test_whatever_the_c_path_answers_the_python_loop_answers(pull: tuple[Any, ...]) -> None:
    check_against_the_loop(pull)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(20, 2000), st.sampled_from([7, 8])), min_size=1, max_size=80),
       st.integers(1, 64), st.sampled_from([None, TagCodeFilter(None), TagCodeFilter({7}), TagCodeFilter({9})]))
def test_the_usual_pull_takes_the_c_path(records: list[tuple[int, int]], max_msgs: int,
                                          message_filter: TagCodeFilter | None) -> None:
    data = bytes(range(256)) * 1024
    entries, pos = [], 1 << 30  # the second CommitLog file of 1 GiB
    for size, tags in records:
        entries.append((pos, size, tags))
        pos += size + 13  # other queues' records in between
    clog = _CommitLog([_File(1 << 30, data, pos - (1 << 30))], 0, pos)
    # Only max_msgs limits the pull here: the in-memory count cap (32 by default) is above it.
    reader = _reader(clog, 1 << 30, max_transfer_count_on_message_in_memory=64)
    cq = b"".join(_UNIT.pack(*e) for e in entries)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _both(reader, cq, 5, max_msgs, 1 << 62, message_filter, monkeypatch)
    assert fast == slow
    status, body, offsets, next_begin, _, _ = fast
    wanted = [i for i, (_, tags) in enumerate(records) if message_filter is None or
              message_filter.is_matched_by_consume_queue(tags)]
    assert offsets == [5 + i for i in wanted[:max_msgs]]
    assert status is (GetStatus.FOUND if offsets else GetStatus.NO_MATCHED_MESSAGE)
    assert body == b"".join(bytes(data[p - (1 << 30) : p - (1 << 30) + s]) for p, s, _ in
                            (entries[i - 5] for i in offsets))
    # a full batch stops at the entry after its last message, whatever that entry's tags
    assert next_begin == 5 + (wanted[max_msgs - 1] + 1 if len(wanted) >= max_msgs else len(records))


def test_what_it_declines() -> None:
    f = bytes(100)
    unit = _UNIT.pack(10, 5, 1)
    call = native.collect_records  # type: ignore[union-attr]
    ok = (unit, 800, f, 0, 100, 0, 32, 1 << 62, 1 << 20, 32, 0, None)
    assert call(*ok) == (bytes(5), [0], 1, 10)

    def with_(i: int, v: Any) -> tuple[Any, ...]:
        return (*ok[:i], v, *ok[i + 1 :])

    for declined in (
        with_(0, b""),  # no whole unit
        with_(0, _UNIT.pack(10, 0, 1)),  # a hole
        with_(0, _UNIT.pack(96, 5, 1)),  # past the written bytes
        with_(4, 14),  # written only up to 14
        with_(3, 11),  # the file starts after the record
        with_(10, 11),  # older than the low mark (expired, or on disk)
        with_(11, {1.0}),  # not ints
        with_(11, set(range(65))),  # too many codes
        with_(11, [1]),  # not a set
        with_(4, 101),  # more written than the buffer holds
    ):
        assert call(*declined) is None, declined
    assert call(*with_(11, {2})) == (b"", [], 1, 10)  # filtered out: nothing, all consumed
    three = with_(0, unit * 3)
    assert call(*three)[2] == 3
    assert call(*three[:1], 2, *three[2:])[2] == 2  # max_units at most
    assert call(*with_(1, 0)) is None
