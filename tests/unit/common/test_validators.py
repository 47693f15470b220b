"""The name and number rules of RocketMQ's Validators and TopicValidator (4.9.8)."""

from __future__ import annotations

import pytest

from apogee.common.validators import (
    INT32_MAX,
    INT64_MIN,
    NOT_ALLOWED_SEND_TOPICS,
    int32_problem,
    int64_problem,
    validate_group,
    validate_perm,
    validate_topic,
)


@pytest.mark.parametrize("name", ["T", "Topic_A-1|%x", "%RETRY%group", "a" * 127, "0"])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [("", "empty"), ("a" * 128, "127"), ("a b", "characters"), ("T\n", "characters"), ("T.1", "characters"),
     ("tópico", "characters"), ("T\x00", "characters"), ("é" * 64, "characters")],
)
def test_illegal_topic_names(name: str, why: str) -> None:
    assert why in (validate_topic(name) or "")


def test_group_names_allow_255_characters_of_the_same_set() -> None:
    assert validate_group("G" * 255) is None
    assert validate_group("CID_RMQ_SYS_TRANS") is None
    assert "empty" in (validate_group("") or "")
    assert "255" in (validate_group("G" * 256) or "")
    assert "255" in (validate_group("G" * 300) or "")
    assert "characters" in (validate_group("my.group") or "")
    assert "characters" in (validate_group("g\n") or "")


def test_permission_bits() -> None:
    for perm in range(16):
        assert validate_perm(perm) is None
    for perm in (16, -1, 10**20, 1 << 31):
        assert validate_perm(perm) is not None


def test_java_ranges() -> None:
    assert int32_problem("flag", INT32_MAX) is None
    assert "flag" in (int32_problem("flag", INT32_MAX + 1) or "")
    assert int64_problem("commitOffset", INT64_MIN) is None
    assert "commitOffset" in (int64_problem("commitOffset", 10**20) or "")


def test_producers_may_not_send_to_the_topics_the_broker_writes() -> None:
    assert {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"} == NOT_ALLOWED_SEND_TOPICS
