"""Blocking facade over the asyncio client, for scripts, threads and frameworks without a loop.

Every ``Sync*`` class wraps its asyncio twin and runs it on one shared background event loop
(a daemon thread started with the first client and stopped with the last).  There is no
logic here: each method hands a coroutine of the asyncio class to that loop and waits for
its result, so behaviour, errors and defaults are those of the asyncio classes.

Callbacks (``send_async``) and async listeners run on the loop thread; plain listeners of
a push consumer run on its worker thread pool, as with the asyncio class.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from apogee.client.config import ConsumerConfig, ProducerConfig
from apogee.client.consumer.concurrently import Listener
from apogee.client.consumer.lite_pull import LitePullConsumer
from apogee.client.consumer.pull import PullConsumer
from apogee.client.consumer.push import PushConsumer
from apogee.client.producer import Producer, RequestCallback, SendCallback, SendHook
from apogee.client.selectors import MessageQueueSelector
from apogee.client.transaction_producer import TransactionListener, TransactionProducer, TransactionSendResult
from apogee.client.types import PullResult, SendResult
from apogee.common.message import Message, MessageExt, MessageQueue
from apogee.errors import ClientStateError
from apogee.remoting.loop import loop_factory

T = TypeVar("T")

__all__ = ["SyncLitePullConsumer", "SyncProducer", "SyncPullConsumer", "SyncPushConsumer", "SyncTransactionProducer"]


class _LoopThread:
    """The background event loop shared by every sync client of the process."""

    _lock = threading.Lock()
    _current: _LoopThread | None = None

    def __init__(self) -> None:
        factory = loop_factory()
        self.loop: asyncio.AbstractEventLoop = factory() if factory is not None else asyncio.new_event_loop()
        self.refs = 0
        self.thread = threading.Thread(target=self._run, name="apogee-client-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def acquire(cls) -> _LoopThread:
        with cls._lock:
            if cls._current is None:
                cls._current = cls()
            cls._current.refs += 1
            return cls._current

    def release(self) -> None:
        with self._lock:
            self.refs -= 1
            if self.refs > 0:
                return
            if _LoopThread._current is self:
                _LoopThread._current = None
        self.run(self._close_loop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    async def _close_loop(self) -> None:
        await self.loop.shutdown_asyncgens()
        await self.loop.shutdown_default_executor()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise ClientStateError(
                "a sync client method was called on the client's own loop thread; use the asyncio client there"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)


class _SyncBase:
    def __init__(self) -> None:
        self._runner: _LoopThread | None = None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            coro.close()
            raise ClientStateError("the client is not running: call start() first")
        return self._runner.run(coro)

    def _start(self, coro_factory: Any) -> None:
        if self._runner is not None:
            return
        runner = _LoopThread.acquire()
        try:
            runner.run(coro_factory())
        except BaseException:
            runner.release()
            raise
        self._runner = runner

    def _stop(self, coro: Coroutine[Any, Any, Any]) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            coro.close()
            return
        try:
            runner.run(coro)
        finally:
            runner.release()


class SyncProducer(_SyncBase):
    """Blocking ``Producer``; same arguments and options."""

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.producer = Producer(group, namesrv_addr, config=config, **options)

    def start(self) -> SyncProducer:
        self._start(self.producer.start)
        return self

    def shutdown(self, timeout_ms: int | None = None) -> None:
        """Wait for every pending async send, then stop (see ``Producer.shutdown``)."""
        self._stop(self.producer.shutdown(timeout_ms))

    def __enter__(self) -> SyncProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer (``Producer.send``)."""
        return self._run(self.producer.send(msg, queue=queue, selector=selector, arg=arg, timeout_ms=timeout_ms))

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Hand a message over (blocking only for backpressure); a future of its result.

        ``callback(result, exception)`` runs on the client's loop thread.
        """
        return self._hand_over(self.producer.send_async(msg, callback, queue=queue, selector=selector, arg=arg))

    def _hand_over(self, handing: Coroutine[Any, Any, asyncio.Future[T]]) -> concurrent.futures.Future[T]:
        """Run ``handing`` (which returns a future on the loop) and return a thread-safe future
        that settles with it."""
        out: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def hand_over() -> None:
            fut = await handing

            def chain(f: asyncio.Future[T]) -> None:
                if f.cancelled():
                    out.cancel()
                elif f.exception() is not None:
                    out.set_exception(f.exception())
                else:
                    out.set_result(f.result())

            fut.add_done_callback(chain)

        self._run(hand_over())
        return out

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        self._run(self.producer.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        return self._run(self.producer.send_batch(msgs, queue=queue, timeout_ms=timeout_ms))

    def flush(self, timeout_ms: int | None = None) -> None:
        """Wait until every async send has its result."""
        self._run(self.producer.flush(timeout_ms))

    def request(
        self,
        msg: Message,
        timeout_ms: int | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Send a request and wait for its reply (``Producer.request``)."""
        return self._run(self.producer.request(msg, timeout_ms, queue=queue, selector=selector, arg=arg))

    def request_async(
        self, msg: Message, callback: RequestCallback | None = None, *, timeout_ms: int | None = None
    ) -> concurrent.futures.Future[MessageExt]:
        """Send a request; a future of its reply.  ``callback(reply, exception)`` runs on the
        client's loop thread (``Producer.request_async``)."""
        return self._hand_over(self.producer.request_async(msg, callback, timeout_ms=timeout_ms))

    def reply(self, request: Message, body: bytes, *, timeout_ms: int | None = None) -> SendResult:
        """Answer a request a consumer received (``Producer.reply``)."""
        return self._run(self.producer.reply(request, body, timeout_ms=timeout_ms))

    def add_send_hook(self, hook: SendHook) -> None:
        self.producer.add_send_hook(hook)


class SyncTransactionProducer(SyncProducer):
    """Blocking ``TransactionProducer``: listeners may be plain functions (they run on a
    worker thread) or coroutine functions."""

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        listener: TransactionListener,
        **options: Any,
    ) -> None:
        _SyncBase.__init__(self)
        self.producer = TransactionProducer(group, namesrv_addr, listener=listener, **options)

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        assert isinstance(self.producer, TransactionProducer)
        return self._run(self.producer.send_message_in_transaction(msg, arg))


class SyncPushConsumer(_SyncBase):
    """Blocking ``PushConsumer``: ``start()`` returns once consumption runs in the background."""

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
        super().__init__()
        self.consumer = PushConsumer(group, namesrv_addr, listener=listener, orderly=orderly, config=config, **options)

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        if self._runner is None:
            self.consumer.subscribe(topic, expression, expression_type=expression_type)
        else:
            subscribe = functools.partial(self.consumer.subscribe, expression_type=expression_type)
            self._run(_call(subscribe, topic, expression))

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        self.consumer.register_listener(listener, orderly=orderly)

    def start(self) -> SyncPushConsumer:
        self._start(self.consumer.start)
        return self

    def shutdown(self) -> None:
        """Stop pulling, finish in-flight listeners, commit offsets, unregister."""
        self._stop(self.consumer.shutdown())

    def __enter__(self) -> SyncPushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class SyncPullConsumer(_SyncBase):
    """Blocking ``PullConsumer``."""

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.consumer = PullConsumer(group, namesrv_addr, config=config, **options)

    def start(self) -> SyncPullConsumer:
        self._start(self.consumer.start)
        return self

    def shutdown(self) -> None:
        self._stop(self.consumer.shutdown())

    def __enter__(self) -> SyncPullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.consumer.fetch_message_queues(topic))

    def pull(self, mq: MessageQueue, expression: str = "*", offset: int = 0, max_nums: int = 32) -> PullResult:
        return self._run(self.consumer.pull(mq, expression, offset, max_nums))

    def pull_block_if_not_found(
        self, mq: MessageQueue, expression: str = "*", offset: int = 0, max_nums: int = 32, *, suspend_ms: int = 20_000
    ) -> PullResult:
        return self._run(self.consumer.pull_block_if_not_found(mq, expression, offset, max_nums, suspend_ms=suspend_ms))

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._run(_call(self.consumer.update_consume_offset, mq, offset))

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        return self._run(self.consumer.fetch_consume_offset(mq, from_store))

    def commit(self) -> None:
        self._run(self.consumer.commit())

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.min_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary: str | None = None) -> int:
        return self._run(self.consumer.search_offset(mq, timestamp_ms, boundary))


class SyncLitePullConsumer(_SyncBase):
    """Blocking ``LitePullConsumer``."""

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.consumer = LitePullConsumer(group, namesrv_addr, config=config, **options)

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        if self._runner is None:
            self.consumer.subscribe(topic, expression, expression_type=expression_type)
        else:
            subscribe = functools.partial(self.consumer.subscribe, expression_type=expression_type)
            self._run(_call(subscribe, topic, expression))

    def assign(self, queues: Iterable[MessageQueue], expression: str = "*") -> None:
        if self._runner is None:
            self.consumer.set_assignment(list(queues), expression)
        else:
            self._run(self.consumer.assign(list(queues), expression))

    def start(self) -> SyncLitePullConsumer:
        self._start(self.consumer.start)
        return self

    def shutdown(self) -> None:
        self._stop(self.consumer.shutdown())

    def __enter__(self) -> SyncLitePullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return self._run(self.consumer.poll(timeout_ms))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self.consumer.seek_to_end(mq))

    def commit_sync(self) -> None:
        self._run(self.consumer.commit_sync())

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        self._run(self.consumer.commit(offsets))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.committed(mq))

    def position(self, mq: MessageQueue) -> int:
        return int(self._run(_call(self.consumer.position, mq)))

    def assignment(self) -> set[MessageQueue]:
        return self._run(_call(self.consumer.assignment))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.consumer.fetch_message_queues(topic))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._run(_call(self.consumer.pause, list(queues)))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._run(_call(self.consumer.resume, list(queues)))


async def _call(fn: Any, *args: Any) -> Any:
    """Run a plain method on the loop thread (the consumers' state belongs to the loop)."""
    return fn(*args)
