"""The store-facing filters on real stored records (``message_codec.encode_record``)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.common.message_codec import decode_record, encode_record, parse_properties
from apogee.filter import (
    FilterExpressionError,
    SqlMessageFilter,
    compile_filter,
    compile_sql92,
    record_properties_text,
)
from apogee.filter.message_filter import _extractor
from apogee.store.results import MessageFilter, TagCodeFilter


def record(properties: str | dict[str, str], body: bytes = b"hello") -> memoryview:
    return memoryview(encode_record(topic="TopicTest", body=body, properties=properties))


def to_ipv6(raw: bytes) -> bytes:
    """The same record with both hosts in the IPv6 layout (SYSFLAG bits 0x10 and 0x20)."""
    head = bytearray(raw[:48])
    sysflag = struct.unpack_from(">i", head, 36)[0] | 0x30
    struct.pack_into(">i", head, 36, sysflag)
    born = b"\x00" * 10 + b"\xff\xff" + raw[48:52] + raw[52:56]
    store = b"\x00" * 10 + b"\xff\xff" + raw[64:68] + raw[68:72]
    out = bytearray(head + born + raw[56:64] + store + raw[72:])
    struct.pack_into(">i", out, 0, len(out))
    return bytes(out)


def test_sql_filter_reads_properties_and_tags() -> None:
    f = SqlMessageFilter("a > 5 AND TAGS = 'TagA'")
    assert f.is_matched_by_consume_queue(-1)
    assert f.is_matched_by_commit_log(record({"TAGS": "TagA", "a": "6", "KEYS": "k1"}))
    assert not f.is_matched_by_commit_log(record({"TAGS": "TagB", "a": "6"}))
    assert not f.is_matched_by_commit_log(record({"TAGS": "TagA", "a": "5"}))
    assert not f.is_matched_by_commit_log(record({}))
    assert f.expression == "a > 5 AND TAGS = 'TagA'"
    assert f.matches_properties({"TAGS": "TagA", "a": "7"})


def test_satisfies_the_store_protocol() -> None:
    f: MessageFilter = SqlMessageFilter("TAGS IS NOT NULL")
    assert f.is_matched_by_commit_log(record({"TAGS": "x"}))


def test_ipv6_layout() -> None:
    raw = to_ipv6(bytes(record({"TAGS": "TagA", "a": "6"}, body=b"z" * 100)))
    assert decode_record(raw).properties == {"TAGS": "TagA", "a": "6"}
    assert SqlMessageFilter("a = 6 AND TAGS = 'TagA'").is_matched_by_commit_log(memoryview(raw))


def test_properties_string_rules() -> None:
    # Java's string2messageProperties: last duplicate wins, empty values are dropped (so an
    # earlier non-empty one survives), a value may contain \x01, a trailing \x02 is optional.
    f = SqlMessageFilter("a = 'two' AND b = 'keep' AND c = 'x\x01y' AND d IS NULL")
    raw = "a\x01one\x02b\x01keep\x02a\x01two\x02b\x01\x02c\x01x\x01y\x02d\x01\x02"
    assert parse_properties(raw) == {"a": "two", "b": "keep", "c": "x\x01y"}
    assert f.is_matched_by_commit_log(record(raw))
    assert SqlMessageFilter("xa = '1'").is_matched_by_commit_log(record("a\x01zz\x02xa\x011"))
    assert not SqlMessageFilter("a = '1'").is_matched_by_commit_log(record("xa\x011"))


def test_non_ascii_values_and_body_untouched() -> None:
    f = SqlMessageFilter("city = 'Zürich' AND note CONTAINS '東京'")
    assert f.is_matched_by_commit_log(record({"city": "Zürich", "note": "旅行 東京 2024"}, body=b"\x02a\x01b"))


def test_record_properties_text() -> None:
    rec = record({"TAGS": "TagA"}, body=b"\x02TAGS\x01TagB" * 10)
    assert record_properties_text(rec) == "TAGS\x01TagA"
    assert record_properties_text(record("")) == ""
    assert record_properties_text(to_ipv6(bytes(rec))) == "TAGS\x01TagA"
    with pytest.raises(ValueError):
        record_properties_text(memoryview(bytes(rec)[:60]))


def test_truncated_record_does_not_match() -> None:
    rec = bytes(record({"TAGS": "TagA"}))
    assert not SqlMessageFilter("TAGS = 'TagA'").is_matched_by_commit_log(memoryview(rec[:-3]))


_value_text = st.text(
    alphabet=st.characters(blacklist_characters="\x00\x02", blacklist_categories=("Cs",)), max_size=6
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "TAGS", "KEYS", "aa", "ba", "", "a\x01"]), _value_text), max_size=8),
    st.booleans(),
)
def test_extraction_matches_full_decoding(items: list[tuple[str, str]], trailing: bool) -> None:
    # Duplicates, empty values, values holding \x01, items without \x01: all as Java decodes.
    text = "\x02".join(f"{k}\x01{v}" if k != "a\x01" else v for k, v in items) + ("\x02" if trailing else "")
    names = frozenset({"a", "b", "TAGS", "zz"})
    expected = {k: v for k, v in parse_properties(text).items() if k in names}
    assert _extractor(names)(text) == expected
    assert record_properties_text(record(text)) == text


def test_compile_filter_tag() -> None:
    for expression_type in (None, "", "TAG"):
        f = compile_filter(expression_type, "TagA || TagB")
        assert isinstance(f, TagCodeFilter) and f.codes is not None and len(f.codes) == 2
    assert isinstance(compile_filter("TAG", "*"), TagCodeFilter)
    assert compile_filter("TAG", None).is_matched_by_consume_queue(42)


def test_compile_filter_sql92() -> None:
    f = compile_filter("SQL92", "TAGS = 'TagA'")
    assert isinstance(f, SqlMessageFilter)
    assert f.compiled is compile_sql92("TAGS = 'TagA'")  # compiled once, then cached


@pytest.mark.parametrize(
    ("expression_type", "expression", "fragment"),
    [
        ("sql92", "a = 1", "unsupported expression type 'sql92'"),
        ("CLASS", "x", "unsupported expression type"),
        ("SQL92", "", "needs an expression"),
        ("SQL92", None, "needs an expression"),
        ("SQL92", "a = ", "at column 5"),
    ],
)
def test_compile_filter_errors(expression_type: str, expression: str | None, fragment: str) -> None:
    with pytest.raises(FilterExpressionError, match=fragment):
        compile_filter(expression_type, expression)
