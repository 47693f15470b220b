"""The HA wire protocol (RocketMQ 4.x): codec and the decisions of master and slave."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.store.ha.protocol import (
    HEADER_SIZE,
    MAX_FRAME_BODY,
    FrameReader,
    HALinkError,
    ReportReader,
    check_frame,
    check_report,
    chunk_size,
    encode_header,
    encode_report,
    start_offset,
)

offsets = st.integers(min_value=0, max_value=2**63 - 1)
GiB = 1 << 30


def test_wire_layout_is_rocketmqs() -> None:
    # Java: ByteBuffer.putLong(offset) / putLong(offset).putInt(size), big-endian.
    assert encode_report(0x0102030405060708) == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    assert encode_header(1 << 32, 5) == struct.pack(">qi", 1 << 32, 5)
    assert HEADER_SIZE == 12


@given(st.lists(offsets, min_size=1, max_size=20), st.data())
def test_the_newest_complete_report_counts_however_the_stream_is_split(reports: list[int], data: st.DataObject) -> None:
    stream = b"".join(encode_report(r) for r in reports)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader, seen = ReportReader(), []
    for begin, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got = reader.feed(stream[begin:end])
        if got is not None:
            seen.append(got)
    assert seen[-1] == reports[-1]
    assert all(s in reports for s in seen)


@given(st.binary(max_size=4096))
def test_garbage_reports_never_grow_memory_and_negative_ones_end_the_link(garbage: bytes) -> None:
    reader = ReportReader()
    try:
        reader.feed(garbage)
    except HALinkError as exc:
        assert "negative" in str(exc)
    assert len(reader._pending) < 8


@given(st.lists(st.tuples(offsets, st.binary(max_size=300)), max_size=10), st.data())
def test_frames_survive_any_split(frames: list[tuple[int, bytes]], data: st.DataObject) -> None:
    stream = b"".join(encode_header(o, len(b)) + b for o, b in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader, got = FrameReader(), []
    for begin, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += reader.feed(stream[begin:end])
    assert got == frames


def test_an_oversized_or_negative_frame_header_ends_the_link_before_its_body() -> None:
    with pytest.raises(HALinkError, match="size"):
        FrameReader().feed(encode_header(0, MAX_FRAME_BODY + 1))
    with pytest.raises(HALinkError):
        FrameReader().feed(encode_header(-1, 0))
    with pytest.raises(HALinkError):
        FrameReader().feed(encode_header(0, -5))


@given(st.binary(max_size=2048))
def test_garbage_frames_are_bounded_or_refused(garbage: bytes) -> None:
    reader = FrameReader(max_body=1024)
    try:
        for offset, body in reader.feed(garbage):
            assert offset >= 0 and len(body) <= 1024
    except HALinkError:
        return
    assert len(reader._buf) < HEADER_SIZE + 1024


# --- master decisions -------------------------------------------------------------------------


@given(st.integers(0, 10 * GiB))
def test_an_empty_slave_starts_at_the_masters_last_file(master_max: int) -> None:
    start = start_offset(0, 0, master_max, GiB)
    assert start % GiB == 0 and start <= master_max < start + GiB


def test_a_slave_resumes_where_it_ends() -> None:
    assert start_offset(5000, 0, 9000, GiB) == 5000
    assert start_offset(9000, 0, 9000, GiB) == 9000


@given(st.integers(0, 10 * GiB), st.integers(1, 10 * GiB))
def test_a_report_past_the_masters_end_ends_the_link(master_max: int, extra: int) -> None:
    with pytest.raises(HALinkError, match="past the master's max offset"):
        check_report(master_max + extra, master_max)
    with pytest.raises(HALinkError, match="past the master's max offset"):
        start_offset(master_max + extra, 0, master_max, GiB)


def test_a_slave_behind_the_masters_first_file_is_refused() -> None:
    with pytest.raises(HALinkError, match="deleted"):
        start_offset(100, GiB, GiB + 500, GiB)


@given(st.integers(0, 3 * GiB), st.integers(0, GiB), st.integers(1, 1 << 20))
def test_a_chunk_never_spans_files_nor_exceeds_the_batch(offset: int, wrote: int, batch: int) -> None:
    file_start = offset - offset % GiB
    n = chunk_size(offset, file_start, wrote, batch)
    assert 0 <= n <= batch
    assert offset + n <= file_start + max(wrote, offset - file_start)
    assert (offset % GiB) + n <= GiB


# --- slave decisions --------------------------------------------------------------------------


def test_a_slave_appends_only_at_its_own_end() -> None:
    check_frame(4096, 4096, 100, GiB)
    with pytest.raises(HALinkError, match="slave's max offset"):
        check_frame(4096, 4000, 100, GiB)


def test_an_empty_slave_starts_at_a_file_start_and_frames_stay_in_one_file() -> None:
    check_frame(0, 2 * GiB, 100, GiB)
    with pytest.raises(HALinkError, match="file start"):
        check_frame(0, 100, 100, GiB)
    with pytest.raises(HALinkError, match="spans"):
        check_frame(GiB - 10, GiB - 10, 20, GiB)
