"""What every consumer shares: configuration, subscriptions, the client instance, offsets,
rebalance driving and the pull request itself.

``PushConsumer``, ``LitePullConsumer`` and ``PullConsumer`` build on this; the per-queue
policies (flow control, listeners, polling) live in their own modules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from apogee.client.config import ConsumerConfig, with_options
from apogee.client.consumer.hooks import ConsumeHook, ConsumeHooks
from apogee.client.consumer.offset_store import (
    OFFSET_UNKNOWN,
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.rebalance import Rebalancer
from apogee.client.consumer.stats import ConsumerStats
from apogee.client.consumer.subscription import Subscription, build_subscription
from apogee.client.instance import ClientInstance
from apogee.client.trace import ConsumeTraceHook, TraceDispatcher
from apogee.client.types import ConsumeFromWhere, MessageModel, PullResult
from apogee.common import constants as c
from apogee.common.aio import wait_event
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ApogeeError, ClientStateError, NoRouteError
from apogee.remoting.bodies.consumer_info import ConsumerRunningInfo
from apogee.remoting.bodies.heartbeat import ConsumerData
from apogee.remoting.headers.pull import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
)

log = logging.getLogger("apogee.client.consumer")

HALF_HOUR_MS = 30 * 60 * 1000


def build_config(
    group: str | None, namesrv_addr: str | None, config: ConsumerConfig | None, options: dict[str, Any]
) -> ConsumerConfig:
    return with_options(config or ConsumerConfig(), group, namesrv_addr, options, "consumer")


class ConsumerBase:
    consume_type = "CONSUME_PASSIVELY"
    orderly = False

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.group = config.group
        self.subscriptions: dict[str, Subscription] = {}
        self.instance: ClientInstance | None = None
        self.offset_store: OffsetStore | None = None
        self.rebalancer: Rebalancer | None = None
        self.client_id = ""
        self._topic_queues: dict[str, set[MessageQueue]] = {}
        self._suggest: dict[MessageQueue, int] = {}
        self._running = False
        self._rebalance_event: asyncio.Event | None = None
        self._rebalance_lock: asyncio.Lock | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._start_ms = 0
        self.stats = ConsumerStats()  # pull/consume RT and TPS (GET_CONSUMER_RUNNING_INFO)
        self._stats_task: asyncio.Task[None] | None = None
        self.consume_hooks = ConsumeHooks(config.group, config.consume_timeout_min * 60_000)
        self._trace_hook: ConsumeTraceHook | None = None  # with enable_msg_trace (it holds the dispatcher)

    def add_consume_hook(self, hook: ConsumeHook) -> None:
        """Call ``hook.before_consume(ctx)`` / ``hook.after_consume(ctx)`` around every listener
        call (push) or every batch ``poll()`` returns (lite pull)."""
        self.consume_hooks.hooks.append(hook)

    # --- subscriptions ------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Subscribe to ``topic`` with a tag expression (``*``, ``TagA``, ``TagA || TagB``), or
        with ``expression_type="SQL92"`` a property selector evaluated on the broker
        (``"a > 5 AND TAGS IN ('A', 'B')"``; the broker needs ``enablePropertyFilter=true``)."""
        self.subscriptions[topic] = build_subscription(topic, expression, int(time.time() * 1000), expression_type)
        if self._running:
            self._subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self._running:
            self._subscriptions_changed()

    def _subscriptions_changed(self) -> None:
        assert self.instance is not None
        for topic in self.subscriptions:
            if topic not in self.instance.routes:
                self._spawn_background(self.instance.update_topic_route(topic))
        self._spawn_background(self.instance.heartbeat_all())
        self.trigger_rebalance()

    def _spawn_background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        task.add_done_callback(_log_failure)

    def subscribed_topics(self) -> set[str]:
        return set(self.subscriptions)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=self.consume_type,
            message_model=self.config.message_model.value,
            consume_from_where=self.config.consume_from_where.value,
            subscriptions=[s.to_data() for s in self.subscriptions.values()],
        )

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        old = self._topic_queues.get(topic)
        self._topic_queues[topic] = set(mqs)
        if old is not None and old != mqs and self._running:
            self.trigger_rebalance()

    async def topic_queues(self, topic: str) -> set[MessageQueue]:
        queues = self._topic_queues.get(topic)
        if queues:
            return queues
        assert self.instance is not None
        try:
            queues = await self.instance.subscribe_info(topic)
        except NoRouteError:
            return set()
        self._topic_queues[topic] = queues
        return queues

    # --- lifecycle ----------------------------------------------------------------------------

    def _check_running(self) -> ClientInstance:
        if not self._running or self.instance is None:
            raise ClientStateError(f"consumer {self.group} is not running: call start() first")
        return self.instance

    async def _start_base(self) -> None:
        self._start_ms = int(time.time() * 1000)
        self.instance = await ClientInstance.acquire(self.config)
        try:
            self.instance.register_consumer(self)
        except BaseException:
            await self.instance.release()
            raise
        self.client_id = self.instance.client_id
        if self.config.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.config.offset_store_dir, self.client_id, self.group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self.instance, self.group)
        await self.offset_store.load()
        self._rebalance_event = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._running = True
        for topic in self.subscriptions:
            try:
                await self.instance.update_topic_route(topic)
            except ApogeeError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)
        await self.instance.heartbeat_all()
        self._stats_task = asyncio.create_task(_sample_stats(self.stats))

    @property
    def start_ms(self) -> int:
        """When ``start`` was called (epoch ms)."""
        return self._start_ms

    def _start_rebalance(self) -> None:
        self._rebalance_task = asyncio.create_task(self._rebalance_loop())

    async def _stop_rebalance(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            await asyncio.gather(self._rebalance_task, return_exceptions=True)
            self._rebalance_task = None

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The ``TraceDispatcher`` with ``enable_msg_trace`` while running, else None."""
        return self._trace_hook.dispatcher if self._trace_hook is not None else None

    async def _start_tracing(self) -> None:
        """With ``enable_msg_trace``: SubBefore/SubAfter records of every listener call."""
        if not self.config.enable_msg_trace or self._trace_hook is not None:
            return
        self._trace_hook = ConsumeTraceHook(await TraceDispatcher.start_for(self.config, self.group, "CONSUME"))
        self.add_consume_hook(self._trace_hook)

    async def _release_base(self) -> None:
        assert self.instance is not None
        if self._stats_task is not None:
            self._stats_task.cancel()
            self._stats_task = None
        if self._trace_hook is not None:
            hook, self._trace_hook = self._trace_hook, None
            self.consume_hooks.hooks.remove(hook)
            await hook.dispatcher.close()
        await self.instance.unregister_consumer(self.group)
        await self.instance.release()

    # --- rebalance ----------------------------------------------------------------------------

    def trigger_rebalance(self) -> None:
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    def schedule_rebalance(self, delay_ms: int) -> None:
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if t.when() > loop.time()]
        self._timers.append(loop.call_later(delay_ms / 1000, self.trigger_rebalance))

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_event is not None
        event = self._rebalance_event
        while self._running:
            try:
                await self.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rebalance of %s failed", self.group)
            await wait_event(event, self.config.rebalance_interval_ms / 1000)
            event.clear()

    async def do_rebalance(self) -> bool:
        """Rebalance now (normally driven by timers and broker notifications)."""
        if self.rebalancer is None or not self._running:
            return False
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            topics = self.subscribed_topics()
            changed = await self.rebalancer.rebalance(topics)
        # A topic without a route yet (just created, or not registered yet): look again soon
        # rather than a whole rebalance interval later.
        if any(not self._topic_queues.get(t) for t in topics):
            self.schedule_rebalance(min(1000, self.config.rebalance_interval_ms))
        return changed

    async def consumer_ids(self, topic: str) -> list[str]:
        instance = self._check_running()
        addr = await instance.any_broker_of_topic(topic)
        return await instance.api.get_consumer_id_list(addr, self.group)

    async def lock_queue(self, mq: MessageQueue) -> bool:
        return True

    def schedule(self, delay_ms: float, callback: Any, *args: Any) -> None:
        """Run ``callback(*args)`` later unless the consumer stopped meanwhile."""
        loop = asyncio.get_running_loop()

        def run() -> None:
            if self._running:
                callback(*args)

        loop.call_later(delay_ms / 1000, run)

    # --- offsets ------------------------------------------------------------------------------

    async def persist_offsets(self) -> None:
        if self.offset_store is None:
            return
        owned = list(self.rebalancer.process_queues) if self.rebalancer is not None else None
        await self.offset_store.persist_all(owned)

    async def _admin_addr(self, mq: MessageQueue) -> str:
        """Queue bounds and searches are reads: the master, else a slave."""
        instance = self._check_running()
        return await instance.find_read_addr(mq.broker_name, mq.topic)

    async def max_offset(self, mq: MessageQueue) -> int:
        """One past the last message of ``mq`` on its broker."""
        return await self._check_running().api.get_max_offset(await self._admin_addr(mq), mq.topic, mq.queue_id)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._check_running().api.get_min_offset(await self._admin_addr(mq), mq.topic, mq.queue_id)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary: str | None = None) -> int:
        """The offset of ``mq`` that ``timestamp_ms`` names, as RocketMQ's ``searchOffset``:
        the message stored nearest that time (the last one for a later time, the first for
        an earlier one).  ``boundary="LOWER"`` asks for the first message stored at or after
        it, ``"UPPER"`` for the last at or before it (RocketMQ 5's ``boundaryType``; a 4.x
        broker ignores it)."""
        return await self._check_running().api.search_offset(
            await self._admin_addr(mq), mq.topic, mq.queue_id, timestamp_ms, boundary
        )

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where to start pulling ``mq``: the committed offset, else consume-from-where.

        -1 means "not known now" (the store could not be asked): the caller retries later
        instead of guessing, so a broker hiccup never silently moves a group to the end or the
        beginning of a queue.
        """
        assert self.offset_store is not None
        last = await self.offset_store.read_offset(mq, ReadOffsetType.STORE)
        if last >= 0:
            return last
        if last == OFFSET_UNKNOWN:
            return -1
        where = self.config.consume_from_where
        retry = mq.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX)
        try:
            if where is ConsumeFromWhere.FIRST_OFFSET or (retry and where is ConsumeFromWhere.LAST_OFFSET):
                return 0
            if where is ConsumeFromWhere.LAST_OFFSET:
                return await self.max_offset(mq)
            if retry:
                return await self.max_offset(mq)
            ts = self.config.consume_timestamp_ms or (self._start_ms - HALF_HOUR_MS)
            return await self.search_offset(mq, ts)
        except ApogeeError as exc:
            log.warning("cannot compute the start offset of %s for %s: %s", mq, self.group, exc)
            return -1

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker asked to move the group's offsets (RESET_CONSUMER_CLIENT_OFFSET)."""
        log.warning("%s: offsets of %s reset by the broker: %s", self.group, topic, offsets)
        if self.offset_store is None or self.rebalancer is None:
            return
        for mq, offset in offsets.items():
            self.offset_store.update_offset(mq, offset, False)
            pq = self.rebalancer.process_queues.get(mq)
            if pq is not None:
                pq.dropped = True
        self.trigger_rebalance()

    def running_info(self, namesrvs: list[str], jstack: bool) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO's answer (``running_info.running_info``)."""
        from apogee.client.consumer.running_info import running_info  # it builds on this module

        return running_info(self, namesrvs, jstack)

    # --- pulling ------------------------------------------------------------------------------

    async def pull_kernel(
        self,
        mq: MessageQueue,
        sub: Subscription,
        offset: int,
        max_nums: int,
        *,
        suspend_ms: int = 0,
        commit_offset: int = -1,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """One PULL_MESSAGE of ``mq`` from ``offset``; long-polls ``suspend_ms`` when > 0."""
        instance = self._check_running()
        found = instance.broker_addr_in_subscribe(mq.broker_name, self._suggest.get(mq, c.MASTER_ID))
        if found is None:
            await instance.update_topic_route(mq.topic)
            found = instance.broker_addr_in_subscribe(mq.broker_name, self._suggest.get(mq, c.MASTER_ID))
            if found is None:
                raise NoRouteError(f"broker {mq.broker_name} of {mq} is unknown")
        addr, slave = found
        sysflag = FLAG_SUBSCRIPTION if self.config.post_subscription_when_pull else 0
        if suspend_ms > 0:
            sysflag |= FLAG_SUSPEND
        if commit_offset > 0 and not slave:  # a slave keeps no commit (PullAPIWrapper clears the flag)
            sysflag |= FLAG_COMMIT_OFFSET
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sysflag,
            commit_offset=max(commit_offset, 0),
            suspend_timeout_millis=suspend_ms,
            sub_version=sub.version,
            subscription=sub.expression if sysflag & FLAG_SUBSCRIPTION else None,
            expression_type=sub.expression_type,
        )
        if timeout_ms is None:
            timeout_ms = (
                self.config.consumer_timeout_ms_when_suspend if suspend_ms > 0 else self.config.request_timeout_ms
            )
        result = await instance.api.pull(addr, header, timeout_ms, sub.tags)
        if result.suggest_which_broker_id != self._suggest.get(mq, c.MASTER_ID):
            self._suggest[mq] = result.suggest_which_broker_id
        return result

    async def send_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK: the message goes to the retry topic (or the DLQ); False on failure."""
        instance = self._check_running()
        try:
            addr = instance.master_addr(broker_name) or f"{msg.store_host[0]}:{msg.store_host[1]}"
            await instance.api.consumer_send_msg_back(
                addr, msg, self.group, delay_level, self.config.max_reconsume(), timeout_ms=5000
            )
            return True
        except ApogeeError as exc:
            log.warning("send back of %s (%s) failed: %s", msg.msg_id, msg.topic, exc)
            return False


def reset_retry_topic(msgs: list[MessageExt], group: str) -> None:
    """Messages of ``%RETRY%group`` are shown with their original topic (RETRY_TOPIC)."""
    retry = c.RETRY_GROUP_TOPIC_PREFIX + group
    for msg in msgs:
        if msg.topic == retry:
            original = msg.properties.get(c.PROPERTY_RETRY_TOPIC)
            if original:
                msg.topic = original


def _log_failure(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("background consumer task failed: %s", exc)


async def _sample_stats(stats: ConsumerStats) -> None:
    """The consume figures' windows (sampled every 10 s / 10 min / 1 h), looked at each second."""
    while True:
        stats.tick(int(time.time() * 1000))
        await asyncio.sleep(1.0)


def new_process_queue() -> ProcessQueue:
    return ProcessQueue(int(time.time() * 1000))
