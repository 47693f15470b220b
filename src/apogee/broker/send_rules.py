"""Whether the broker takes a send: every acceptance rule, once (pure, plain values in).

RocketMQ's ``AbstractSendMessageProcessor.msgCheck`` and the checks around it, in the order
the full path (``SendProcessor.send``) applies them:

1. the broker is writable (``brokerPermission``);
2. the topic name is legal and not one the broker writes itself (``TopicValidator``);
3. the topic exists, or may be created: a ``%RETRY%`` topic as a system topic, any other
   from its template (``defaultTopic``, TBW102) -- ``missing_topic`` answers when neither;
4. the topic is writable;
5. the queue id is below the topic's queue count (a negative one picks a queue);
6. the body is not empty and within ``maxMessageSize``;
7. routing: a retry topic needs its group, a batch may not go to a retry topic nor carry a
   delay, a transaction message needs a broker that takes them.

Header fields have their Java ranges checked as they are decoded (``headers.base``), before
any of this.  Each function returns the ``Refusal`` to answer with, or None.

The C single-send fast path (``SendProcessor._send_plain``) judges with the same functions
and only ever declines more: it takes a send when these rules accept it *and* nothing needs
rewriting (no retry topic, no transaction bits, a chosen queue, plain properties); anything
else, including every refusal, goes to the full path, which answers it.
"""

from __future__ import annotations

from typing import NamedTuple

from apogee.common.constants import (
    MULTI_TAGS_FLAG,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
)
from apogee.common.validators import NOT_ALLOWED_SEND_TOPICS, validate_topic
from apogee.remoting.codes import ResponseCode


class Refusal(NamedTuple):
    """The response code and remark a refused send is answered with."""

    code: int
    remark: str


def broker_refusal(broker_perm: int, broker_addr: str) -> Refusal | None:
    """Rule 1: a broker without the WRITE permission takes no message."""
    if broker_perm & PERM_WRITE:
        return None
    return Refusal(ResponseCode.NO_PERMISSION, f"the broker[{broker_addr}] sending message is forbidden")


def topic_name_refusal(topic: str) -> Refusal | None:
    """Rule 2: the name is legal and producers may send to it."""
    problem = validate_topic(topic)
    if problem is not None:
        return Refusal(ResponseCode.SYSTEM_ERROR, problem)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return Refusal(ResponseCode.NO_PERMISSION, f"sending message to topic[{topic}] is forbidden.")
    return None


def is_retry_topic(topic: str) -> bool:
    """Rule 3's choice: a missing ``%RETRY%`` topic is created as a system topic, not from a template."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def missing_topic(topic: str) -> Refusal:
    """Rule 3: the topic does not exist and may not be created from the given template."""
    return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")


def topic_perm_refusal(topic: str, perm: int) -> Refusal | None:
    """Rule 4: the (existing) topic is writable."""
    if perm & PERM_WRITE:
        return None
    return Refusal(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")


def queue_refusal(topic: str, queue_id: int, read_queue_nums: int, write_queue_nums: int) -> Refusal | None:
    """Rule 5: the queue id is below the topic's larger queue count."""
    if queue_id >= read_queue_nums and queue_id >= write_queue_nums:
        return Refusal(
            ResponseCode.SYSTEM_ERROR,
            f"request queueId[{queue_id}] is illegal, topic {topic} has {write_queue_nums} write queues",
        )
    return None


def body_refusal(body_len: int, max_size: int) -> Refusal | None:
    """Rule 6, for one message's body."""
    if body_len <= 0:
        return Refusal(ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
    if body_len > max_size:
        return Refusal(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message body size {body_len} is over the limit {max_size} (maxMessageSize)",
        )
    return None


def missing_group(group: str, problem: str | None) -> Refusal:
    """Rule 7: a retry topic's group (or a send-back's) is unknown; ``problem`` says why its
    name was not auto-created, when that is the reason."""
    remark = f"subscription group not exist, {group}"
    return Refusal(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"{remark}: {problem}" if problem else remark)


def batch_refusal(topic: str, body_len: int) -> Refusal | None:
    """Rule 7 for a batch as a whole (each message's body also meets rule 6)."""
    if is_retry_topic(topic):
        return Refusal(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be sent to a retry topic")
    if body_len <= 0:
        return Refusal(ResponseCode.MESSAGE_ILLEGAL, "the batch body is empty")
    return None


BATCH_DELAY = Refusal(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot have a delay level")


def transaction_refusal(reject_transaction_message: bool, broker_addr: str) -> Refusal | None:
    """Rule 7 for a prepared (half) message."""
    if not reject_transaction_message:
        return None
    return Refusal(ResponseCode.NO_PERMISSION, f"the broker[{broker_addr}] sending transaction message is forbidden")


def topic_sysflag_bits(topic_filter_type: str) -> int:
    """Bits the broker adds to a message's sysflag for its topic (MULTI_TAG topics)."""
    return MULTI_TAGS_FLAG if topic_filter_type == "MULTI_TAG" else 0



# --- what a stored put waits for ----------------------------------------------------------------


def waits_for_store(wait: str | None) -> bool:
    """RocketMQ's ``isWaitStoreMsgOK``: a put is answered after its flush (SYNC_FLUSH) and a
    slave (SYNC_MASTER) unless its ``WAIT`` property is there and not ``true`` (Java's
    ``Boolean.parseBoolean``: absent means wait)."""
    return wait is None or wait.lower() == "true"


def plain_waits_unclear(properties: str) -> bool:
    """The fast path's decline for WAIT: a properties text naming WAIT with any value but
    ``true`` goes to the full path, which parses it (``waits_for_store``); the fast path
    always waits."""
    at = properties.find("WAIT\x01")
    if at < 0:
        return False
    named = at == 0 or properties[at - 1] == "\x02"
    return not (named and properties.startswith("WAIT\x01true\x02", at) and properties.find("WAIT\x01", at + 1) < 0)
