"""How far behind a consumer group is, in messages and in time, as the dashboard shows it.

RocketMQ Dashboard shows per queue the broker offset, the group's committed offset, their
difference ("diff") and ``lastTimestamp``, the store time of the last message the group
consumed (GET_CONSUME_STATS, 208).  With the store time of the queue's newest message
(``lastUpdateTimestamp`` of GET_TOPIC_STATS_INFO, 202) the lag becomes a time too: how much
older the last consumed message is than the newest one.  A group that never consumed from a
queue has no last consumed time, so its time lag is unknown (None), not zero.

Pure: values in, values out; the sampler and the pages fetch the answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apogee.common import constants as c
from apogee.common.validators import is_system_topic

# RocketMQ's MixAll names of the groups its tools and brokers use for themselves; the
# dashboard lists them only when asked (RocketMQ Dashboard's "SYSTEM" filter).
SYSTEM_GROUPS = frozenset((
    c.TOOLS_CONSUMER_GROUP, "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
))


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(c.CID_RMQ_SYS_PREFIX)


@dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue of one group: offsets, and the store times behind the lag in time."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_consumed_ms: int  # store time of the last message consumed (0: none)
    newest_ms: int  # store time of the queue's newest message (0: unknown or empty)
    client: str = ""  # the client that owns the queue now ("" when none or unknown)

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, 0))

    @property
    def lag_ms(self) -> int | None:
        """How much older the last consumed message is than the newest: 0 when caught up,
        None when it cannot be told (nothing consumed yet, or no newest time)."""
        if self.lag == 0:
            return 0
        if self.last_consumed_ms <= 0 or self.newest_ms <= 0:
            return None
        return max(0, self.newest_ms - self.last_consumed_ms)


def queue_lags(
    offsets: Iterable[tuple[str, str, int, int, int, int]],
    newest: Mapping[tuple[str, str, int], int],
    owners: Mapping[tuple[str, str, int], str] | None = None,
) -> list[QueueLag]:
    """Rows of (topic, broker, queue, broker offset, consumer offset, last consumed time)
    joined with the newest store time and the owning client of each queue, sorted."""
    rows = [
        QueueLag(topic, broker, qid, b_off, c_off, last, newest.get((topic, broker, qid), 0),
                 (owners or {}).get((topic, broker, qid), ""))
        for topic, broker, qid, b_off, c_off, last in offsets
    ]
    rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id))
    return rows


@dataclass(slots=True)
class GroupRow:
    """A row of the consumer group list."""

    group: str
    brokers: list[str] = field(default_factory=list)  # brokers holding its subscription config
    lag: int = 0
    tps: float = 0.0
    topics: set[str] = field(default_factory=set)
    clients: int | None = None  # online consumers (None: not asked, or the answer failed)
    consume_type: str = ""
    message_model: str = ""
    version: str = ""
    retry_max_times: int | None = None

    @property
    def system(self) -> bool:
        return is_system_group(self.group)

    def add_queue(self, topic: str, broker_offset: int, consumer_offset: int) -> None:
        self.topics.add(topic)
        self.lag += max(0, broker_offset - max(consumer_offset, 0))


def top_topics(rates: Mapping[str, float], n: int, always: Iterable[str] = ()) -> list[str]:
    """The topics to chart: those in ``always`` and the ``n`` busiest others (by rate, then
    name), system topics, retry and DLQ topics left out of the busiest."""
    chosen = list(dict.fromkeys(always))
    busy = sorted(
        (t for t, r in rates.items() if r > 0 and t not in chosen and is_user_topic(t)),
        key=lambda t: (-rates[t], t),
    )
    return chosen + busy[:n]


def is_user_topic(topic: str) -> bool:
    """Not a system topic, nor a group's retry or DLQ topic."""
    return not (is_system_topic(topic) or topic.startswith((c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX)))
