"""LitePullConsumer (RocketMQ's DefaultLitePullConsumer): pull in the background, ``poll()`` in front.

Two modes, as in Kafka and RocketMQ: ``subscribe(topic, expression)`` lets rebalance assign
queues; ``assign(queues)`` takes fixed queues.  Either way one pull loop per owned queue
fetches ahead (bounded by ``pull_threshold_for_queue`` / ``pull_threshold_for_all``) and
``poll(timeout_ms)`` returns the next batch.

Positions: each queue has a *consume offset*, one past the last message ``poll`` returned.
With ``auto_commit`` it is committed automatically (persisted every
``persist_consumer_offset_interval_ms``, on hand-off and at shutdown); otherwise only
``commit_sync()`` / ``commit()`` commit.  ``seek()`` moves both the pull and the consume
position and discards what was fetched ahead; ``pause()`` stops fetching (and returning) a
queue until ``resume()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apogee.client.config import ConsumerConfig
from apogee.client.consumer.base import ConsumerBase, build_config
from apogee.client.consumer.offset_store import ReadOffsetType
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.rebalance import Rebalancer
from apogee.client.consumer.subscription import Subscription, build_subscription
from apogee.client.types import ConsumeResult, MessageModel, PullStatus
from apogee.common.aio import within
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ApogeeError, ClientError, ClientStateError

log = logging.getLogger("apogee.client.consumer.lite_pull")
_FOUND = PullStatus.FOUND  # read per pull (an Enum class attribute read is slow: docs/architecture.md)

MIB = 1024 * 1024


@dataclass(slots=True)
class _Fetched:
    mq: MessageQueue
    generation: int
    msgs: list[MessageExt]


@dataclass
class _QueueState:
    mq: MessageQueue
    pq: ProcessQueue
    pull_offset: int
    consume_offset: int
    generation: int = 0
    paused: bool = False
    task: asyncio.Task[None] | None = None
    held: list[_Fetched] = field(default_factory=list)  # fetched while paused


class LitePullConsumer(ConsumerBase):
    """``poll()``-style consumer over ``subscribe`` (rebalanced) or ``assign`` (fixed) queues.

    >>> consumer = LitePullConsumer("group", "127.0.0.1:9876")
    >>> consumer.subscribe("TopicTest")
    >>> await consumer.start()
    >>> msgs = await consumer.poll(1000)
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
        self._mode: str | None = None  # "subscribe" or "assign"
        self._states: dict[MessageQueue, _QueueState] = {}
        self._assigned_subs: dict[str, Subscription] = {}
        self._ready: asyncio.Queue[_Fetched] | None = None
        self._assigned: set[MessageQueue] = set()

    # --- modes --------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Consume ``topic`` with queues assigned by rebalance."""
        if self._mode == "assign":
            raise ClientStateError("this consumer uses assign(); subscribe() and assign() do not mix")
        self._mode = "subscribe"
        super().subscribe(topic, expression, expression_type=expression_type)

    async def assign(self, queues: Iterable[MessageQueue], expression: str = "*") -> None:
        """Consume exactly ``queues`` (no rebalance); may be called again to change them."""
        self.set_assignment(queues, expression)
        if self._running:
            await self._apply_assignment()

    def set_assignment(self, queues: Iterable[MessageQueue], expression: str = "*") -> None:
        """Record the queues to consume; applied by ``start()`` (``assign`` applies it at once)."""
        if self._mode == "subscribe":
            raise ClientStateError("this consumer uses subscribe(); subscribe() and assign() do not mix")
        self._mode = "assign"
        wanted = set(queues)
        for mq in wanted:
            if mq.topic not in self._assigned_subs or self._assigned_subs[mq.topic].expression != expression:
                self._assigned_subs[mq.topic] = build_subscription(mq.topic, expression, int(time.time() * 1000))
        self._assigned = wanted

    async def _apply_assignment(self) -> None:
        for mq in [q for q in self._states if q not in self._assigned]:
            state = self._states[mq]
            state.pq.dropped = True
            await self.remove_queue(mq, state.pq)
        for mq in sorted(self._assigned - set(self._states)):
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                raise ClientError(f"the start offset of {mq} cannot be determined now")
            self.start_queue(mq, ProcessQueue(int(time.time() * 1000)), offset)

    def subscribed_topics(self) -> set[str]:
        if self._mode == "assign":
            return {mq.topic for mq in self._assigned}
        return set(self.subscriptions)

    def _subscription(self, topic: str) -> Subscription | None:
        return self.subscriptions.get(topic) or self._assigned_subs.get(topic)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> LitePullConsumer:
        if self._running:
            return self
        self._ready = asyncio.Queue()
        if self._mode == "assign":
            self.subscriptions = {}
        self.rebalancer = Rebalancer(self, self.config.message_model, self.config.allocate_strategy)
        await self._start_base()
        await self._start_tracing()
        if self._mode == "assign":
            await self._apply_assignment()
        self._start_rebalance()
        log.info("lite pull consumer %s started as %s", self.group, self.client_id)
        return self

    async def do_rebalance(self) -> bool:
        if self._mode != "subscribe":
            return False
        return await super().do_rebalance()

    async def shutdown(self) -> None:
        """Stop pulling, commit the consume positions (auto commit) and unregister."""
        if not self._running:
            return
        await self._stop_rebalance()
        tasks = []
        for state in self._states.values():
            state.pq.dropped = True
            if state.task is not None:
                state.task.cancel()
                tasks.append(state.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert self.offset_store is not None
        try:
            await self.offset_store.persist_all(list(self._states))
        except ApogeeError as exc:
            log.warning("final offset commit of %s failed: %s", self.group, exc)
        self._running = False
        self._states.clear()
        await self._release_base()
        log.info("lite pull consumer %s shut down", self.group)

    async def __aenter__(self) -> LitePullConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- rebalance host -----------------------------------------------------------------------

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        state = _QueueState(mq, pq, offset, offset)
        if self.config.auto_commit and self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, True)
        if self.rebalancer is not None:
            self.rebalancer.process_queues[mq] = pq
        self._states[mq] = state
        state.task = asyncio.create_task(self._pull_loop(state))

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        state = self._states.pop(mq, None)
        if state is not None and state.task is not None:
            state.task.cancel()
            await asyncio.gather(state.task, return_exceptions=True)
        assert self.offset_store is not None
        if self.config.message_model is MessageModel.CLUSTERING:
            try:
                await self.offset_store.persist(mq)
            except ApogeeError as exc:
                log.warning("%s: committing the offset of %s on hand-off failed: %s", self.group, mq, exc)
            self.offset_store.remove_offset(mq)
        pq.released = True
        if self.rebalancer is not None and self._mode == "assign":
            self.rebalancer.process_queues.pop(mq, None)
        return True

    # --- fetching -----------------------------------------------------------------------------

    def _cached_total(self) -> int:
        return self._ready.qsize() if self._ready is not None else 0

    async def _pull_loop(self, state: _QueueState) -> None:
        cfg = self.config
        pq = state.pq
        mq = state.mq
        ready = self._ready
        assert ready is not None
        size_limit = cfg.pull_threshold_size_for_queue_mib * MIB
        batch_limit = max(1, cfg.pull_threshold_for_all // max(1, cfg.pull_batch_size))
        while not pq.dropped:
            pq.last_pull_ms = int(time.time() * 1000)
            if (
                state.paused
                or pq.msg_count > cfg.pull_threshold_for_queue
                or pq.msg_size > size_limit
                or (ready.qsize() > batch_limit)
            ):
                await asyncio.sleep(cfg.pull_flow_control_delay_ms / 1000)
                continue
            sub = self._subscription(mq.topic)
            if sub is None:
                await asyncio.sleep(cfg.pull_retry_delay_ms / 1000)
                continue
            generation = state.generation
            offset = state.pull_offset
            try:
                result = await self.pull_kernel(
                    mq, sub, offset, cfg.pull_batch_size, suspend_ms=cfg.broker_suspend_max_time_ms
                )
            except asyncio.CancelledError:
                raise
            except ApogeeError as exc:
                if pq.dropped:
                    return
                log.warning("pull of %s from %d failed: %s", mq, offset, exc)
                await asyncio.sleep(cfg.pull_retry_delay_ms / 1000)
                continue
            if pq.dropped or generation != state.generation:
                continue
            if result.status is _FOUND:
                if result.messages:
                    pq.put(result.messages)
                    ready.put_nowait(_Fetched(mq, generation, result.messages))
                    # Let a waiting poll() hand them out before this loop writes its next pull.
                    await asyncio.sleep(0)
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "%s: offset %d of %s is illegal (queue holds %d..%d); continuing from %d as the broker says",
                    self.group,
                    offset,
                    mq,
                    result.min_offset,
                    result.max_offset,
                    result.next_begin_offset,
                )
            state.pull_offset = result.next_begin_offset

    # --- polling ------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next fetched batch of one queue, waiting up to ``timeout_ms`` (empty on timeout)."""
        self._check_running()
        ready = self._ready
        assert ready is not None
        timeout = (self.config.poll_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = time.monotonic() + timeout
        while True:
            if ready.empty():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                try:
                    fetched = await within(ready.get(), remaining)
                except TimeoutError:
                    return []
            else:
                fetched = ready.get_nowait()
            state = self._states.get(fetched.mq)
            if state is None or state.pq.dropped or fetched.generation != state.generation:
                continue
            if state.paused:
                state.held.append(fetched)
                continue
            return self._deliver(state, fetched)

    def _deliver(self, state: _QueueState, fetched: _Fetched) -> list[MessageExt]:
        offset = state.pq.remove(fetched.msgs)
        state.consume_offset = offset if offset >= 0 else fetched.msgs[-1].queue_offset + 1
        if self.config.auto_commit and not state.pq.released:
            assert self.offset_store is not None
            self.offset_store.update_offset(state.mq, state.consume_offset, False)
        hooks = self.consume_hooks
        if hooks.hooks:  # handed out is consumed, as far as anyone here can tell
            hooks.after(hooks.before(fetched.msgs, state.mq), ConsumeResult.CONSUME_SUCCESS)
        return fetched.msgs

    # --- positions ----------------------------------------------------------------------------

    def _state(self, mq: MessageQueue) -> _QueueState:
        state = self._states.get(mq)
        if state is None:
            raise ClientError(f"{mq} is not assigned to this consumer (assignment: {sorted(self._states)})")
        return state

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer currently fetches."""
        return set(self._states)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return sorted(await self._check_running().subscribe_info(topic))

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``; what was fetched ahead is discarded."""
        self._check_running()
        state = self._state(mq)
        low, high = await self.min_offset(mq), await self.max_offset(mq)
        if not low <= offset <= high:
            raise ClientError(f"seek offset {offset} of {mq} is outside the queue's {low}..{high}")
        state.generation += 1
        state.held.clear()
        state.pq.clear()
        state.pull_offset = offset
        state.consume_offset = offset
        if self.config.auto_commit:
            assert self.offset_store is not None
            self.offset_store.update_offset(mq, offset, False)
        if state.task is not None:
            state.task.cancel()
        state.task = asyncio.create_task(self._pull_loop(state))

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    def position(self, mq: MessageQueue) -> int:
        """One past the last message of ``mq`` that ``poll`` returned."""
        return self._state(mq).consume_offset

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` on the broker (-1: none)."""
        self._check_running()
        assert self.offset_store is not None
        return await self.offset_store.read_offset(mq, ReadOffsetType.STORE)

    async def commit_sync(self) -> None:
        """Commit the consume position of every owned queue, and wait for the brokers."""
        self._check_running()
        assert self.offset_store is not None
        for mq, state in self._states.items():
            self.offset_store.update_offset(mq, state.consume_offset, False)
        await self.offset_store.persist_all(list(self._states))

    async def commit(self, offsets: dict[MessageQueue, int]) -> None:
        """Commit the given offsets (of owned queues) and wait for the brokers."""
        self._check_running()
        assert self.offset_store is not None
        for mq, offset in offsets.items():
            self._state(mq)
            self.offset_store.update_offset(mq, offset, False)
        await self.offset_store.persist_all(list(offsets))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop fetching and returning ``queues`` until ``resume``."""
        for mq in queues:
            self._state(mq).paused = True

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        ready = self._ready
        assert ready is not None
        for mq in queues:
            state = self._state(mq)
            state.paused = False
            for fetched in state.held:
                ready.put_nowait(fetched)
            state.held.clear()
