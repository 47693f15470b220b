from __future__ import annotations

import pytest

from apogee.client.consumer.subscription import build_subscription
from apogee.common.java_hash import tags_code
from apogee.errors import SubscriptionParseFailedError


@pytest.mark.parametrize("expr", ["*", "", None, "  *  ", "A || *"])
def test_everything(expr: str | None) -> None:
    sub = build_subscription("T", expr, 5)
    assert sub.expression == "*" and sub.tags is None and sub.matches("anything") and sub.matches(None)
    data = sub.to_data()
    assert data.sub_string == "*" and data.tags_set == [] and data.code_set == []


def test_tags_are_split_and_trimmed() -> None:
    sub = build_subscription("T", " TagA ||TagB|| TagA ", 7)
    assert sub.tags == frozenset({"TagA", "TagB"})
    assert sub.matches("TagB") and not sub.matches("TagC") and not sub.matches(None)
    data = sub.to_data()
    assert data.tags_set == ["TagA", "TagB"]
    assert data.code_set == [tags_code("TagA"), tags_code("TagB")]
    assert data.sub_version == 7 and data.topic == "T"


def test_expression_without_tags_is_rejected() -> None:
    with pytest.raises(SubscriptionParseFailedError):
        build_subscription("T", "||", 1)
