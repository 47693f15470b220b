"""Has each consumer group consumed a message?  RocketMQ's ``messageTrackDetail``
(DefaultMQAdminExtImpl, 4.9.8), which mqadmin queryMsgById and the dashboard's message
detail show as one "track" per group.

For every group consuming the message's topic (QUERY_TOPIC_CONSUME_BY_WHO, 300): no live
consumer (203 answers CONSUMER_NOT_ONLINE) is ``NOT_ONLINE``; a pull consumer
(CONSUME_ACTIVELY) is ``PULL``, its progress being its own; a push consumer has consumed the
message when its committed offset on the message's queue (208, on the broker whose master
stored it) is past the message's queue offset: ``CONSUMED``, or ``CONSUMED_BUT_FILTERED`` when
its subscription of the topic names tags the message does not carry; else
``NOT_CONSUME_YET``.  Any other failure is ``UNKNOWN`` with the error.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from apogee.admin.errors import GroupNotFoundError
from apogee.admin.groups import GroupAdmin
from apogee.admin.messages import MessageAdmin
from apogee.common import constants as c
from apogee.common.message import MessageExt
from apogee.errors import ApogeeError

CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # ConsumeType of pull consumers


class TrackType(Enum):
    """RocketMQ 4.9's ``TrackType``."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class MessageTrack:
    group: str
    track_type: TrackType
    detail: str = ""  # why, when the type is NOT_ONLINE or UNKNOWN


def push_track(consumed: bool, subscribed_tags: Collection[str] | None, message_tags: str | None) -> TrackType:
    """A push consumer's track: ``subscribed_tags`` is its subscription's tag set on the
    message's topic (None: it does not subscribe the topic; empty or ``*``: every tag)."""
    if not consumed:
        return TrackType.NOT_CONSUME_YET
    if subscribed_tags and "*" not in subscribed_tags and message_tags not in subscribed_tags:
        return TrackType.CONSUMED_BUT_FILTERED
    return TrackType.CONSUMED


class TrackAdmin(MessageAdmin, GroupAdmin):
    async def message_tracks(self, msg: MessageExt) -> list[MessageTrack]:
        """One track per group that consumes ``msg``'s topic (see the module docstring)."""
        out = []
        for group in await self.consumed_by(msg.topic):
            try:
                conns = await self.consumer_connection(group)
            except GroupNotFoundError as exc:
                out.append(MessageTrack(group, TrackType.NOT_ONLINE, str(exc)))
                continue
            except ApogeeError as exc:
                out.append(MessageTrack(group, TrackType.UNKNOWN, str(exc)))
                continue
            if conns.consume_type == CONSUME_ACTIVELY:
                out.append(MessageTrack(group, TrackType.PULL))
                continue
            try:
                consumed = await self._consumed(msg, group)
            except ApogeeError as exc:
                out.append(MessageTrack(group, TrackType.UNKNOWN, str(exc)))
                continue
            out.append(MessageTrack(group, push_track(consumed, conns.tag_sets.get(msg.topic), msg.tags)))
        return out

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        """Whether ``group``'s committed offset on the queue that holds ``msg`` is past it."""
        stats = await self.consume_stats(group)
        view = await self.cluster_info()
        stored_at = f"{msg.store_host[0]}:{msg.store_host[1]}"
        for queue, wrapper in stats.offset_table.items():
            if queue.topic != msg.topic or queue.queue_id != msg.queue_id:
                continue
            data = view.brokers.get(queue.broker_name)
            if data is not None and data.broker_addrs.get(c.MASTER_ID) == stored_at:
                return wrapper.consumer_offset > msg.queue_offset
        return False
