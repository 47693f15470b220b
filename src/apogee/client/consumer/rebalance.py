"""Rebalance (RocketMQ's RebalanceImpl): which queues this consumer owns, and the hand-offs.

For each subscribed topic: broadcasting consumers own every readable queue; clustering
consumers ask a broker for the group's client ids, sort queues and ids, and keep what the
allocation strategy gives them.  Then the process-queue table is brought in line:

* a queue no longer ours is dropped and handed back through ``host.remove_queue`` (which
  drains in-flight listeners, commits the final offset and, for orderly consumers, releases
  the broker lock) -- if that cannot finish yet, the queue stays dropped in the table and the
  next rebalance tries again;
* a new queue (locked on the broker first when orderly; skipped if the lock is refused, with
  a quick retry) gets its starting offset from ``host.compute_pull_from_where`` and starts
  pulling through ``host.start_queue``.  An offset that cannot be known now (-1 from the
  host) skips the queue until the next rebalance: the consumer never guesses a start.

Which queues to own is decided by the pure ``allocate`` strategies; this module only drives.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

from apogee.client.consumer.allocate import AllocateStrategy
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.types import MessageModel
from apogee.common.message import MessageQueue
from apogee.errors import ApogeeError

log = logging.getLogger("apogee.client.consumer.rebalance")


class RebalanceHost(Protocol):
    """The consumer behind a ``Rebalancer``."""

    group: str
    client_id: str

    async def consumer_ids(self, topic: str) -> list[str]: ...
    async def topic_queues(self, topic: str) -> set[MessageQueue]: ...
    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...
    async def lock_queue(self, mq: MessageQueue) -> bool: ...
    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...
    def start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None: ...
    def schedule_rebalance(self, delay_ms: int) -> None: ...


def allocate_queues(
    model: MessageModel,
    strategy: AllocateStrategy,
    group: str,
    client_id: str,
    queues: Iterable[MessageQueue],
    client_ids: Iterable[str],
) -> set[MessageQueue]:
    """The queues ``client_id`` owns: all of them when broadcasting, its share when clustering."""
    mq_all = sorted(set(queues))
    if model is MessageModel.BROADCASTING:
        return set(mq_all)
    cid_all = sorted(set(client_ids))
    return set(strategy.allocate(group, client_id, mq_all, cid_all))


class Rebalancer:
    def __init__(
        self,
        host: RebalanceHost,
        model: MessageModel,
        strategy: AllocateStrategy,
        *,
        orderly: bool = False,
        lock_retry_delay_ms: int = 1000,
    ) -> None:
        self.host = host
        self.model = model
        self.strategy = strategy
        self.orderly = orderly
        self.lock_retry_delay_ms = lock_retry_delay_ms
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.rebalance_count = 0
        self.last_changed_ms = 0

    def queues_of(self, topic: str) -> list[MessageQueue]:
        return [mq for mq in self.process_queues if mq.topic == topic]

    async def rebalance(self, topics: Iterable[str]) -> bool:
        """One round over ``topics``; True when the owned queues changed."""
        changed = False
        self.rebalance_count += 1
        wanted_topics = set(topics)
        for topic in sorted(wanted_topics):
            try:
                target = await self._target(topic)
            except ApogeeError as exc:
                log.warning("rebalance of %s/%s skipped: %s", self.host.group, topic, exc)
                continue
            if target is None:
                continue
            if await self._update(topic, target):
                changed = True
        # Topics no longer subscribed: hand their queues back.
        for mq in [q for q in self.process_queues if q.topic not in wanted_topics]:
            changed |= await self._remove(mq)
        if changed:
            self.last_changed_ms = int(time.time() * 1000)
        return changed

    async def _target(self, topic: str) -> set[MessageQueue] | None:
        queues = await self.host.topic_queues(topic)
        if not queues:
            return None
        if self.model is MessageModel.BROADCASTING:
            return set(queues)
        cids = await self.host.consumer_ids(topic)
        if not cids:
            log.warning("rebalance of %s/%s: the broker lists no consumer of the group", self.host.group, topic)
            return None
        if self.host.client_id not in cids:
            log.info("rebalance of %s/%s: this client is not listed yet (heartbeat pending)", self.host.group, topic)
        return allocate_queues(self.model, self.strategy, self.host.group, self.host.client_id, queues, cids)

    async def _remove(self, mq: MessageQueue) -> bool:
        pq = self.process_queues.get(mq)
        if pq is None:
            return False
        pq.dropped = True
        if await self.host.remove_queue(mq, pq):
            del self.process_queues[mq]
            log.info("%s released %s", self.host.group, mq)
            return True
        return False

    async def _update(self, topic: str, target: set[MessageQueue]) -> bool:
        changed = False
        now = int(time.time() * 1000)
        for mq in self.queues_of(topic):
            pq = self.process_queues[mq]
            if mq not in target or pq.dropped:
                changed |= await self._remove(mq)
            elif pq.is_pull_expired(now) and self.model is MessageModel.CLUSTERING and pq.last_pull_ms > 0:
                log.warning("%s: no pull of %s for %d ms; restarting it", self.host.group, mq, now - pq.last_pull_ms)
                changed |= await self._remove(mq)
        lock_refused = False
        for mq in sorted(target):
            if mq in self.process_queues:
                continue
            if self.orderly and self.model is MessageModel.CLUSTERING and not await self.host.lock_queue(mq):
                lock_refused = True
                continue
            offset = await self.host.compute_pull_from_where(mq)
            if offset < 0:
                log.warning(
                    "%s: the start offset of %s is unknown now; retrying at the next rebalance", self.host.group, mq
                )
                continue
            pq = ProcessQueue(now)
            if self.orderly and self.model is MessageModel.CLUSTERING:
                pq.locked = True
                pq.last_lock_ms = now
            self.process_queues[mq] = pq
            self.host.start_queue(mq, pq, offset)
            log.info("%s took %s from offset %d", self.host.group, mq, offset)
            changed = True
        if lock_refused:
            self.host.schedule_rebalance(self.lock_retry_delay_ms)
        return changed

    async def remove_all(self) -> None:
        for mq in list(self.process_queues):
            self.process_queues[mq].dropped = True
        for mq in list(self.process_queues):
            await self._remove(mq)
