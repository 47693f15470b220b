"""Where the broker re-routes a message, and what it notes in its properties on the way.

RocketMQ stores some messages somewhere other than where they were sent, and keeps the way
back in their properties:

* a message with ``DELAY=n`` waits in ``SCHEDULE_TOPIC_XXXX`` queue n-1, its topic and queue
  in ``REAL_TOPIC``/``REAL_QID``, until the schedule service delivers it (``delayed``,
  ``due``);
* a transaction's half message waits in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 the same way
  until its producer commits it (``half``, ``committed``), is re-put with
  ``TRANSACTION_CHECK_TIMES`` at each check-back (``checked``) and discarded to
  ``TRANS_CHECK_MAX_TIME_TOPIC`` after the last (``discarded``);
* a message a consumer hands back goes to its group's ``%RETRY%`` topic with a delay, or to
  its ``%DLQ%`` topic past the max reconsume times (``sent_back``, ``to_dlq``).

Every rewrite is here, once, used by the send processor, the schedule service and the
transaction service.  Pure: properties in, a new ``Placement`` out; the input is never
changed, and no I/O (the callers look records up, create topics and put messages).
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
    """A sent message as the broker stores it: ``WAIT`` dropped and ``CLUSTER`` added; a half
    message into the half topic (its delay waits for the commit), else a delayed one into
    the schedule topic."""
    props = dict(sent.properties)  # the one copy: this is the full send path
    placed = _into_half(sent, props) if half else Placement(sent.topic, sent.queue_id, props, sent.sysflag)
    props.pop(c.WAIT, None)
    props[c.CLUSTER] = cluster
    if half or c.DELAY not in props:
        return placed
    return delayed(placed, max_delay_level)


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
    is the highest) and is not part of an undecided transaction; else unchanged."""
    level = delay_level(placed.properties)
    if level <= 0 or c.transaction_type(placed.sysflag) not in _DELAYABLE:
        return placed
    return _to_schedule(placed, level, max_delay_level)


def _to_schedule(placed: Placement, level: int, max_delay_level: int) -> Placement:
    level = min(level, max_delay_level)
    props = dict(placed.properties)
    props[c.DELAY] = str(level)
    props[c.REAL_TOPIC] = placed.topic
    props[c.REAL_QID] = str(placed.queue_id)
    return Placement(c.SCHEDULE_TOPIC, level - 1, props, placed.sysflag)


def due(scheduled: Placement) -> Placement | None:
    """A delayed message, due: back to its real topic and queue.  None when it does not say
    where that is."""
    props = dict(scheduled.properties)
    real = _pop_real(props)
    if real is None:
        return None
    props.pop(c.DELAY, None)
    return Placement(real[0], real[1], props, scheduled.sysflag)


def _pop_real(props: dict[str, str]) -> tuple[str, int] | None:
    topic = props.pop(c.REAL_TOPIC, None)
    queue = props.pop(c.REAL_QID, None)
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
    """A committed half message: to its real topic and queue with the COMMIT type (and from
    there into the schedule topic if it asks for a delay).  None when it does not say where."""
    props = dict(half.properties)
    real = _pop_real(props)
    if real is None:
        return None
    props.pop(c.TRAN_MSG, None)
    props.pop(c.TRANSACTION_CHECK_TIMES, None)
    sysflag = c.reset_transaction_type(half.sysflag, c.TRANSACTION_COMMIT_TYPE)
    return delayed(Placement(real[0], real[1], props, sysflag), max_delay_level)


def check_times(half: Placement) -> int:
    """How many times the half message was checked back already."""
    text = half.properties.get(c.TRANSACTION_CHECK_TIMES, "0") or "0"
    return int(text)


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
    consumed before): into the group's DLQ, or its retry topic after a delay (level 0: 3 +
    reconsume times).  The first topic it was sent to stays in ``RETRY_TOPIC`` and its
    first id in ``ORIGIN_MESSAGE_ID``."""
    props = dict(original.properties)
    if c.RETRY_TOPIC not in props:
        props[c.RETRY_TOPIC] = original.topic
    props.pop(c.WAIT, None)
    if dlq:
        topic = c.dlq_topic(group)
        delay = 0
    else:
        topic = c.retry_topic(group)
        delay = delay_level or 3 + reconsume_times
    if c.ORIGIN_MESSAGE_ID not in props:
        props[c.ORIGIN_MESSAGE_ID] = origin_msg_id
    if delay > 0:
        props[c.DELAY] = str(delay)
    else:
        props.pop(c.DELAY, None)
    placed = Placement(topic, queue_id, props, original.sysflag)
    return _to_schedule(placed, delay, max_delay_level) if delay > 0 else placed
