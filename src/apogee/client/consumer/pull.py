"""PullConsumer: the caller chooses the queue and the offset of every pull.

Nothing happens in the background except heartbeats and the periodic persistence of offsets
given to ``update_consume_offset``; the caller drives everything (RocketMQ's
DefaultMQPullConsumer).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from apogee.client.config import ConsumerConfig
from apogee.client.consumer.base import ConsumerBase, build_config
from apogee.client.consumer.offset_store import ReadOffsetType
from apogee.client.consumer.subscription import Subscription, build_subscription
from apogee.client.types import PullResult
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ApogeeError

log = logging.getLogger("apogee.client.consumer.pull")


class PullConsumer(ConsumerBase):
    """Pull explicit queues from explicit offsets.

    >>> async with PullConsumer("group", "127.0.0.1:9876") as consumer:
    ...     for mq in await consumer.fetch_message_queues("TopicTest"):
    ...         result = await consumer.pull(mq, "*", 0, 32)
    """

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(build_config(group, namesrv_addr, config, options))
        self._subs: dict[tuple[str, str], Subscription] = {}

    async def start(self) -> PullConsumer:
        if not self._running:
            await self._start_base()
            log.info("pull consumer %s started as %s", self.group, self.client_id)
        return self

    async def shutdown(self) -> None:
        """Commit the offsets given to ``update_consume_offset`` and unregister."""
        if not self._running:
            return
        assert self.offset_store is not None
        try:
            await self.offset_store.persist_all()
        except ApogeeError as exc:
            log.warning("final offset commit of %s failed: %s", self.group, exc)
        self._running = False
        await self._release_base()

    async def __aenter__(self) -> PullConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _sub(self, topic: str, expression: str) -> Subscription:
        key = (topic, expression)
        sub = self._subs.get(key)
        if sub is None:
            sub = build_subscription(topic, expression, int(time.time() * 1000))
            self._subs[key] = sub
        return sub

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        instance = self._check_running()
        return sorted(await instance.subscribe_info(topic))

    async def pull(
        self,
        mq: MessageQueue,
        expression: str = "*",
        offset: int = 0,
        max_nums: int = 32,
        *,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset``; answers at once."""
        return await self.pull_kernel(mq, self._sub(mq.topic, expression), offset, max_nums, timeout_ms=timeout_ms)

    async def pull_block_if_not_found(
        self, mq: MessageQueue, expression: str = "*", offset: int = 0, max_nums: int = 32, *, suspend_ms: int = 20_000
    ) -> PullResult:
        """Like ``pull``, but the broker holds the request up to ``suspend_ms`` until a message arrives."""
        return await self.pull_kernel(
            mq,
            self._sub(mq.topic, expression),
            offset,
            max_nums,
            suspend_ms=suspend_ms,
            timeout_ms=suspend_ms + self.config.request_timeout_ms,
        )

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as the group's position in ``mq`` (persisted periodically and at shutdown)."""
        assert self.offset_store is not None
        self.offset_store.update_offset(mq, offset, False)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's committed offset of ``mq`` (-1 when it has none)."""
        self._check_running()
        assert self.offset_store is not None
        how = ReadOffsetType.STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return await self.offset_store.read_offset(mq, how)

    async def commit(self) -> None:
        """Persist the offsets given to ``update_consume_offset`` now."""
        self._check_running()
        assert self.offset_store is not None
        await self.offset_store.persist_all()

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None) -> bool:
        """Hand a message to the group's retry topic (or the DLQ with ``delay_level=-1``)."""
        return await self.send_back(msg, delay_level, broker_name or "")
