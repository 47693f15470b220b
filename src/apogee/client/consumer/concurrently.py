"""Concurrent consumption (RocketMQ's ConsumeMessageConcurrentlyService).

Pulled messages are cut into batches of ``consume_message_batch_max_size`` and queued for
``consume_thread_max`` workers.  A worker calls the listener -- a plain function on a thread
pool, an ``async def`` on the event loop -- and applies the result:

* CONSUME_SUCCESS (or ``None``): the messages up to ``context.ack_index`` are done;
* RECONSUME_LATER (or an exception): each remaining message is sent back to the broker,
  which redelivers it through ``%RETRY%<group>`` after a delay (or moves it to the DLQ past
  ``max_reconsume_times``); a message whose send-back fails is retried here after
  ``local_retry_delay_ms`` and keeps its offset uncommitted meanwhile.

Finished messages leave the process queue, and the queue's smallest remaining offset becomes
the group's offset for that queue.  Broadcasting consumers do not retry (RocketMQ's rule).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from apogee.client.consumer.base import reset_retry_topic
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.stats import RT_SAMPLE_EVERY, TopicCounters
from apogee.client.types import ConsumeContext, ConsumeResult, MessageModel
from apogee.common import constants as c
from apogee.common.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from apogee.client.consumer.push import PushConsumer

log = logging.getLogger("apogee.client.consumer.concurrently")

Listener = Callable[[list[MessageExt], ConsumeContext], Any]
_Request = tuple[list[MessageExt], ProcessQueue, MessageQueue]


def is_async_listener(listener: Any) -> bool:
    if inspect.iscoroutinefunction(listener):
        return True
    return callable(listener) and inspect.iscoroutinefunction(type(listener).__call__)


def to_result(value: Any) -> ConsumeResult:
    if value is None:
        return ConsumeResult.CONSUME_SUCCESS
    if isinstance(value, ConsumeResult):
        return value
    raise TypeError(f"a listener must return a ConsumeResult or None, not {value!r}")


class ConcurrentConsumeService:
    orderly = False

    def __init__(self, consumer: PushConsumer, listener: Listener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.config = consumer.config
        self.is_async = is_async_listener(listener)
        self.batch_size = self.config.consume_message_batch_max_size
        self._queue: asyncio.Queue[_Request] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self._cleaner: asyncio.Task[None] | None = None
        self._stats = consumer.stats
        self._calls = 0  # listener calls: one in RT_SAMPLE_EVERY is timed

    def start(self) -> None:
        self._queue = asyncio.Queue()
        if not self.is_async:
            self._executor = ThreadPoolExecutor(
                self.config.consume_thread_max, thread_name_prefix=f"apogee-consume-{self.consumer.group}"
            )
        self._workers = [asyncio.create_task(self._worker()) for _ in range(self.config.consume_thread_max)]
        self._cleaner = asyncio.create_task(self._clean_expired_loop())

    async def shutdown(self) -> None:
        for task in [*self._workers, *([self._cleaner] if self._cleaner else [])]:
            task.cancel()
        await asyncio.gather(*self._workers, *([self._cleaner] if self._cleaner else []), return_exceptions=True)
        self._workers.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        queue = self._queue
        assert queue is not None
        size = self.batch_size
        if len(msgs) <= size:
            queue.put_nowait((msgs, pq, mq))
        else:
            for i in range(0, len(msgs), size):
                queue.put_nowait((msgs[i : i + size], pq, mq))

    def submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        self.consumer.schedule(delay_ms, self.submit, msgs, pq, mq, True)

    async def _worker(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            msgs, pq, mq = await queue.get()
            if pq.dropped:
                continue
            try:
                await self._consume(msgs, pq, mq)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consuming a batch of %s failed", mq)

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        group = self.consumer.group
        reset_retry_topic(msgs, group)
        start_ms = int(time.time() * 1000)
        now = str(start_ms)
        for msg in msgs:
            msg.properties[c.PROPERTY_CONSUME_START_TIMESTAMP] = now
        ctx = ConsumeContext(mq)
        hooks = self.consumer.consume_hooks
        began = hooks.before(msgs, mq) if hooks.hooks else None
        status: ConsumeResult | None = None  # None: the listener raised
        pq.running_batches += 1
        try:
            if self.is_async:
                value = await self.listener(msgs, ctx)
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(self._executor, self.listener, msgs, ctx)
            status = to_result(value)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("listener of %s failed on %d message(s) of %s; they will be retried", group, len(msgs), mq)
        finally:
            pq.running_batches -= 1
        if began is not None:
            hooks.after(began, status)
        if status is None:
            status = ConsumeResult.RECONSUME_LATER
        counters = self._stats.topics.get(mq.topic) or self._stats.topic(mq.topic)
        self._calls += 1
        if not self._calls & (RT_SAMPLE_EVERY - 1):
            counters.consume_rt += int(time.time() * 1000) - start_ms
            counters.consume_timed += 1
        await self._process_result(status, ctx, msgs, pq, mq, counters)

    async def _process_result(
        self, status: ConsumeResult, ctx: ConsumeContext, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
        counters: TopicCounters,
    ) -> None:
        if status is ConsumeResult.CONSUME_SUCCESS:
            ack = min(ctx.ack_index, len(msgs) - 1)
            counters.ok += ack + 1
            counters.failed += len(msgs) - ack - 1
        else:
            ack = -1
            counters.failed += len(msgs)
        done = msgs
        if ack < len(msgs) - 1:
            failed = msgs[ack + 1 :]
            if self.config.message_model is MessageModel.BROADCASTING:
                for msg in failed:
                    log.warning("broadcasting consumer %s dropped failed message %s", self.consumer.group, msg.msg_id)
            else:
                oks = await asyncio.gather(
                    *(self.consumer.send_back(m, ctx.delay_level_when_next_consume, mq.broker_name) for m in failed)
                )
                back_failed = [m for m, ok in zip(failed, oks, strict=True) if not ok]
                if back_failed:
                    for msg in back_failed:
                        msg.reconsume_times += 1
                    keep = {id(m) for m in back_failed}
                    done = [m for m in msgs if id(m) not in keep]
                    self.submit_later(back_failed, pq, mq, self.config.local_retry_delay_ms)
        offset = pq.remove(done)
        if offset >= 0 and not pq.released:
            store = self.consumer.offset_store
            assert store is not None
            store.update_offset(mq, offset, True)

    async def _clean_expired_loop(self) -> None:
        """Every ``consume_timeout_min``: send back messages whose listener never returned."""
        interval = self.config.consume_timeout_min * 60
        while True:
            await asyncio.sleep(interval)
            await self.clean_expired()

    async def clean_expired(self) -> None:
        if self.consumer.rebalancer is None:
            return
        now = int(time.time() * 1000)
        timeout = self.config.consume_timeout_min * 60_000
        for mq, pq in list(self.consumer.rebalancer.process_queues.items()):
            if pq.dropped:
                continue
            for msg in pq.expired_messages(now, timeout):
                log.warning(
                    "%s: message %s of %s consumed for over %d min; sending it back",
                    self.consumer.group,
                    msg.msg_id,
                    mq,
                    self.config.consume_timeout_min,
                )
                if await self.consumer.send_back(msg, 3, mq.broker_name):
                    offset = pq.remove([msg])
                    if offset >= 0 and not pq.released and self.consumer.offset_store is not None:
                        self.consumer.offset_store.update_offset(mq, offset, True)
