"""PushConsumer: subscribe, register a listener, and messages arrive.

Under the hood it pulls (as RocketMQ's DefaultMQPushConsumer): one long-polling pull loop per
owned queue feeds a ProcessQueue; a consume service (concurrent or orderly) calls the
listener; offsets are committed with every pull and persisted every
``persist_consumer_offset_interval_ms``; rebalance decides which queues are owned.

Flow control per queue (pulling pauses, consumption continues): more than
``pull_threshold_for_queue`` cached messages or ``pull_threshold_size_for_queue_mib`` MiB,
or -- concurrent listeners only -- cached offsets spanning more than
``consume_concurrently_max_span``.

Graceful ``shutdown()``: stop pulling, let running listener calls finish (up to
``drain_timeout_ms``), commit offsets, release orderly locks, unregister from the brokers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from apogee.client.config import ConsumerConfig
from apogee.client.consumer.base import ConsumerBase, build_config
from apogee.client.consumer.concurrently import ConcurrentConsumeService, Listener, is_async_listener
from apogee.client.consumer.orderly import OrderlyConsumeService
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.rebalance import Rebalancer
from apogee.client.consumer.running_info import consume_directly
from apogee.client.consumer.subscription import build_subscription
from apogee.client.types import MessageModel, PullStatus
from apogee.common import constants as c
from apogee.common.aio import within
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ApogeeError, ClientStateError, ConnectionClosedError
from apogee.remoting.bodies.consumer_info import ConsumeMessageDirectlyResult

log = logging.getLogger("apogee.client.consumer.push")
_FOUND = PullStatus.FOUND  # read per pull (an Enum class attribute read is slow: docs/architecture.md)

MIB = 1024 * 1024


class PushConsumer(ConsumerBase):
    """A push consumer.

    ``listener(msgs, context)`` is a function (run on a worker thread pool) or an ``async
    def`` (run on the event loop); it returns a ``ConsumeResult`` (``None`` means success;
    an exception means RECONSUME_LATER).  With ``orderly=True`` messages of one queue are
    delivered one batch at a time, in queue order.

    >>> consumer = PushConsumer("group", "127.0.0.1:9876", listener=handle)
    >>> consumer.subscribe("TopicTest", "TagA || TagB")
    >>> await consumer.start()
    """

    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        listener: Listener | None = None,
        orderly: bool = False,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(build_config(group, namesrv_addr, config, options))
        self.listener = listener
        self.orderly = orderly
        self.service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.pulled_messages = 0

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        """Set the listener (before ``start``)."""
        if self._running:
            raise ClientStateError("register the listener before start()")
        self.listener = listener
        self.orderly = orderly

    @property
    def running(self) -> bool:
        return self._running

    async def consume_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: ``msg`` through this consumer's listener, nothing committed."""
        if self.listener is None:
            raise ClientStateError("no listener registered")
        service = self.service
        is_async = service.is_async if service is not None else is_async_listener(self.listener)
        return await consume_directly(self, self.listener, is_async, msg, broker_name)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> PushConsumer:
        if self._running:
            return self
        if self.listener is None:
            raise ClientStateError("register a listener before starting the consumer")
        if not self.subscriptions:
            raise ClientStateError("subscribe to at least one topic before starting the consumer")
        if self.config.message_model is MessageModel.CLUSTERING:
            retry = c.retry_topic(self.group)
            if retry not in self.subscriptions:
                self.subscriptions[retry] = build_subscription(retry, "*", int(time.time() * 1000))
        service_cls = OrderlyConsumeService if self.orderly else ConcurrentConsumeService
        self.service = service_cls(self, self.listener)
        self.rebalancer = Rebalancer(
            self,
            self.config.message_model,
            self.config.allocate_strategy,
            orderly=self.orderly,
            lock_retry_delay_ms=self.config.lock_retry_delay_ms,
        )
        await self._start_base()
        await self._start_tracing()
        self.service.start()
        self._start_rebalance()
        log.info(
            "push consumer %s started as %s (%s, %s)",
            self.group,
            self.client_id,
            self.config.message_model.value,
            "orderly" if self.orderly else "concurrently",
        )
        return self

    async def shutdown(self) -> None:
        """Stop pulling, finish in-flight listeners, commit offsets, unlock, unregister."""
        if not self._running:
            return
        await self._stop_rebalance()
        assert self.rebalancer is not None and self.service is not None and self.offset_store is not None
        pqs = dict(self.rebalancer.process_queues)
        for pq in pqs.values():
            pq.dropped = True
        tasks = list(self._pull_tasks.values())
        self._pull_tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._drain(pqs.values())
        try:
            await self.offset_store.persist_all(list(pqs))
        except ApogeeError as exc:
            log.warning("final offset commit of %s failed: %s", self.group, exc)
        for pq in pqs.values():
            pq.released = True
        if self.orderly and self.config.message_model is MessageModel.CLUSTERING:
            await self._unlock_all(list(pqs))
        self._running = False
        await self.service.shutdown()
        await self._release_base()
        log.info("push consumer %s shut down", self.group)

    async def __aenter__(self) -> PushConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _drain(self, pqs: Any) -> None:
        deadline = time.monotonic() + self.config.drain_timeout_ms / 1000
        pqs = list(pqs)
        while any(pq.running_batches for pq in pqs) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    # --- rebalance host -----------------------------------------------------------------------

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        # Record the start at once: a queue that stays empty until shutdown must still resume
        # here after a restart instead of at consume-from-where again (and skip what came in).
        assert self.offset_store is not None
        self.offset_store.update_offset(mq, offset, True)
        old = self._pull_tasks.pop(mq, None)
        if old is not None:
            old.cancel()
        self._pull_tasks[mq] = asyncio.create_task(self._pull_loop(mq, pq, offset))

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Hand ``mq`` back: stop pulling, drain, commit its offset, unlock it (orderly)."""
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        assert self.offset_store is not None
        if self.orderly and self.config.message_model is MessageModel.CLUSTERING:
            assert isinstance(self.service, OrderlyConsumeService)
            lock = self.service.consume_locks[mq]
            try:
                await within(lock.acquire(), self.config.drain_timeout_ms / 1000)
            except TimeoutError:
                pq.try_unlock_times += 1
                log.warning("%s: %s is still consuming; it is released at a later rebalance", self.group, mq)
                return False
            try:
                await self._commit_final(mq, pq)
                await self._unlock([mq])
            finally:
                lock.release()
            return True
        await self._drain([pq])
        await self._commit_final(mq, pq)
        return True

    async def _commit_final(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        assert self.offset_store is not None
        if self.config.message_model is MessageModel.CLUSTERING:
            try:
                await self.offset_store.persist(mq)
            except ApogeeError as exc:
                log.warning("%s: committing the offset of %s on hand-off failed: %s", self.group, mq, exc)
        pq.released = True
        if self.config.message_model is MessageModel.CLUSTERING:
            self.offset_store.remove_offset(mq)

    async def lock_queue(self, mq: MessageQueue) -> bool:
        if not self.orderly or self.config.message_model is not MessageModel.CLUSTERING:
            return True
        instance = self._check_running()
        try:
            addr = await instance.find_master_addr(mq.broker_name, mq.topic)
            locked = await instance.api.lock_batch_mq(addr, self.group, self.client_id, [mq], timeout_ms=1000)
        except ApogeeError as exc:
            log.warning("locking %s for %s failed: %s", mq, self.group, exc)
            return False
        return mq in locked

    async def lock_all(self) -> None:
        """Renew the broker locks of every owned queue (orderly, clustering)."""
        if self.rebalancer is None:
            return
        instance = self._check_running()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq, pq in self.rebalancer.process_queues.items():
            if not pq.dropped:
                by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            addr = instance.master_addr(broker)
            if addr is None:
                continue
            try:
                locked = await instance.api.lock_batch_mq(addr, self.group, self.client_id, mqs, timeout_ms=1000)
            except ApogeeError as exc:
                log.warning("renewing locks on %s failed: %s", broker, exc)
                continue
            now = int(time.time() * 1000)
            for mq in mqs:
                held = self.rebalancer.process_queues.get(mq)
                if held is None:
                    continue
                pq = held
                if mq in locked:
                    was_locked = pq.locked
                    pq.locked = True
                    pq.last_lock_ms = now
                    if not was_locked:
                        log.info("%s: lock of %s regained", self.group, mq)
                else:
                    if pq.locked:
                        log.warning("%s: the broker refused the lock of %s; pausing it", self.group, mq)
                    pq.locked = False

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        instance = self._check_running()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, queues in by_broker.items():
            addr = instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await instance.api.unlock_batch_mq(addr, self.group, self.client_id, queues)
            except ApogeeError as exc:
                log.warning("unlocking %s failed: %s", queues, exc)

    async def _unlock_all(self, mqs: list[MessageQueue]) -> None:
        await self._unlock(mqs)

    # --- the pull loop ------------------------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        cfg = self.config
        store = self.offset_store
        service = self.service
        assert store is not None and service is not None
        clustering = cfg.message_model is MessageModel.CLUSTERING
        threshold_count = cfg.pull_threshold_for_queue
        threshold_size = cfg.pull_threshold_size_for_queue_mib * MIB
        next_offset = offset
        flow_logged = 0
        while not pq.dropped:
            pq.last_pull_ms = int(time.time() * 1000)
            if (
                pq.msg_count > threshold_count
                or pq.msg_size > threshold_size
                or (not self.orderly and pq.max_span() > cfg.consume_concurrently_max_span)
            ):
                flow_logged += 1
                if flow_logged % 1000 == 1:
                    log.info(
                        "%s: flow control on %s (%d msgs, %d MiB cached, span %d)",
                        self.group,
                        mq,
                        pq.msg_count,
                        pq.msg_size // MIB,
                        pq.max_span(),
                    )
                await asyncio.sleep(cfg.pull_flow_control_delay_ms / 1000)
                continue
            if self.orderly and clustering and not pq.locked:
                await asyncio.sleep(cfg.pull_retry_delay_ms / 1000)
                continue
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                await asyncio.sleep(cfg.pull_retry_delay_ms / 1000)
                continue
            commit = store.memory_offset(mq) if clustering else -1
            try:
                result = await self.pull_kernel(
                    mq,
                    sub,
                    next_offset,
                    cfg.pull_batch_size,
                    suspend_ms=cfg.broker_suspend_max_time_ms,
                    commit_offset=commit,
                )
            except asyncio.CancelledError:
                raise
            except ApogeeError as exc:
                if pq.dropped:
                    return
                if isinstance(exc, ConnectionClosedError) and self.instance is not None:
                    self.instance.refresh_routes_soon()  # the broker may be gone: ask the NameServer again
                log.warning(
                    "pull of %s from %d failed: %s; retrying in %d ms", mq, next_offset, exc, cfg.pull_retry_delay_ms
                )
                await asyncio.sleep(cfg.pull_retry_delay_ms / 1000)
                continue
            if pq.dropped:
                return
            status = result.status
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "pull %s from %d: %s next %d (%d msgs)",
                    mq,
                    next_offset,
                    status.name,
                    result.next_begin_offset,
                    len(result.messages),
                )
            if status is _FOUND:
                next_offset = result.next_begin_offset
                msgs = result.messages
                if msgs:
                    self.pulled_messages += len(msgs)
                    self.stats.pulled(mq.topic, len(msgs), int(time.time() * 1000) - pq.last_pull_ms)
                    dispatch = pq.put(msgs)
                    service.submit(msgs, pq, mq, dispatch)
                    # Deliver before asking for more: the worker woken by submit runs ahead
                    # of the next pull's encode and write (~100 us in situ, measured in W4).
                    await asyncio.sleep(0)
                elif pq.msg_count == 0:
                    store.update_offset(mq, next_offset, True)
                if cfg.pull_interval_ms > 0:
                    await asyncio.sleep(cfg.pull_interval_ms / 1000)
            elif status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
                next_offset = result.next_begin_offset
                if pq.msg_count == 0:
                    store.update_offset(mq, next_offset, True)
            else:  # OFFSET_ILLEGAL: follow the broker, loudly
                log.warning(
                    "%s: offset %d of %s is illegal (queue holds %d..%d); continuing from %d as the broker says",
                    self.group,
                    next_offset,
                    mq,
                    result.min_offset,
                    result.max_offset,
                    result.next_begin_offset,
                )
                next_offset = result.next_begin_offset
                store.update_offset(mq, next_offset, False)
                try:
                    await store.persist(mq)
                except ApogeeError as exc:
                    log.warning("committing the corrected offset of %s failed: %s", mq, exc)
