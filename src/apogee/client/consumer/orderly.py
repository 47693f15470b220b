"""Orderly consumption (RocketMQ's ConsumeMessageOrderlyService).

Three locks keep one queue's messages in order across the group:

1. the **broker lock** (LOCK_BATCH_MQ): only the holder consumes a queue in clustering mode.
   It is taken before a queue is accepted in a rebalance, renewed every ``lock_interval_ms``
   and trusted for ``lock_max_live_ms``; a queue whose lock lapsed is not consumed until it
   is locked again;
2. the **queue lock** (process-local, one per queue): one consume loop per queue at a time;
3. the **consume lock** (one per queue): held around each listener call and its offset
   update, so a rebalance hand-off waits for the call in progress, commits, and only then
   releases the broker lock to the next owner.

Results: CONSUME_SUCCESS commits the batch.  SUSPEND_CURRENT_QUEUE_A_MOMENT, RECONSUME_LATER
or an exception put the batch back in front and pause the queue for
``suspend_current_queue_time_ms``; a message that failed ``max_reconsume_times`` times goes to
the DLQ (CONSUMER_SEND_MSG_BACK with delay level -1) so one poison message cannot block its
queue forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from apogee.client.consumer.base import reset_retry_topic
from apogee.client.consumer.concurrently import Listener, is_async_listener, to_result
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.types import ConsumeContext, ConsumeResult, MessageModel
from apogee.common import constants as c
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ApogeeError

if TYPE_CHECKING:
    from apogee.client.consumer.push import PushConsumer

log = logging.getLogger("apogee.client.consumer.orderly")

MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000


class OrderlyConsumeService:
    orderly = True

    def __init__(self, consumer: PushConsumer, listener: Listener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.config = consumer.config
        self.is_async = is_async_listener(listener)
        self.clustering = self.config.message_model is MessageModel.CLUSTERING
        self.queue_locks: dict[MessageQueue, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.consume_locks: dict[MessageQueue, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._executor: object | None = None
        self._lock_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if not self.is_async:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(
                self.config.consume_thread_max, thread_name_prefix=f"apogee-orderly-{self.consumer.group}"
            )
        if self.clustering:
            self._lock_task = asyncio.create_task(self._lock_loop())

    async def shutdown(self) -> None:
        tasks = [*self._tasks, *([self._lock_task] if self._lock_task else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)  # type: ignore[attr-defined]
            self._executor = None

    async def _lock_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.lock_interval_ms / 1000)
            try:
                await self.consumer.lock_all()
            except ApogeeError as exc:
                log.warning("renewing the queue locks of %s failed: %s", self.consumer.group, exc)

    # --- scheduling ---------------------------------------------------------------------------

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        if dispatch:
            self._spawn(pq, mq)

    def _spawn(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if not self.consumer.running:
            return
        task = asyncio.create_task(self._consume(pq, mq))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        self.consumer.schedule(max(delay_ms, 10), self._spawn, pq, mq)

    def _try_lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        async def relock() -> None:
            if pq.dropped:
                return
            if await self.consumer.lock_queue(mq):
                pq.locked = True
                pq.last_lock_ms = int(time.time() * 1000)
                self.submit_later(pq, mq, 10)
            else:
                self.submit_later(pq, mq, 3000)

        def start() -> None:
            task = asyncio.create_task(relock())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self.consumer.schedule(delay_ms, start)

    # --- the consume loop ---------------------------------------------------------------------

    def _may_consume(self, pq: ProcessQueue, now: int) -> bool:
        return not self.clustering or (pq.locked and not pq.is_lock_expired(now, self.config.lock_max_live_ms))

    async def _consume(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            return
        async with self.queue_locks[mq]:
            if not self._may_consume(pq, int(time.time() * 1000)):
                if not pq.dropped:
                    self._try_lock_later(pq, mq, 100)
                return
            began = time.monotonic()
            batch = self.config.consume_message_batch_max_size
            while not pq.dropped:
                now = int(time.time() * 1000)
                if not self._may_consume(pq, now):
                    self._try_lock_later(pq, mq, 10)
                    return
                if (time.monotonic() - began) * 1000 > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                    self.submit_later(pq, mq, 10)
                    return
                msgs = pq.take(batch, now)
                if not msgs:
                    return
                reset_retry_topic(msgs, self.consumer.group)
                async with self.consume_locks[mq]:
                    if pq.dropped:
                        pq.rollback()
                        return
                    ctx = ConsumeContext(mq)
                    status = await self._call(msgs, ctx, mq)
                    counters = self.consumer.stats.topic(mq.topic)
                    counters.consume_rt += int(time.time() * 1000) - now
                    counters.consume_timed += 1
                    keep_going = await self._process_result(status, ctx, msgs, pq, mq)
                if not keep_going:
                    return

    async def _call(self, msgs: list[MessageExt], ctx: ConsumeContext, mq: MessageQueue) -> ConsumeResult:
        hooks = self.consumer.consume_hooks
        began = hooks.before(msgs, mq) if hooks.hooks else None
        result: ConsumeResult | None = None  # None: the listener raised
        try:
            if self.is_async:
                value = await self.listener(msgs, ctx)
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(self._executor, self.listener, msgs, ctx)  # type: ignore[arg-type]
            result = to_result(value)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("orderly listener of %s failed on %d message(s) of %s", self.consumer.group, len(msgs), mq)
        if began is not None:
            hooks.after(began, result)
        if result is None:
            return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if result is ConsumeResult.RECONSUME_LATER:
            return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return result

    async def _process_result(
        self, status: ConsumeResult, ctx: ConsumeContext, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> bool:
        offset = -1
        keep_going = True
        counters = self.consumer.stats.topic(mq.topic)
        if status is ConsumeResult.CONSUME_SUCCESS:
            counters.ok += len(msgs)
            offset = pq.commit()
        else:
            counters.failed += len(msgs)
            if await self._suspend_needed(msgs, mq):
                pq.make_messages_to_consume_again(msgs)
                wait = ctx.suspend_current_queue_time_ms
                self.submit_later(pq, mq, wait if wait > 0 else self.config.suspend_current_queue_time_ms)
                keep_going = False
            else:
                offset = pq.commit()
        store = self.consumer.offset_store
        if offset >= 0 and not pq.released and store is not None:
            store.update_offset(mq, offset, False)
        return keep_going

    async def _suspend_needed(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        """Count one more failure per message; those past the limit go to the DLQ.

        True when the batch must be retried here (some message is under the limit, or its
        move to the DLQ failed).
        """
        suspend = False
        limit = self.config.max_reconsume()
        for msg in msgs:
            if msg.reconsume_times >= limit:
                msg.properties[c.RECONSUME_TIME] = str(msg.reconsume_times)
                if not await self.consumer.send_back(msg, -1, mq.broker_name):
                    suspend = True
                    msg.reconsume_times += 1
                else:
                    log.warning(
                        "%s: message %s of %s failed %d times; moved to the DLQ",
                        self.consumer.group,
                        msg.msg_id,
                        mq,
                        msg.reconsume_times,
                    )
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend
