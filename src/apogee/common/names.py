"""Topic names: what makes one legal, and which topics producers may not send to.

Shared by the broker (which refuses a bad name in a request) and the client (which refuses
it before sending), so both give the same reason.  RocketMQ's rules (``TopicValidator``):
at most 127 bytes of letters, digits, ``%``, ``|``, ``-`` and ``_``.
"""

from __future__ import annotations

import re

from apogee.common.constants import (
    MAX_TOPIC_LENGTH,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SCHEDULE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
)

_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")

# Topics the broker writes itself; producers may not send to them directly.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
     TRANS_CHECK_MAX_TIME_TOPIC, OFFSET_MOVED_EVENT}
)


def validate_topic(topic: str) -> str | None:
    """Why ``topic`` is not a legal topic name, or None when it is (RocketMQ's rules)."""
    if not topic:
        return "the topic name is empty"
    if len(topic.encode()) > MAX_TOPIC_LENGTH:
        return f"the topic name is longer than {MAX_TOPIC_LENGTH} bytes"
    if not _TOPIC_CHARS.match(topic):
        return f"the topic name {topic!r} contains characters other than letters, digits, %, |, - and _"
    return None
