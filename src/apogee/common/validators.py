"""What a name or a number must be before it enters a broker table (pure).

RocketMQ's clients check names before sending (``Validators.checkTopic/checkGroup``) and its
broker checks topic names on send and on topic creation (``TopicValidator``); every number a
request carries has a Java type, and a Java server fails to decode a value outside it.  A
broker that stores what it cannot write back (a commit offset of 10^20, a permission of
10^20) breaks every later write of its table, so the same rules are applied here, at the
edge, to every value that reaches a table:

* topic: not blank, only ``[%|a-zA-Z0-9_-]``, at most 127 characters (TopicValidator; the
  CommitLog stores the topic's length in one signed byte);
* group: not blank, only the same characters, at most 255 characters (Validators);
* Java ``int`` and ``long`` ranges for numbers, and a permission made of PermName's bits only.

Each check returns why a value is refused (a remark for the error answer), or None.
"""

from __future__ import annotations

import re
from typing import Final

from apogee.common.constants import (
    MAX_TOPIC_LENGTH,
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TRANS_CHECK_MAX_TIME_TOPIC,
)

GROUP_MAX_LENGTH: Final = 255
"""Validators.CHARACTER_MAX_LENGTH."""

NAME_CHARS: Final = "^[%|a-zA-Z0-9_-]+$"
"""The characters of a topic or group name, as RocketMQ's remarks spell them."""

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

PERM_BITS: Final = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT
"""Every bit PermName defines; a permission with any other bit set is refused."""

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
     TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT}
)
"""Topics the broker writes itself; producers may not send to them (TopicValidator)."""


def is_system_topic(topic: str, own_names: tuple[str, ...] = ()) -> bool:
    """TopicValidator.isSystemTopic: a topic of RocketMQ's system set or with the ``rmq_sys_``
    prefix; a broker also counts its cluster and broker names (``own_names``), which it
    registers as topics.  Such topics cannot be deleted or created by hand."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in own_names


def validate_topic(topic: str) -> str | None:
    """Why ``topic`` is not a legal topic name, or None when it is."""
    return _name_problem("topic", topic, MAX_TOPIC_LENGTH)


def validate_group(group: str) -> str | None:
    """Why ``group`` is not a legal producer or consumer group name, or None when it is."""
    return _name_problem("group", group, GROUP_MAX_LENGTH)


def _name_problem(kind: str, name: str, max_length: int) -> str | None:
    if not name:
        return f"the {kind} name is empty"
    if len(name) > max_length:
        return f"the {kind} name is longer than {max_length} characters"
    if _NAME.fullmatch(name) is None:
        return f"the {kind} name {name!r} contains characters other than letters, digits, %, |, - and _ ({NAME_CHARS})"
    return None


def validate_perm(perm: int) -> str | None:
    """Why ``perm`` is not a topic permission (PermName bits only), or None."""
    if perm < 0 or perm & ~PERM_BITS:
        return f"the permission {perm} has bits other than PermName's (PRIORITY 8, READ 4, WRITE 2, INHERIT 1)"
    return None


def int32_problem(name: str, value: int) -> str | None:
    """Why ``value`` does not fit the Java ``int`` field ``name``, or None."""
    if INT32_MIN <= value <= INT32_MAX:
        return None
    return f"{name} {value} is out of range for a Java int ({INT32_MIN}..{INT32_MAX})"


def int64_problem(name: str, value: int) -> str | None:
    """Why ``value`` does not fit the Java ``long`` field ``name``, or None."""
    if INT64_MIN <= value <= INT64_MAX:
        return None
    return f"{name} {value} is out of range for a Java long"
