"""What a message must be before it is sent (RocketMQ's ``Validators.checkMessage``).

Checked on the client so a bad message fails with its reason before anything travels:
topic name (characters, length, not TBW102 or a topic only the broker writes), body
(non-empty bytes within ``max_message_size``), properties (str names and values without the
``\\x01``/``\\x02`` separators of the properties string), delay level.  The producer's fast
paths test only the cheap conditions inline and call ``validate_message`` for the reason.
"""

from __future__ import annotations

from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.message import Message
from apogee.common.message_codec import properties_to_string
from apogee.common.validators import NOT_ALLOWED_SEND_TOPICS, validate_topic
from apogee.errors import MessageValidationError

# Topics that passed check_topic (up to 10,000): the per-send check is one set lookup.
valid_topics: set[str] = set()
# Valid topics that are not retry topics: send_async may batch messages to them.
batchable_topics: set[str] = set()


def check_topic(topic: str) -> None:
    if topic in valid_topics:
        return
    if not isinstance(topic, str):
        raise MessageValidationError(f"the topic must be a str, not {type(topic).__name__}")
    problem = validate_topic(topic)
    if problem is not None:
        raise MessageValidationError(problem)
    if topic == c.TBW102:
        raise MessageValidationError(f"the topic {topic} is reserved for auto-creating topics")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MessageValidationError(f"sending to the system topic {topic} is not allowed")
    if len(valid_topics) < 10_000:
        valid_topics.add(topic)
        if not topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
            batchable_topics.add(topic)


def validate_message(msg: Message, max_message_size: int) -> None:
    """RocketMQ's Validators.checkMessage, with the reason in the error."""
    if not isinstance(msg, Message):
        raise MessageValidationError(f"expected a Message, got {type(msg).__name__}")
    check_topic(msg.topic)
    body = msg.body
    if not isinstance(body, (bytes, bytearray)):
        raise MessageValidationError(f"the message body must be bytes, not {type(body).__name__}")
    if not body:
        raise MessageValidationError("the message body is empty")
    if len(body) > max_message_size:
        raise MessageValidationError(
            f"the message body is {len(body)} bytes, more than max_message_size {max_message_size}"
        )
    for key, value in msg.properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise MessageValidationError(f"property {key!r}={value!r}: names and values must be str")
        if not key or "\x01" in key or "\x02" in key or "\x01" in value or "\x02" in value:
            raise MessageValidationError(f"property {key!r} has an empty name or a \\x01/\\x02 character")
    level = msg.delay_time_level
    if level < 0:
        raise MessageValidationError(f"delay level {level} is negative")


def check_message(msg: Message, max_message_size: int) -> None:
    """``validate_message`` when one of the cheap conditions fails (the per-send check)."""
    body = msg.body
    if (
        msg.topic not in valid_topics
        or type(body) is not bytes
        or not body
        or len(body) > max_message_size
        or msg.delay_time_level < 0
    ):
        validate_message(msg, max_message_size)


def properties_text(msg: Message) -> str:
    """The properties string of ``msg``; a name or value holding a separator is refused here."""
    props = msg.properties
    if native is not None and props.__class__ is dict:
        text: str | None = native.properties_to_string(props, True)
        if text is None:
            validate_message(msg, 1 << 62)  # raises with the reason
        return text  # type: ignore[return-value]
    if not all(isinstance(k, str) and isinstance(v, str) and k for k, v in props.items()):
        validate_message(msg, 1 << 62)  # raises with the reason
    text = properties_to_string(props)
    if text.count("\x01") != len(props) or text.count("\x02") != len(props) - 1:
        validate_message(msg, 1 << 62)
    return text


def retry_counts(msg: Message) -> tuple[int | None, int | None] | None:
    """reconsumeTimes / maxReconsumeTimes of a message sent to a retry topic, else None."""
    if not msg.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
        return None
    props = msg.properties
    try:
        reconsume = int(props.get(c.RECONSUME_TIME, "0"))
        max_times = int(props[c.MAX_RECONSUME_TIMES]) if c.MAX_RECONSUME_TIMES in props else None
    except ValueError:
        return None
    return reconsume, max_times
