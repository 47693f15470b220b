from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.common.java_hash import (
    abs_hash,
    index_hashes,
    index_key_hash,
    java_hash_concat,
    java_hash_unsigned,
    java_string_hash,
    tags_code,
)


def reference_hash(s: str) -> int:
    """Java String.hashCode written the obvious way (UTF-16 code units, int32 wrap)."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_known_java_values() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("中") == 0x4E2D
    assert java_string_hash("\U0001F600") == 55357 * 31 + 56832  # a surrogate pair: two units
    assert java_string_hash("polygenelubricants") == -(1 << 31)


def test_tags_code_of_missing_or_empty_tag_is_zero() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919


def test_index_hash_is_abs_and_min_value_maps_to_zero() -> None:
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("T#k") == abs(reference_hash("T#k"))
    assert abs_hash(0xFFFFFFFF) == 1


@given(st.text(max_size=300))
def test_matches_reference(s: str) -> None:
    assert java_string_hash(s) == reference_hash(s)


@given(st.text(max_size=40), st.text(max_size=300))
def test_concat_equals_hash_of_concatenation(prefix: str, s: str) -> None:
    assert java_hash_concat(java_hash_unsigned(prefix), s) == java_hash_unsigned(prefix + s)


@given(st.text(max_size=30), st.lists(st.text(max_size=300), max_size=5))
def test_index_hashes(prefix: str, keys: list[str]) -> None:
    assert index_hashes(java_hash_unsigned(prefix), keys) == [index_key_hash(prefix + k) for k in keys]
