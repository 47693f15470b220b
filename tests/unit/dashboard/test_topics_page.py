from __future__ import annotations

import pytest

from apogee.dashboard.errors import BadInput
from apogee.dashboard.pages.topics import TopicForm, TopicRow, select_rows, topic_kind, topic_path
from apogee.dashboard.web import fmt_bytes, fmt_ms, fmt_num, fmt_perm


@pytest.mark.parametrize(("topic", "kind"), [
    ("OrderEvents", "normal"), ("%RETRY%PG", "retry"), ("%DLQ%PG", "dlq"), ("TBW102", "system"),
    ("SCHEDULE_TOPIC_XXXX", "system"), ("rmq_sys_TRACE_DATA_x", "system"), ("broker-a", "system"),
    ("DefaultCluster_REPLY_TOPIC", "system"), ("broker-b", "normal"),
])
def test_kinds(topic: str, kind: str) -> None:
    assert topic_kind(topic, ("DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC")) == kind


def test_the_list_filters_by_kind_and_text() -> None:
    rows = [TopicRow("OrderEvents", "normal"), TopicRow("order-audit", "normal"), TopicRow("%RETRY%orders", "retry"),
            TopicRow("TBW102", "system")]
    assert [r.name for r in select_rows(rows, "normal", "ORDER")] == ["OrderEvents", "order-audit"]
    assert [r.name for r in select_rows(rows, "all", "order")] == ["OrderEvents", "order-audit", "%RETRY%orders"]
    assert [r.name for r in select_rows(rows, "system", "")] == ["TBW102"]
    assert topic_path("%RETRY%orders", "edit") == "/topics/%25RETRY%25orders/edit"


def test_the_form_refuses_what_cannot_be_a_topic_before_asking_anyone() -> None:
    good = {"topic": "OrderEvents", "target": "cluster:DefaultCluster", "write_queues": "4", "read_queues": "2",
            "perm": "6", "order": "on"}
    assert TopicForm.parse(good) == TopicForm("OrderEvents", "cluster:DefaultCluster", 4, 2, 6, True)
    for change, message in [
        ({"topic": "bad topic"}, "contains characters other than"), ({"target": ""}, "choose where"),
        ({"write_queues": "x"}, "write_queues must be a whole number"), ({"read_queues": "0"}, "at least 1"),
        ({"perm": "7"}, "perm must be 2, 4 or 6"),
    ]:
        with pytest.raises(BadInput, match=message):
            TopicForm.parse({**good, **change})
    # Shown again after a refusal: what was entered, bad numbers as defaults.
    assert TopicForm.lenient({**good, "write_queues": "x"}).write_queues == 8


def test_formats() -> None:
    assert fmt_ms(0) == "-" and fmt_ms(1_700_000_000_123).endswith(".123")
    assert fmt_bytes(512) == "512 B" and fmt_bytes(3 * 1024**3) == "3.0 GiB"
    assert fmt_num(1234567) == "1,234,567" and fmt_num(2.25, 1) == "2.2"
    assert [fmt_perm(p) for p in (6, 4, 2, 7, 0)] == ["RW", "R", "W", "RWX", "-"]
