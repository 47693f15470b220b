"""The send acceptance rules on their own (pure): each refusal's code and the boundaries."""

from __future__ import annotations

from apogee.broker import send_rules as rules
from apogee.common.constants import MULTI_TAGS_FLAG
from apogee.remoting.codes import ResponseCode


def test_broker_permission() -> None:
    assert rules.broker_refusal(6, "b:1") is None
    refusal = rules.broker_refusal(4, "b:1")
    assert refusal is not None and refusal.code == ResponseCode.NO_PERMISSION and "b:1" in refusal.remark


def test_topic_names() -> None:
    assert rules.topic_name_refusal("Orders") is None
    assert rules.topic_name_refusal("%RETRY%G") is None
    bad = rules.topic_name_refusal("Bad Topic")
    assert bad is not None and bad.code == ResponseCode.SYSTEM_ERROR
    forbidden = rules.topic_name_refusal("SCHEDULE_TOPIC_XXXX")
    assert forbidden is not None and forbidden.code == ResponseCode.NO_PERMISSION


def test_topic_permission_and_queue_range() -> None:
    assert rules.topic_perm_refusal("T", 6) is None
    assert rules.topic_perm_refusal("T", 4) == (ResponseCode.NO_PERMISSION, "the topic[T] sending message is forbidden")
    # The larger of the two queue counts is the bound; negative ids pick a queue.
    assert rules.queue_refusal("T", 7, 4, 8) is None
    assert rules.queue_refusal("T", -1, 4, 4) is None
    refusal = rules.queue_refusal("T", 8, 4, 8)
    assert refusal is not None and refusal.code == ResponseCode.SYSTEM_ERROR and "queueId[8]" in refusal.remark


def test_body_size() -> None:
    assert rules.body_refusal(1, 10) is None
    assert rules.body_refusal(10, 10) is None
    assert rules.body_refusal(0, 10) == (ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
    over = rules.body_refusal(11, 10)
    assert over is not None and over.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in over.remark


def test_routing_rules() -> None:
    assert rules.is_retry_topic("%RETRY%G") and not rules.is_retry_topic("RETRY")
    assert rules.missing_topic("T").code == ResponseCode.TOPIC_NOT_EXIST
    assert rules.missing_group("G", None).remark == "subscription group not exist, G"
    assert "empty" in rules.missing_group("", "the group name is empty").remark
    assert rules.batch_refusal("T", 10) is None
    assert rules.batch_refusal("%RETRY%G", 10) is not None
    assert rules.batch_refusal("T", 0) is not None
    assert rules.transaction_refusal(False, "b") is None
    refusal = rules.transaction_refusal(True, "b")
    assert refusal is not None and refusal.code == ResponseCode.NO_PERMISSION
    assert rules.topic_sysflag_bits("MULTI_TAG") == MULTI_TAGS_FLAG and rules.topic_sysflag_bits("SINGLE_TAG") == 0
