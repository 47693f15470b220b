"""How far each consumer group is on each queue: the one reading behind GET_CONSUME_STATS
(208), GET_BROKER_CONSUME_STATS (317) and the consumer figures of ``/metrics``.

RocketMQ's rules (AdminBrokerProcessor.getConsumeStats, and rocketmq-exporter reading it):
the broker offset is the queue's max offset, the consumer offset the committed one (0 when
none); a topic the broker does not know, or one the group's live consumers do not subscribe,
has no progress.  A group "consumes" a topic when it has committed offsets on it or a live
consumer subscribes it (QUERY_TOPIC_CONSUME_BY_WHO).
"""

from __future__ import annotations

from typing import NamedTuple

from apogee.broker.clients import ClientManager
from apogee.broker.offsets import SEPARATOR, ConsumerOffsetManager
from apogee.broker.topics import TopicConfigManager
from apogee.store.message_store import MessageStore


class QueueProgress(NamedTuple):
    queue_id: int
    broker_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        return self.broker_offset - self.consumer_offset


class ConsumeProgress:
    def __init__(
        self, store: MessageStore, topics: TopicConfigManager, offsets: ConsumerOffsetManager, clients: ClientManager
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clients = clients

    def of(self, group: str, topic: str, queues: int) -> list[QueueProgress] | None:
        """Progress of ``group`` on the first ``queues`` queues of ``topic``; None when the topic
        is unknown or the group's live consumers do not subscribe it."""
        if self._topics.get(topic) is None:
            return None
        info = self._clients.consumer_group(group)
        if info is not None and info.subscriptions and topic not in info.subscriptions:
            return None
        store, offsets = self._store, self._offsets
        return [
            QueueProgress(qid, max(0, store.get_max_offset_in_queue(topic, qid)),
                          max(0, offsets.query(group, topic, qid)))
            for qid in range(queues)
        ]

    def pairs(self) -> set[tuple[str, str]]:
        """Every (group, topic) where the group consumes the topic."""
        out = set()
        for key in self._offsets.table:
            topic, _, group = key.partition(SEPARATOR)
            out.add((group, topic))
        for group, info in self._clients.consumers.items():
            out.update((group, topic) for topic in info.subscriptions)
        return out

    def lag_ms(self, topic: str, progress: QueueProgress, now_ms: int) -> int:
        """How old the first message the group has not consumed is (rocketmq-exporter's
        latency by store time): 0 when nothing is left; below the queue's first message (it
        was deleted), the age of the first one there is."""
        if progress.lag <= 0:
            return 0
        offset = max(progress.consumer_offset, self._store.get_min_offset_in_queue(topic, progress.queue_id))
        stored = self._store.get_message_store_timestamp(topic, progress.queue_id, offset)
        return max(0, now_ms - stored) if stored > 0 else 0
