"""Where the broker re-routes a message, and what it notes in its properties on the way.

RocketMQ stores some messages somewhere other than where they were sent, and keeps the way
back in their properties:

* a message with ``DELAY=n`` waits in ``SCHEDULE_TOPIC_XXXX`` queue n-1, its topic and queue
  in ``REAL_TOPIC``/``REAL_QID``, until the schedule service delivers it (``delayed``,
  ``due``);
* a transaction's half message waits in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 the same way
  until its producer commits it (``to_half``, ``committed``), is re-put with
  ``TRANSACTION_CHECK_TIMES`` at each check-back (``checked``) and discarded to
  ``TRANS_CHECK_MAX_TIME_TOPIC`` after the last (``discarded``);
* a message a consumer hands back goes to its group's ``%RETRY%`` topic with a delay, or to
  its ``%DLQ%`` topic past the max reconsume times (``sent_back``, ``to_dlq``).

Every rewrite is here, once, used by the send processor, the schedule service and the
transaction service.  Pure: properties in, a new ``Placement`` out; the input is never
changed, and no I/O (the callers look records up, create topics and put messages).

The properties a consumer receives are Apache RocketMQ 4.9.8's (read from its
SendMessageProcessor, CommitLog.asyncPutMessage, ScheduleMessageService.messageTimeup,
TransactionalMessageBridge, EndTransactionProcessor and TransactionalMessageServiceImpl).
RocketMQ builds the stored properties string at one point of each path and changes the
message's property map after it, so what a consumer sees is what the map held then:

* a delayed message is delivered with ``DELAY``, ``REAL_TOPIC``, ``REAL_QID`` and the
  ``WAIT`` its producer sent (the send drops ``WAIT`` only where it does not rebuild the
  string: a plain send);
* a message handed back carries ``RETRY_TOPIC``, ``WAIT=false``, ``DELAY`` (``0`` in the
  DLQ) and ``ORIGIN_MESSAGE_ID``, the offset message id of the first message (store host
  and CommitLog offset), and ``REAL_TOPIC=%RETRY%group``/``REAL_QID`` from its delay;
* a committed message keeps what its half message held: ``TRAN_MSG=true``, ``REAL_TOPIC``,
  ``REAL_QID``, ``WAIT``, and ``TRANSACTION_CHECK_TIMES`` once it was checked back.

The order of the properties is insertion order here; RocketMQ writes its HashMap's order,
which no client depends on (every client reads them into a map).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from apogee.common import constants as c
from apogee.common.message import MessageExt

_DELAYABLE = (c.TRANSACTION_NOT_TYPE, c.TRANSACTION_COMMIT_TYPE)
_HALF_TYPES = (c.TRANSACTION_NOT_TYPE, c.TRANSACTION_PREPARED_TYPE)
HALF_QUEUE = 0
"""The one queue of the half topic (RocketMQ's TransactionalMessageUtil)."""


class Placement(NamedTuple):
    """Where a message is stored (topic, queue) and what the rewrites decide about it: its
    properties and the transaction type in its sysflag."""

    topic: str
    queue_id: int
    properties: Mapping[str, str]
    sysflag: int

    @classmethod
    def of(cls, message: MessageExt) -> Placement:
        """Where a stored message is, as the rewrites see it."""
        return cls(message.topic, message.queue_id, message.properties, message.sys_flag)


# --- sends --------------------------------------------------------------------------------------


def is_half(properties: Mapping[str, str], sysflag: int) -> bool:
    """A send that is a transaction's half message: ``TRAN_MSG=true`` and a prepared (or no)
    transaction type."""
    return properties.get(c.TRAN_MSG) == "true" and c.transaction_type(sysflag) in _HALF_TYPES


def received(sent: Placement, *, cluster: str, half: bool, max_delay_level: int) -> Placement:
    """A sent message as the broker stores it: ``CLUSTER`` added; a half message into the
    half topic (its delay waits for the commit), a delayed one into the schedule topic, both
    with their ``WAIT``; a plain one without ``WAIT``."""
    props = dict(sent.properties)  # the one copy: this is the full send path
    props[c.CLUSTER] = cluster
    if half:
        return _into_half(sent, props)
    placed = Placement(sent.topic, sent.queue_id, props, sent.sysflag)
    if c.DELAY in props:
        scheduled = delayed(placed, max_delay_level)
        if scheduled is not placed:
            return scheduled
    props.pop(c.WAIT, None)  # RocketMQ drops it where it does not rebuild the properties later
    return placed


# --- delay levels -------------------------------------------------------------------------------


def delay_level(properties: Mapping[str, str]) -> int:
    """The ``DELAY`` level asked for; 0 when there is none or it is not a number."""
    text = properties.get(c.DELAY)
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


def delayed(placed: Placement, max_delay_level: int) -> Placement:
    """Into the schedule topic when the message asks for a delay (a level above the highest
    is the highest) and is not part of an undecided transaction; else unchanged (the same
    object)."""
    level = delay_level(placed.properties)
    if level <= 0 or c.transaction_type(placed.sysflag) not in _DELAYABLE:
        return placed
    level = min(level, max_delay_level)
    props = dict(placed.properties)
    props[c.DELAY] = str(level)
    props[c.REAL_TOPIC] = placed.topic
    props[c.REAL_QID] = str(placed.queue_id)
    return Placement(c.SCHEDULE_TOPIC, level - 1, props, placed.sysflag)


def due(scheduled: Placement) -> Placement | None:
    """A delayed message, due: back to its real topic and queue with every property it
    waited with (``DELAY``, ``REAL_TOPIC``, ``REAL_QID`` included).  None when it does not
    say where to go."""
    real = _real(scheduled.properties)
    if real is None:
        return None
    return Placement(real[0], real[1], dict(scheduled.properties), scheduled.sysflag)


def _real(props: Mapping[str, str]) -> tuple[str, int] | None:
    """``REAL_TOPIC`` and ``REAL_QID``, when both are there and the queue is a number."""
    topic = props.get(c.REAL_TOPIC)
    queue = props.get(c.REAL_QID)
    if not topic or queue is None:
        return None
    try:
        return topic, int(queue)
    except ValueError:
        return None


# --- transactions -------------------------------------------------------------------------------


def to_half(sent: Placement) -> Placement:
    """A half message: into queue 0 of the half topic, its destination kept, no transaction
    type (so nothing treats it as decided)."""
    return _into_half(sent, dict(sent.properties))


def _into_half(sent: Placement, props: dict[str, str]) -> Placement:
    """``to_half`` with ``props``, the caller's copy of the sent properties, changed in place."""
    props[c.REAL_TOPIC] = sent.topic
    props[c.REAL_QID] = str(sent.queue_id)
    sysflag = c.reset_transaction_type(sent.sysflag, c.TRANSACTION_NOT_TYPE)
    return Placement(c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE, props, sysflag)


def committed(half: Placement, max_delay_level: int) -> Placement | None:
    """A committed half message: to its real topic and queue with the COMMIT type and every
    property of the half (``TRAN_MSG``, ``REAL_TOPIC``, ``REAL_QID``, ``WAIT``,
    ``TRANSACTION_CHECK_TIMES``).  One that asks for a delay goes to the schedule topic
    instead, without ``TRAN_MSG`` and with its ``REAL_TOPIC``/``REAL_QID`` written anew (as
    RocketMQ's CommitLog sees the message's map after EndTransactionProcessor cleared them).
    None when it does not say where to go."""
    real = _real(half.properties)
    if real is None:
        return None
    sysflag = c.reset_transaction_type(half.sysflag, c.TRANSACTION_COMMIT_TYPE)
    if delay_level(half.properties) <= 0:
        return Placement(real[0], real[1], dict(half.properties), sysflag)
    props = dict(half.properties)
    for name in (c.REAL_TOPIC, c.REAL_QID, c.TRAN_MSG):
        props.pop(name, None)
    return delayed(Placement(real[0], real[1], props, sysflag), max_delay_level)


def check_times(half: Placement) -> int:
    """How many times the half message was checked back already (a count that is not a
    number counts as none: one bad half must not stop the checks of all the others)."""
    try:
        return max(0, int(half.properties.get(c.TRANSACTION_CHECK_TIMES) or 0))
    except ValueError:
        return 0


def checked(half: Placement, times: int) -> Placement:
    """The copy of a half message put back at the end of the half queue when it is checked
    back for the ``times``-th time."""
    props = dict(half.properties)
    props[c.TRANSACTION_CHECK_TIMES] = str(times)
    return Placement(c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE, props, half.sysflag)


def discarded(half: Placement) -> Placement:
    """A half message checked back too many times, set aside."""
    return Placement(c.TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(half.properties), half.sysflag)


# --- retry and dead letters ---------------------------------------------------------------------


def to_dlq(reconsume_times: int, max_reconsume_times: int, delay_level: int) -> bool:
    """Whether a message handed back goes to the dead letter queue: it was consumed the max
    times already, or the consumer asks for it (a negative delay level)."""
    return reconsume_times >= max_reconsume_times or delay_level < 0


def sent_back(
    original: Placement,
    *,
    group: str,
    dlq: bool,
    queue_id: int,
    delay_level: int,
    reconsume_times: int,
    origin_msg_id: str,
    max_delay_level: int,
) -> Placement:
    """A message a consumer of ``group`` hands back (``reconsume_times``: how often it was
    consumed before): into the group's DLQ with ``DELAY=0``, or its retry topic after a
    delay (level 0: 3 + reconsume times), with ``WAIT=false``.  The first topic it was sent
    to stays in ``RETRY_TOPIC``; ``ORIGIN_MESSAGE_ID`` keeps the first message's
    ``origin_msg_id`` (its offset message id) across every retry."""
    props = dict(original.properties)
    props.setdefault(c.RETRY_TOPIC, original.topic)
    props[c.WAIT] = "false"
    if dlq:
        topic = c.dlq_topic(group)
        props[c.DELAY] = "0"
    else:
        topic = c.retry_topic(group)
        props[c.DELAY] = str(delay_level or 3 + reconsume_times)
    if not (props.get(c.ORIGIN_MESSAGE_ID) or "").strip():
        props[c.ORIGIN_MESSAGE_ID] = origin_msg_id
    return delayed(Placement(topic, queue_id, props, original.sysflag), max_delay_level)
