"""Permissions of RocketMQ ACL 1.0, and which resources each request touches.

(RocketMQ's ``Permission`` and ``PlainAccessValidator.parse``.)  A resource is a topic, or a
consumer group written as its retry topic ``%RETRY%<group>``; a request needs PUB or SUB on
each resource it touches.  An account owns, per resource, DENY, PUB, SUB or PUB|SUB, and
defaults for the topics and groups it does not name; DENY always loses.

Which resources a request touches, by request code (everything else touches none, so any
known account with a valid signature may send it, as in RocketMQ):

===============================  ==============================================================
SEND_MESSAGE (10)                PUB on ``topic``; a retry topic: SUB on ``%RETRY%<group>``
SEND_MESSAGE_V2 (310),           PUB on ``b``; a retry topic: SUB on ``%RETRY%<a>``
SEND_BATCH_MESSAGE (320)         (320 as RocketMQ 5.1 checks it; 4.9.8 left batches unchecked)
CONSUMER_SEND_MSG_BACK (36)      SUB on ``%RETRY%<group>``
PULL_MESSAGE (11)                SUB on ``topic`` and on ``%RETRY%<consumerGroup>``
QUERY_MESSAGE (12)               SUB on ``topic``
HEART_BEAT (34)                  SUB on every consumer group's retry topic and subscribed topic
UNREGISTER_CLIENT (35)           SUB on ``%RETRY%<consumerGroup>``
GET_CONSUMER_LIST_BY_GROUP (38)  SUB on ``%RETRY%<consumerGroup>``
UPDATE_CONSUMER_OFFSET (15)      SUB on ``%RETRY%<consumerGroup>`` and on ``topic``
===============================  ==============================================================

Admin-only codes need ``admin: true``: RocketMQ's five (17, 25, 215, 200, 207) and the codes
Apogee adds because otherwise any account could grant itself anything or destroy data: the
ACL edits 50-53, INVOKE_BROKER_TO_RESET_OFFSET (222), CLEAN_EXPIRED_CONSUMEQUEUE (306),
CLEAN_UNUSED_TOPIC (316) and DELETE_EXPIRED_COMMITLOG (329).  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apogee.common.constants import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRACE_TOPIC
from apogee.remoting.bodies.heartbeat import HeartbeatData
from apogee.remoting.codes import RequestCode as R
from apogee.remoting.command import Body

DENY = 1
ANY = 2
PUB = 4
SUB = 8

PERM_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

ROCKETMQ_ADMIN_CODES = frozenset((
    R.UPDATE_AND_CREATE_TOPIC, R.UPDATE_BROKER_CONFIG, R.DELETE_TOPIC_IN_BROKER,
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, R.DELETE_SUBSCRIPTIONGROUP,
))
APOGEE_ADMIN_CODES = frozenset((
    R.UPDATE_AND_CREATE_ACL_CONFIG, R.DELETE_ACL_CONFIG, R.GET_BROKER_CLUSTER_ACL_INFO,
    R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, R.INVOKE_BROKER_TO_RESET_OFFSET, R.CLEAN_EXPIRED_CONSUMEQUEUE,
    R.CLEAN_UNUSED_TOPIC, R.DELETE_EXPIRED_COMMITLOG,
))
ADMIN_CODES = frozenset(int(c) for c in ROCKETMQ_ADMIN_CODES | APOGEE_ADMIN_CODES)

TRACE_TOPIC = RMQ_SYS_TRACE_TOPIC


class PermSyntaxError(ValueError):
    """A topicPerms/groupPerms entry or a perm name RocketMQ refuses."""


def parse_perm(text: object) -> int:
    """RocketMQ's ``parsePermFromString``: a name, anything else (absent included) DENY."""
    if text is None:
        return DENY
    return PERM_NAMES.get(str(text).strip(), DENY)


def name_of(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return "|".join(n for n, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit) or "DENY"


def check_permission(needed: int, owned: int) -> bool:
    """RocketMQ's ``checkPermission``: DENY owned loses; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def resource_perms(entries: object, *, groups: bool) -> dict[str, int]:
    """``topicPerms``/``groupPerms`` (``["topicA=PUB|SUB", ...]``) -> resource -> perm, groups
    as their retry topics.  An entry not ``name=PERM`` with a known perm is refused (RocketMQ
    refuses the format when reading and the perm when editing; Apogee both times)."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise PermSyntaxError(f"{'groupPerms' if groups else 'topicPerms'} must be a list of 'name=PERM'")
    out: dict[str, int] = {}
    for entry in entries:
        items = [p for p in str(entry).split("=") if p]
        if len(items) != 2:
            raise PermSyntaxError(
                f"Parse resource permission failed for {'group' if groups else 'topic'}:{entry} "
                "(the expected format is 'Res=Perm', e.g. topicA=SUB)"
            )
        name, perm = items[0].strip(), items[1].strip()
        if perm not in PERM_NAMES:
            raise PermSyntaxError(
                f"Parse resource permission error for {entry}: the expected permissions are "
                "'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB' or 'DENY'"
            )
        out[retry_topic(name) if groups else name] = PERM_NAMES[perm]
    return out


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_group(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def describe(resource: str) -> str:
    """RocketMQ's ``printStr``: ``topic:X`` or ``group:G``."""
    if is_group(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


def _add(out: dict[str, int], resource: Any, perm: int) -> None:
    if resource is not None:
        out[str(resource)] = perm


def _send(out: dict[str, int], topic: str | None, group: str | None) -> None:
    if topic is not None and is_group(topic):
        _add(out, retry_topic(group) if group is not None else None, SUB)
    else:
        _add(out, topic, PUB)


def _as_bytes(body: Body) -> bytes | None:
    if body is None or isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    return b"".join(body)


def needed(code: int, ext: Mapping[str, str], body: Body) -> dict[str, int]:
    """The resources ``code`` touches and the perm each needs (see the module's table).

    A field that is absent touches nothing (the processor then refuses the request for its
    header); a heartbeat body that cannot be read raises ``HeaderError``, a refusal."""
    out: dict[str, int] = {}
    get = ext.get
    if code == R.SEND_MESSAGE_V2 or code == R.SEND_BATCH_MESSAGE:
        _send(out, get("b"), get("a"))
    elif code == R.SEND_MESSAGE:
        _send(out, get("topic"), get("group"))
    elif code == R.PULL_MESSAGE:
        _add(out, get("topic"), SUB)
        group = get("consumerGroup")
        _add(out, retry_topic(group) if group is not None else None, SUB)
    elif code == R.UPDATE_CONSUMER_OFFSET:
        group = get("consumerGroup")
        _add(out, retry_topic(group) if group is not None else None, SUB)
        _add(out, get("topic"), SUB)
    elif code == R.CONSUMER_SEND_MSG_BACK:
        group = get("group")
        _add(out, retry_topic(group) if group is not None else None, SUB)
    elif code == R.QUERY_MESSAGE:
        _add(out, get("topic"), SUB)
    elif code == R.UNREGISTER_CLIENT or code == R.GET_CONSUMER_LIST_BY_GROUP:
        group = get("consumerGroup")
        _add(out, retry_topic(group) if group is not None else None, SUB)
    elif code == R.HEART_BEAT:
        for consumer in HeartbeatData.decode(_as_bytes(body)).consumers:
            _add(out, retry_topic(consumer.group_name), SUB)
            for sub in consumer.subscriptions:
                _add(out, sub.topic, SUB)
    return out
