"""The template: one-line sends over the application's producer (RocketMQ's ``ServerProduct``).

``await template.send(topic, body, tag=..., keys=...)`` builds the ``Message`` (the body
encoded by ``apogee.client.app.payload.encode_body``: bytes, str, or JSON for dicts,
dataclasses and other JSON-serialisable values) and sends it with the producer, so retries,
auto-batching of ``send_async``, backpressure and errors are the producer's.
``send_sync_msg(topic, tag, body)`` is the Spring Boot quick start's wrapper under its own name.

``template.sync`` is the blocking facade for code running outside the application's event
loop -- plain listeners on the consumer's worker threads, a thread-based web server: each
call runs on the application's loop and waits for its result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from apogee.client.app.payload import encode_body
from apogee.client.producer import Producer
from apogee.client.selectors import SelectByHash
from apogee.client.types import SendResult
from apogee.common.message import Message
from apogee.errors import ClientStateError

T = TypeVar("T")

_by_hash = SelectByHash()


def _selector(order_key: str | None) -> SelectByHash | None:
    """Java's hash selector for messages with an order key; none (any queue) without."""
    return None if order_key is None else _by_hash


def build_message(
    topic: str,
    body: object,
    *,
    tag: str | None = None,
    keys: str | Sequence[str] | None = None,
    properties: Mapping[str, str] | None = None,
    delay_level: int = 0,
) -> Message:
    """The ``Message`` the template sends (pure: nothing is sent)."""
    msg = Message(topic, encode_body(body), properties=dict(properties) if properties else {})
    if tag:
        msg.tags = tag
    if keys:
        msg.keys = [keys] if isinstance(keys, str) else list(keys)
    if delay_level:
        msg.delay_time_level = delay_level
    return msg


class Template:
    """Sends of str, bytes and JSON-serialisable values in one line; bound to a running app.

    ``order_key``: messages with the same key go to the same queue, in the order sent (one
    attempt, as ordered sends are), for orderly listeners.
    """

    def __init__(self) -> None:
        self._producer: Producer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sync = SyncTemplate(self)

    def bind(self, producer: Producer | None) -> None:
        """Attach the started producer (``None``: detach); the application calls this."""
        self._producer = producer
        self._loop = asyncio.get_running_loop() if producer is not None else None

    @property
    def producer(self) -> Producer:
        """The application's producer, for what the template does not cover (batches, transactions)."""
        if self._producer is None:
            raise ClientStateError("the application is not running: start it (async with app / app.run()) first")
        return self._producer

    async def send(
        self,
        topic: str,
        body: object,
        *,
        tag: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        order_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer."""
        msg = build_message(topic, body, tag=tag, keys=keys, properties=properties, delay_level=delay_level)
        return await self.producer.send(msg, selector=_selector(order_key), arg=order_key, timeout_ms=timeout_ms)

    async def send_sync_msg(self, topic: str, tag: str | None, body: object) -> SendResult:
        """The quick start's ``sendSyncMsg(topic, tag, body)``: a sync send with a tag."""
        return await self.send(topic, body, tag=tag)

    async def send_async(
        self,
        topic: str,
        body: object,
        *,
        tag: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        order_key: str | None = None,
    ) -> asyncio.Future[SendResult]:
        """Hand the message over (waiting only for backpressure); a future of its result."""
        msg = build_message(topic, body, tag=tag, keys=keys, properties=properties, delay_level=delay_level)
        return await self.producer.send_async(msg, selector=_selector(order_key), arg=order_key)

    async def send_oneway(
        self,
        topic: str,
        body: object,
        *,
        tag: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        order_key: str | None = None,
    ) -> None:
        """Send without waiting for an answer (no retry, no result)."""
        msg = build_message(topic, body, tag=tag, keys=keys, properties=properties)
        await self.producer.send_oneway(msg, selector=_selector(order_key), arg=order_key)


class SyncTemplate:
    """The template's blocking twin, for threads other than the application's loop."""

    def __init__(self, template: Template) -> None:
        self._template = template

    def _run(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        loop = self._template._loop
        if loop is None or loop.is_closed():
            coro.close()
            raise ClientStateError("the application is not running: start it (async with app / app.run()) first")
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is loop:
            coro.close()
            raise ClientStateError(
                "template.sync was called on the application's own event loop, where it would wait forever: "
                "use `await template.send(...)` there"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def send(self, topic: str, body: object, **kwargs: Any) -> SendResult:
        """``Template.send``, blocking (same keyword arguments)."""
        return self._run(self._template.send(topic, body, **kwargs)).result()

    def send_sync_msg(self, topic: str, tag: str | None, body: object) -> SendResult:
        """The quick start's ``sendSyncMsg(topic, tag, body)``, blocking."""
        return self._run(self._template.send_sync_msg(topic, tag, body)).result()

    def send_oneway(self, topic: str, body: object, **kwargs: Any) -> None:
        self._run(self._template.send_oneway(topic, body, **kwargs)).result()

    def send_async(self, topic: str, body: object, **kwargs: Any) -> concurrent.futures.Future[SendResult]:
        """Hand the message over (blocking only for backpressure); a future of its result."""
        handed: concurrent.futures.Future[None] = concurrent.futures.Future()

        async def send() -> SendResult:
            fut = await self._template.send_async(topic, body, **kwargs)
            handed.set_result(None)
            return await fut

        result = self._run(send())
        waiting: list[concurrent.futures.Future[Any]] = [handed, result]
        concurrent.futures.wait(waiting, return_when=concurrent.futures.FIRST_COMPLETED)
        if not handed.done():
            result.result()  # the hand-over failed: raise its error here
        return result
