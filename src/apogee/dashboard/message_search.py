"""What the message pages find and show, over ``AdminClient`` (no request of its own).

* searches by key (12 on every broker of the topic), by id (a unique id: 12 by UNIQ_KEY; an
  offset id: 33 to the broker it names) and by topic and time range (29 then 11 per queue, a
  job with progress: ``AdminClient.messages_in_range``);
* a message's detail: its properties, its body as text, pretty JSON and hex, its trace when
  the trace topic holds one, and each consuming group's track (RocketMQ's
  ``messageTrackDetail``: consumed or not, from the group's offsets);
* a group's dead letters (the newest of ``%DLQ%<group>``), sent again to ``%RETRY%<group>``.

Rows are plain values (``MessageRow``), so a search job's result is JSON for ``/jobs/{id}``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from apogee.admin import AdminClient, FoundMessage
from apogee.admin.errors import GroupNotFoundError, TopicNotFoundError
from apogee.admin.tracks import MessageTrack
from apogee.client.trace import MessageTrace
from apogee.common import constants as c
from apogee.common.message import MessageExt
from apogee.dashboard.errors import BadInput, Problem, attempt, describe
from apogee.errors import ApogeeError

HEX_MAX = 64 * 1024  # bytes of a body shown in hex
TEXT_MAX = 1024 * 1024  # bytes of a body shown as text or JSON
DLQ_SHOWN = 100  # dead letters listed by default


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A message in a result table."""

    msg_id: str  # the client's unique id (UNIQ_KEY), else the offset id
    offset_msg_id: str  # store host + CommitLog offset: what the detail page opens
    topic: str
    tags: str
    keys: str
    store_ms: int
    born_host: str
    broker_name: str
    queue_id: int
    queue_offset: int
    body_size: int
    reconsume_times: int
    first_topic: str  # RETRY_TOPIC: where a retried or dead letter was first sent ("" if none)

    @classmethod
    def of(cls, msg: MessageExt, broker_name: str) -> MessageRow:
        return cls(
            msg.msg_id, msg.offset_msg_id, msg.topic, msg.tags or "", " ".join(msg.keys), msg.store_timestamp,
            f"{msg.born_host[0]}:{msg.born_host[1]}", broker_name, msg.queue_id, msg.queue_offset, len(msg.body),
            msg.reconsume_times, msg.properties.get(c.RETRY_TOPIC, ""),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def rows_of(found: list[FoundMessage]) -> list[MessageRow]:
    return [MessageRow.of(f.message, f.broker_name) for f in found]


@dataclass(frozen=True, slots=True)
class BodyViews:
    """A body as the three views of the detail page."""

    size: int
    text: str
    json: str | None  # None: not JSON
    hex: str
    truncated_text: bool
    truncated_hex: bool


def body_views(body: bytes) -> BodyViews:
    head = body[:TEXT_MAX]
    text = head.decode("utf-8", errors="replace")
    pretty = None
    with contextlib.suppress(orjson.JSONDecodeError):
        pretty = orjson.dumps(orjson.loads(head), option=orjson.OPT_INDENT_2).decode()
    return BodyViews(len(body), text, pretty, hexdump(body[:HEX_MAX]), len(body) > TEXT_MAX, len(body) > HEX_MAX)


def hexdump(data: bytes) -> str:
    """Offset, 16 bytes in hex, and the printable ASCII of each line."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at:at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


@dataclass
class MessageDetail:
    row: MessageRow
    properties: dict[str, str]
    body: BodyViews
    tracks: list[MessageTrack] | None
    trace: MessageTrace | None
    consumers: list[tuple[str, str]] = field(default_factory=list)  # (group, client id) a resend can go to
    problems: list[Problem] = field(default_factory=list)


def owning_group(topic: str) -> str | None:
    """The group of a retry or DLQ topic."""
    for prefix in (c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return None


async def message_detail(admin: AdminClient, offset_msg_id: str) -> MessageDetail:
    """Everything the detail page shows of the message at ``offset_msg_id`` (33)."""
    try:
        msg = await admin.view_message(offset_msg_id)
    except ValueError as exc:  # not an offset id: nothing was asked
        raise BadInput(f"{offset_msg_id!r} is not an offset message id ({exc})") from None
    view = await admin.cluster_info()
    broker = view.name_of(f"{msg.store_host[0]}:{msg.store_host[1]}") or ""
    problems: list[Problem] = []
    tracks = await attempt(problems, "consume status per group", admin.message_tracks(msg))
    trace = None
    try:
        found = await admin.message_trace(msg.msg_id)
        trace = None if found.empty else found
    except TopicNotFoundError:
        pass  # no trace topic: nobody traces
    except ApogeeError as exc:
        problems.append(describe(exc, "trace"))
    groups = [t.group for t in tracks or [] if t.track_type.name != "NOT_ONLINE"]
    own = owning_group(msg.topic)
    if own is not None and own not in groups:
        groups.append(own)
    consumers = await _consumers(admin, groups)
    return MessageDetail(MessageRow.of(msg, broker), dict(msg.properties), body_views(msg.body), tracks, trace,
                         consumers, problems)


async def _consumers(admin: AdminClient, groups: list[str]) -> list[tuple[str, str]]:
    """(group, client id) of every live consumer of ``groups`` (203 each)."""

    async def one(group: str) -> list[tuple[str, str]]:
        try:
            conns = await admin.consumer_connection(group)
        except (GroupNotFoundError, ApogeeError):
            return []
        return [(group, str(cl.get("clientId", ""))) for cl in conns.clients]

    return sorted(pair for part in await asyncio.gather(*(one(g) for g in groups)) for pair in part)


async def dead_letters(admin: AdminClient, group: str, limit: int = DLQ_SHOWN) -> tuple[list[MessageRow], int]:
    """The newest ``limit`` messages of ``%DLQ%<group>``, newest first, and how many it holds
    (none when the group has no DLQ topic yet)."""
    topic = c.dlq_topic(group)
    try:
        queues = await admin.topic_queues(topic)
    except TopicNotFoundError:
        return [], 0
    found: list[FoundMessage] = []
    total = 0
    for mq, addr in queues.items():
        low, high = await admin.queue_bounds(addr, mq)
        total += max(0, high - low)
        async for m in admin.read_queue(mq, max(low, high - limit), high):
            found.append(FoundMessage(m, mq.broker_name))
    found.sort(key=lambda f: (f.message.store_timestamp, f.message.queue_offset), reverse=True)
    return rows_of(found[:limit]), total


async def dlq_groups(admin: AdminClient) -> list[str]:
    """The groups that have a DLQ topic (from the NameServer's topic list)."""
    return sorted(t[len(c.DLQ_GROUP_TOPIC_PREFIX):] for t in await admin.topic_list()
                  if t.startswith(c.DLQ_GROUP_TOPIC_PREFIX))
