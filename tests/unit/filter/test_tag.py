"""TAG subscriptions, as RocketMQ's FilterAPI splits them."""

from __future__ import annotations

import pytest

from apogee.common.java_hash import java_string_hash
from apogee.filter import parse_tag_expression
from apogee.store.results import TagCodeFilter


@pytest.mark.parametrize("expression", [None, "", "*"])
def test_subscribe_all(expression: str | None) -> None:
    parsed = parse_tag_expression(expression)
    assert parsed.sub_all and not parsed.tags
    f = parsed.to_filter()
    assert isinstance(f, TagCodeFilter) and f.codes is None
    assert f.is_matched_by_consume_queue(12345) and f.is_matched_by_consume_queue(0)


def test_tags_and_java_hash_codes() -> None:
    parsed = parse_tag_expression("TagA || TagB")
    assert not parsed.sub_all
    assert parsed.tags == {"TagA", "TagB"}
    assert 2598919 in parsed.codes  # "TagA".hashCode() in Java
    assert parsed.codes == {java_string_hash("TagA"), java_string_hash("TagB")}
    f = parsed.to_filter()
    assert f.is_matched_by_consume_queue(2598919)
    assert not f.is_matched_by_consume_queue(java_string_hash("TagC"))


def test_parts_are_trimmed_and_empty_ones_dropped() -> None:
    assert parse_tag_expression(" TagA ||TagB||  || ").tags == {"TagA", "TagB"}
    assert parse_tag_expression("\tTagA\x01||TagB").tags == {"TagA", "TagB"}  # Java trim: chars <= ' '
    assert parse_tag_expression("Tag\u00a0").tags == {"Tag\u00a0"}  # ... and nothing else


def test_only_an_exact_star_means_everything() -> None:
    assert parse_tag_expression(" * ").tags == {"*"}
    parsed = parse_tag_expression("TagA || *")
    assert not parsed.sub_all and parsed.tags == {"TagA", "*"}


def test_nothing_but_separators_matches_nothing() -> None:
    parsed = parse_tag_expression("||")
    assert not parsed.sub_all and not parsed.tags
    assert not parsed.to_filter().is_matched_by_consume_queue(0)


def test_client_side_tag_check() -> None:
    parsed = parse_tag_expression("TagA")
    assert parsed.matches_tag("TagA") and not parsed.matches_tag("TagB") and not parsed.matches_tag(None)
    assert parse_tag_expression("*").matches_tag(None)
