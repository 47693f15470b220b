from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.store.layout import checkpoint, cq_unit, index

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(i64, i32, i64)
def test_cq_unit_round_trip(phys: int, size: int, tags: int) -> None:
    raw = cq_unit.pack_unit(phys, size, tags)
    assert len(raw) == cq_unit.CQ_UNIT_SIZE == 20
    assert cq_unit.unpack_unit(b"xx" + raw, 2) == (phys, size, tags)


def test_cq_unit_byte_layout() -> None:
    assert cq_unit.pack_unit(1, 2, 3) == (1).to_bytes(8, "big") + (2).to_bytes(4, "big") + (3).to_bytes(8, "big")
    assert cq_unit.is_valid_unit(0, 1) and not cq_unit.is_valid_unit(0, 0)


@given(i64, i64, i64, i64, i32, i32)
def test_index_header_round_trip(b: int, e: int, bp: int, ep: int, sc: int, ic: int) -> None:
    raw = index.pack_header(b, e, bp, ep, sc, ic)
    assert len(raw) == index.INDEX_HEADER_SIZE == 40
    assert index.unpack_header(raw) == (b, e, bp, ep, sc, ic)


@given(i32, i64, i32, i32)
def test_index_entry_round_trip(h: int, phy: int, diff: int, prev: int) -> None:
    raw = index.pack_entry(h, phy, diff, prev)
    assert len(raw) == index.INDEX_ENTRY_SIZE == 20
    assert index.unpack_entry(raw, 0) == (h, phy, diff, prev)


def test_index_geometry_and_time_diff() -> None:
    assert index.file_size(5_000_000, 20_000_000) == 420_000_040
    assert index.slot_position(3) == 52
    assert index.entry_position(10, 2) == 40 + 40 + 40
    assert index.time_diff_s(5_500, 1_000) == 4
    assert index.time_diff_s(500, 1_000) == 0
    assert index.time_diff_s(5_000, 0) == 0
    assert index.time_diff_s(2**62, 1) == index.INT_MAX


@given(i64, i64, i64)
def test_checkpoint_round_trip(p: int, lg: int, i: int) -> None:
    raw = checkpoint.pack(p, lg, i)
    assert len(raw) == checkpoint.CHECKPOINT_FILE_SIZE == 4096
    assert checkpoint.unpack(raw) == (p, lg, i)


def test_checkpoint_min_timestamp() -> None:
    assert checkpoint.unpack(b"") == (0, 0, 0)
    assert checkpoint.min_timestamp(10_000, 20_000, 5_000, index_safe=False) == 7_000
    assert checkpoint.min_timestamp(10_000, 20_000, 5_000, index_safe=True) == 2_000
    assert checkpoint.min_timestamp(1_000, 2_000, 0, index_safe=False) == 0
