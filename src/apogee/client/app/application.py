"""``App``: a producer (behind a template) and declared listeners, started and stopped together.

RocketMQ's Spring Boot quick start in Python's idiom::

    app = App("warn-service", config_file="app.properties")   # or NAMESRV_ADDR in the environment

    @app.listener(topic="TopicTest", group="warn_consumer_group")
    class WarnConsumer:
        def on_message(self, message: str) -> None:
            print("Received message:", message)

    await app.template.send_sync_msg("TopicTest", "tag", "sync hello world!")

Run it with ``apogee run module:app``, ``app.run()`` (both stop on SIGINT/SIGTERM) or
``async with app:``.

**Start**: settings are resolved (``apogee.client.app.settings``: arguments > environment >
file > defaults), the producer starts, then one ``PushConsumer`` per listener; every
listener's topic is then looked up on the NameServer, so an unreachable NameServer or a
topic that does not exist fails the start with one line saying what to do (and everything
started is stopped again).  Then the ``on_startup`` hooks run.

**Stop**: the ``on_shutdown`` hooks run, then the consumers stop together (stop pulling,
finish in-flight listener calls within ``drain_timeout_ms``, commit offsets, unregister),
then the producer (pending async sends are flushed) -- listeners may still send while they
finish.  The producer and every consumer share one client instance (one connection per
broker, one heartbeat), as a Java process's clients do.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from apogee.client.app.listeners import ListenerSpec, declare, make_listener
from apogee.client.app.settings import ClientSettings, consumer_config, resolve
from apogee.client.app.template import Template
from apogee.client.config import ConsumerConfig
from apogee.client.consumer.push import PushConsumer
from apogee.client.producer import Producer
from apogee.errors import (
    ClientStateError,
    ConfigError,
    ConnectionClosedError,
    NameServerUnreachableError,
    RequestTimeoutError,
    TopicMissingError,
)
from apogee.remoting.loop import run as run_loop

log = logging.getLogger("apogee.client.app")

F = TypeVar("F")
Hook = Callable[[], Any]

_apps = itertools.count(1)
_CONSUMER_FIELDS = set(ConsumerConfig.__dataclass_fields__)


class App:
    """An application: settings, a template for sending, listeners, one lifecycle.

    ``config_file``: a properties file with RocketMQ's client keys (``namesrvAddr``,
    ``producerGroup``, ``sendMsgTimeout``, ``consumeThreadMax``...); ``APOGEE_CONFIG`` names
    it otherwise.  Keyword options are ``ProducerConfig``/``ConsumerConfig`` fields and win
    over the environment and the file.
    """

    def __init__(
        self,
        name: str = "apogee-app",
        *,
        config_file: str | Path | None = None,
        namesrv_addr: str | None = None,
        producer_group: str | None = None,
        **options: Any,
    ) -> None:
        self.name = name
        self._config_file = config_file
        self._explicit: dict[str, Any] = dict(options)
        if namesrv_addr is not None:
            self._explicit["namesrv_addr"] = namesrv_addr
        if producer_group is not None:
            self._explicit["producer_group"] = producer_group
        # Part of the client id ip@instance: no "@" or spaces from the name.
        self._instance_name = f"{os.getpid()}#{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{next(_apps)}"
        self.listeners: dict[str, ListenerSpec] = {}
        self._startup: list[Hook] = []
        self._shutdown: list[Hook] = []
        self.template = Template()
        self.producer: Producer | None = None
        self.consumers: dict[str, PushConsumer] = {}
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None

    # --- declaration ----------------------------------------------------------------------------

    def configure(self, *, config_file: str | Path | None = None, **options: Any) -> None:
        """Override settings before start (``apogee run --config/--namesrv`` use this)."""
        if config_file is not None:
            self._config_file = config_file
        self._explicit.update(options)

    def settings(self, environ: Mapping[str, str] | None = None) -> ClientSettings:
        """The resolved producer and consumer configuration (``ConfigError`` when invalid)."""
        settings = resolve(
            environ=os.environ if environ is None else environ,
            config_file=self._config_file,
            explicit=self._explicit,
        )
        for config in (settings.producer, settings.consumer):
            if not config.instance_name:
                config.instance_name = self._instance_name
        return settings

    def listener(
        self,
        topic: str,
        *,
        group: str,
        tag: str | None = None,
        sql: str | None = None,
        orderly: bool = False,
        **options: Any,
    ) -> Callable[[F], F]:
        """Declare a listener (a function, ``async def``, or class with ``on_message``).

        ``tag``: a tag expression (``"TagA || TagB"``, default ``*``); ``sql``: an SQL92
        selector instead (the broker needs ``enablePropertyFilter=true``).  ``orderly``:
        one queue's messages one at a time, in order.  ``options``: ``ConsumerConfig`` fields
        for this listener's consumer (``max_reconsume_times``, ``consume_thread_max``,
        ``consume_from_where``...).  One listener per consumer group.
        """
        unknown = sorted(k for k in options if k not in _CONSUMER_FIELDS or k == "group")
        if unknown:
            raise ConfigError(f"unknown consumer options {unknown} for the listener of {group!r}")

        def register(target: F) -> F:
            existing = self.listeners.get(group)
            if existing is not None:
                raise ConfigError(
                    f"consumer group {group!r} already has a listener ({existing.name} on {existing.topic}); "
                    f"{getattr(target, '__qualname__', target)!r} needs a group of its own: "
                    "the consumers of one group must share one subscription"
                )
            if self._running:
                raise ClientStateError("declare listeners before the application starts")
            self.listeners[group] = declare(
                target, topic=topic, group=group, tag=tag, sql=sql, orderly=orderly, options=options
            )
            return target

        return register

    def on_startup(self, hook: F) -> F:
        """Run ``hook()`` (plain or async) once the clients are started."""
        self._startup.append(hook)  # type: ignore[arg-type]
        return hook

    def on_shutdown(self, hook: F) -> F:
        """Run ``hook()`` (plain or async) before the clients stop."""
        self._shutdown.append(hook)  # type: ignore[arg-type]
        return hook

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    async def start(self) -> App:
        if self._running:
            return self
        settings = self.settings()
        producer = Producer(config=settings.producer)
        self.producer = producer
        try:
            await producer.start()
            self.template.bind(producer)  # listeners may send as soon as their consumer runs
            for spec in self.listeners.values():
                config = consumer_config(settings.consumer, spec.group, spec.options)
                consumer = PushConsumer(
                    config=config, listener=make_listener(spec, config.max_reconsume()), orderly=spec.orderly
                )
                consumer.subscribe(spec.topic, spec.expression, expression_type=spec.expression_type)
                self.consumers[spec.group] = consumer
                await consumer.start()
            await self._check_topics(settings)
            self._running = True
            for hook in self._startup:
                await _call(hook)
        except BaseException:
            self._running = False
            await self._stop_clients()
            raise
        log.info(
            "app %s started: producer %s, %d listener(s)%s",
            self.name,
            producer.group,
            len(self.listeners),
            "".join(f"\n  {spec.describe()}" for spec in self.listeners.values()),
        )
        return self

    async def _check_topics(self, settings: ClientSettings) -> None:
        """Fail the start, in one line, on a NameServer nobody answers or a missing topic."""
        namesrv = settings.producer.namesrv_addr
        missing = []
        for group, consumer in self.consumers.items():
            topic = self.listeners[group].topic
            try:
                queues = await consumer.topic_queues(topic)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise NameServerUnreachableError(
                    f"cannot reach the NameServer at {namesrv} ({exc}): is it running? "
                    "Set NAMESRV_ADDR, namesrvAddr in the config file, or App(namesrv_addr=...)"
                ) from None
            if not queues:
                missing.append(topic)
        if missing:
            topics = ", ".join(dict.fromkeys(missing))
            first = missing[0]
            raise TopicMissingError(
                f"topic {topics} does not exist on the NameServer {namesrv}: create it with "
                f"`apogee admin update-topic -n '{namesrv}' -t {first}`, "
                "or enable autoCreateTopicEnable on the broker and send to it first"
            )

    async def stop(self) -> None:
        """Shutdown hooks, then consumers (drained, offsets committed), then the producer."""
        if not self._running:
            return
        self._running = False
        for hook in self._shutdown:
            try:
                await _call(hook)
            except Exception:
                log.exception("shutdown hook %r of app %s failed", hook, self.name)
        await self._stop_clients()
        log.info("app %s stopped", self.name)

    async def _stop_clients(self) -> None:
        self.template.bind(None)
        consumers, self.consumers = list(self.consumers.values()), {}
        results = await asyncio.gather(*(c.shutdown() for c in consumers), return_exceptions=True)
        for consumer, result in zip(consumers, results, strict=True):
            if isinstance(result, BaseException):
                log.error("stopping consumer %s failed: %r", consumer.group, result)
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.shutdown()

    async def __aenter__(self) -> App:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- running until told to stop ----------------------------------------------------------------

    def request_stop(self) -> None:
        """Make ``serve()``/``run()`` stop the application (from any thread or a signal)."""
        loop, event = self._loop, self._stop_requested
        if loop is None or event is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(event.set)

    async def serve(self, on_ready: Callable[[App], Any] | None = None) -> None:
        """Start, call ``on_ready(app)``, wait for SIGINT/SIGTERM or ``request_stop()``, stop."""
        loop = self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        signals = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self.start()
            try:
                if on_ready is not None:
                    on_ready(self)
                assert self._stop_requested is not None
                await self._stop_requested.wait()
            finally:
                await self.stop()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop_requested is not None and self._stop_requested.is_set():
            log.warning("app %s is already stopping (waiting up to drain_timeout_ms for listeners)", self.name)
            return
        log.info("app %s: %s received, stopping", self.name, sig.name)
        self.request_stop()

    def run(self, on_ready: Callable[[App], Any] | None = None) -> None:
        """Run the application in this thread until SIGINT/SIGTERM (``request_stop()`` elsewhere)."""
        run_loop(self.serve(on_ready))


async def _call(hook: Callable[[], Awaitable[Any] | Any]) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result
