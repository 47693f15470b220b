"""ClientInstance (RocketMQ's MQClientInstance): what producers and consumers of one client id share.

* NameServer access with failover: one NameServer is used until it fails, then the next;
* the topic route cache, refreshed every ``poll_name_server_interval_ms``, on demand, and soon
  after a broker connection drops (so sends and consumers move off a broker that went away);
* heartbeats to every broker every ``heartbeat_broker_interval_ms`` (and when a consumer
  starts), which also tell brokers the consumers' subscriptions;
* periodic offset persistence for every consumer;
* requests brokers send to clients: NOTIFY_CONSUMER_IDS_CHANGED (rebalance now),
  RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO, CHECK_TRANSACTION_STATE,
  PUSH_REPLY_MESSAGE_TO_CLIENT (the reply to a request of a producer here: ``requests``);
* clean shutdown: UNREGISTER_CLIENT to every broker, then the connections close.

Producers and consumers created with the same ``client_id`` on one event loop share one
instance (and so one connection per broker), as in RocketMQ; each client object gets its own
id by default (see ``ClientConfig.instance_name``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from apogee.client.api import ClientAPI
from apogee.client.config import ClientConfig
from apogee.client.request import RequestTable, decode_pushed_reply
from apogee.client.routes import TopicPublishInfo as TopicPublishInfo
from apogee.client.routes import TopicRoutes
from apogee.client.routes import publish_queues as publish_queues
from apogee.client.routes import subscribe_queues as subscribe_queues
from apogee.common import constants as c
from apogee.common.host import local_ip
from apogee.common.lenient_json import loads
from apogee.common.message import MessageQueue
from apogee.common.message_codec import decode_record
from apogee.errors import ApogeeError, ClientStateError, ConnectionClosedError, RequestTimeoutError
from apogee.remoting.bodies.consumer_info import ConsumerRunningInfo
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData
from apogee.remoting.bodies.route import TopicRouteData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.consumer import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from apogee.remoting.server import RequestDispatcher
from apogee.remoting.signing import Signer
from apogee.remoting.tls import client_tls

log = logging.getLogger("apogee.client.instance")
T = TypeVar("T")


class ConsumerHandle(Protocol):
    """What the instance needs from a consumer."""

    group: str

    def subscribed_topics(self) -> set[str]: ...
    def consumer_data(self) -> ConsumerData: ...
    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    def trigger_rebalance(self) -> None: ...
    async def persist_offsets(self) -> None: ...
    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...
    def running_info(self, namesrvs: list[str], jstack: bool) -> ConsumerRunningInfo: ...


class ProducerHandle(Protocol):
    group: str

    def publish_topics(self) -> set[str]: ...


def now_ms() -> int:
    return int(time.time() * 1000)


class ClientInstance:
    _registry: dict[tuple[object, ...], ClientInstance] = {}

    def __init__(self, config: ClientConfig) -> None:
        config.resolve_identity(local_ip)
        config.validate()
        self.config = config
        self.client_id = config.client_id()
        self.dispatcher = RequestDispatcher()
        self.dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify_ids_changed)
        self.dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self.dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly)
        self.dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)
        self.dispatcher.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_reply)
        # Requests of this client's producers waiting for their reply (request-reply).
        self.requests = RequestTable()
        credentials = config.credentials()
        self.remoting = RemotingClient(
            config.remoting, self.dispatcher, on_connection_closed=self._connection_closed, tls=client_tls(config.tls),
            signer=Signer(credentials) if credentials is not None else None,
        )
        self.api = ClientAPI(self.remoting, config.request_timeout_ms)
        self._namesrvs = config.namesrv_list()
        self._namesrv_index = random.randrange(len(self._namesrvs))
        # The route cache (shared with the producers' sender); its tables under their old names.
        self.route_table = TopicRoutes(
            self.fetch_route,
            ";".join(self._namesrvs),
            on_new_broker=self._new_broker,
            on_route_changed=self._route_changed,
        )
        self.routes = self.route_table.routes
        self.broker_addrs = self.route_table.broker_addrs
        self.publish_infos = self.route_table.publish_infos
        self.producers: dict[str, ProducerHandle] = {}
        self.consumers: dict[str, ConsumerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._heartbeat_lock: asyncio.Lock | None = None
        self._refresh_soon: asyncio.TimerHandle | None = None
        self._refs = 0
        self._key: tuple[object, ...] | None = None
        self.running = False

    # --- lifecycle and sharing ----------------------------------------------------------------

    @classmethod
    async def acquire(cls, config: ClientConfig) -> ClientInstance:
        """The running instance for ``config``'s client id on this loop, started if new."""
        config.resolve_identity(local_ip)
        # Clients with other credentials or TLS settings never share an instance: its
        # connections sign and encrypt for it.
        tls = config.tls.key() if config.tls is not None and config.tls.enable else None
        key = (id(asyncio.get_running_loop()), config.client_id(), config.access_key, tls)
        instance = cls._registry.get(key)
        if instance is None or not instance.running:
            instance = cls(config)
            instance._key = key
            cls._registry[key] = instance
            await instance.start()
        instance._refs += 1
        return instance

    async def release(self) -> None:
        """Drop one reference; the last one shuts the instance down."""
        self._refs -= 1
        if self._refs <= 0:
            await self.shutdown()

    async def start(self) -> None:
        if self.running:
            return
        self.running = True
        self._heartbeat_lock = asyncio.Lock()
        self._tasks = [
            asyncio.create_task(
                self._periodic(self.config.poll_name_server_interval_ms, self.update_all_routes, "route refresh")
            ),
            asyncio.create_task(
                self._periodic(self.config.heartbeat_broker_interval_ms, self.heartbeat_all, "heartbeat")
            ),
            asyncio.create_task(
                self._periodic(
                    self.config.persist_consumer_offset_interval_ms, self.persist_all_offsets, "offset persist"
                )
            ),
        ]
        log.info("client instance %s started (NameServers %s)", self.client_id, ";".join(self._namesrvs))

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        if self._key is not None and self._registry.get(self._key) is self:
            del self._registry[self._key]
        if self._refresh_soon is not None:
            self._refresh_soon.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.route_table.cancel_fetches()
        self.requests.fail_all(f"client instance {self.client_id} shut down before the reply came")
        await self.remoting.close()
        log.info("client instance %s shut down", self.client_id)

    async def _periodic(self, interval_ms: int, action: Callable[[], Awaitable[Any]], what: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed", what)

    # --- registration -------------------------------------------------------------------------

    def register_producer(self, producer: ProducerHandle) -> None:
        if producer.group in self.producers:
            raise ClientStateError(
                f"producer group {producer.group!r} is already registered in client {self.client_id}; "
                "give each producer of a group its own instance_name"
            )
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerHandle) -> None:
        if consumer.group in self.consumers:
            raise ClientStateError(
                f"consumer group {consumer.group!r} is already registered in client {self.client_id}; "
                "give each consumer of a group its own instance_name"
            )
        self.consumers[consumer.group] = consumer

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister(group, None)

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister(None, group)

    async def _unregister(self, producer_group: str | None, consumer_group: str | None) -> None:
        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            except ApogeeError as exc:
                log.warning("unregister %s from %s failed: %s", producer_group or consumer_group, addr, exc)

        addrs = [a for table in self.broker_addrs.values() for a in table.values()]
        await asyncio.gather(*(one(a) for a in addrs))

    # --- NameServers and routes ---------------------------------------------------------------

    async def invoke_namesrv(self, call: Callable[[str], Awaitable[T]]) -> T:
        """Run ``call(addr)`` on the current NameServer, failing over to the others in turn."""
        last: Exception | None = None
        for _ in range(len(self._namesrvs)):
            addr = self._namesrvs[self._namesrv_index % len(self._namesrvs)]
            try:
                return await call(addr)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                last = exc
                self._namesrv_index += 1
                log.warning("NameServer %s failed (%s); trying the next one", addr, exc)
        assert last is not None
        raise last

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        return await self.invoke_namesrv(lambda addr: self.api.get_route(addr, topic))

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4
    ) -> bool:
        """Refresh one topic's route (``TopicRoutes.update``); True when a route is known."""
        return await self.route_table.update(
            topic, default_topic=default_topic, default_queue_nums=default_queue_nums
        )

    def _new_broker(self) -> None:
        if self.running and (self.consumers or self.producers):
            # A broker we never told about ourselves: heartbeat now, not in up to 30 s, so it
            # knows our consumer groups before anyone rebalances against it.
            self._spawn(self.heartbeat_all())

    def _route_changed(self, topic: str, route: TopicRouteData, old: TopicRouteData | None) -> None:
        subs = subscribe_queues(topic, route)
        for consumer in list(self.consumers.values()):
            if topic in consumer.subscribed_topics():
                consumer.update_subscribe_info(topic, subs)
        if old is not None and old != route:
            log.info("route of topic %s changed", topic)

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for p in self.producers.values():
            topics |= p.publish_topics()
        for consumer in self.consumers.values():
            topics |= consumer.subscribed_topics()
        return topics

    async def update_all_routes(self) -> None:
        for topic in sorted(self.topics_in_use()):
            try:
                ok = await self.update_topic_route(topic)
                if not ok and topic in self.routes and not self.publish_infos[topic].from_default_topic:
                    log.warning("the NameServer no longer knows topic %s", topic)
            except ApogeeError as exc:
                log.warning("route refresh of %s failed: %s", topic, exc)
        self.route_table.clean_offline_brokers()

    def _connection_closed(self, addr: str, conn: Connection) -> None:
        """A connection dropped: if it was a broker's, refresh routes soon (it may be gone)."""
        if addr not in self._namesrvs:
            self.refresh_routes_soon()

    def refresh_routes_soon(self) -> None:
        """Refresh every route in 0.5 s (at most one pending): a broker connection dropped, or a
        broker cannot be reached.  The NameServer drops a dead broker when its connection
        closes, which may come after the first refresh; so every later failure to reach the
        broker asks again, and a consumer moves to the slave in about a second, not at the
        next periodic refresh (``poll_name_server_interval_ms``, 30 s)."""
        if not self.running:
            return
        if (
            self._refresh_soon is None
            or self._refresh_soon.cancelled()
            or self._refresh_soon.when() < asyncio.get_running_loop().time()
        ):
            self._refresh_soon = asyncio.get_running_loop().call_later(0.5, self._refresh_after_loss)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.append(task)

        def done(t: asyncio.Task[Any]) -> None:
            if t in self._tasks:
                self._tasks.remove(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("background client task failed: %s", t.exception())

        task.add_done_callback(done)

    def _refresh_after_loss(self) -> None:
        if not self.running:
            return

        async def refresh() -> None:
            try:
                await self.update_all_routes()
            except Exception:
                log.exception("route refresh after a lost connection failed")
            for consumer in list(self.consumers.values()):
                consumer.trigger_rebalance()

        task = asyncio.create_task(refresh())
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def publish_info(self, topic: str, default_topic: str, default_queue_nums: int) -> TopicPublishInfo:
        """The publish info of ``topic``, fetched on first use; ``NoRouteError`` when none."""
        return await self.route_table.publish_info(topic, default_topic, default_queue_nums)

    async def subscribe_info(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (fetched when unknown); ``NoRouteError`` when none."""
        return await self.route_table.subscribe_info(topic)

    # --- broker addresses ---------------------------------------------------------------------

    def master_addr(self, broker_name: str) -> str | None:
        return self.route_table.master_addr(broker_name)

    def broker_addr_in_subscribe(self, broker_name: str, broker_id: int = c.MASTER_ID) -> tuple[str, bool] | None:
        """Where to pull when ``broker_id`` is suggested: (address, is a slave) (``routes.subscribe_addr``)."""
        return self.route_table.broker_addr_in_subscribe(broker_name, broker_id)

    async def find_read_addr(self, broker_name: str, topic: str | None = None) -> str:
        """The master's address, else a slave's, for reads of broker state (``routes.read_addr``)."""
        return await self.route_table.find_read_addr(broker_name, topic)

    async def find_master_addr(self, broker_name: str, topic: str | None = None) -> str:
        """The master address, refreshing ``topic``'s route once if it is unknown."""
        return await self.route_table.find_master_addr(broker_name, topic)

    async def any_broker_of_topic(self, topic: str) -> str:
        """Some broker serving ``topic`` (a master when possible), for group-level questions."""
        return await self.route_table.any_broker_of_topic(topic)

    # --- heartbeats ---------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            self.client_id,
            producer_groups=[*self.producers, c.CLIENT_INNER_PRODUCER_GROUP]
            if self.producers or self.consumers
            else [],
            consumers=[consumer.consumer_data() for consumer in self.consumers.values()],
        )

    async def heartbeat_all(self) -> None:
        """Send one heartbeat to every known broker (masters only when there are no consumers)."""
        assert self._heartbeat_lock is not None
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            if not data.producer_groups and not data.consumers:
                return
            body = data.encode()
            addrs = [
                addr
                for table in self.broker_addrs.values()
                for bid, addr in table.items()
                if data.consumers or bid == c.MASTER_ID
            ]

            async def one(addr: str) -> None:
                try:
                    await self.api.heartbeat(addr, body)
                except ApogeeError as exc:
                    log.warning("heartbeat to %s failed: %s", addr, exc)

            await asyncio.gather(*(one(a) for a in addrs))

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_offsets()
            except ApogeeError as exc:
                log.warning("persisting offsets of %s failed: %s", consumer.group, exc)

    # --- requests from brokers ----------------------------------------------------------------

    def _on_notify_ids_changed(self, conn: Connection, req: RemotingCommand) -> None:
        group = (req.ext_fields or {}).get("consumerGroup", "")
        consumer = self.consumers.get(group)
        log.info("broker %s:%d says the consumers of %s changed", *conn.peer, group)
        if consumer is not None:
            consumer.trigger_rebalance()
        return None

    def _on_reset_offset(self, conn: Connection, req: RemotingCommand) -> None:
        ext = req.ext_fields or {}
        topic, group = ext.get("topic", ""), ext.get("group", "")
        consumer = self.consumers.get(group)
        if consumer is None or not req.body:
            return None
        try:
            consumer.reset_offset(topic, parse_reset_offset_body(req.body_bytes()))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("malformed RESET_CONSUMER_CLIENT_OFFSET body: %s", exc)
        return None

    def _on_running_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: the group's ConsumerRunningInfo (RocketMQ's shape)."""
        h = GetConsumerRunningInfoRequestHeader.decode(req.ext_fields)
        consumer = self.consumers.get(h.consumer_group)
        if consumer is None:
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{h.consumer_group}> not exist in this consumer"
            )
        info = consumer.running_info(self._namesrvs, h.jstack_enable)
        return req.response(ResponseCode.SUCCESS, body=info.encode())

    async def _on_consume_directly(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the message in the body through the group's listener; a
        ConsumeMessageDirectlyResult says how it ended (push consumers only, as RocketMQ)."""
        h = ConsumeMessageDirectlyResultRequestHeader.decode(req.ext_fields)
        consume = getattr(self.consumers.get(h.consumer_group), "consume_directly", None)
        if consume is None:
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{h.consumer_group}> not exist in this consumer"
            )
        try:
            msg = decode_record(req.body_bytes())
        except ValueError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"undecodable message in the request: {exc}")
        result = await consume(msg, h.broker_name or "")
        return req.response(ResponseCode.SUCCESS, body=result.encode())

    def _on_check_transaction(self, conn: Connection, req: RemotingCommand) -> None:
        """Hand the check to the producer of the half message's group, if it can answer."""
        if not req.body:
            return None
        try:
            msg = decode_record(req.body_bytes())
        except ValueError as exc:
            log.warning("undecodable CHECK_TRANSACTION_STATE body from %s:%d: %s", *conn.peer, exc)
            return None
        group = msg.properties.get(c.PROPERTY_PRODUCER_GROUP, "")
        producer = self.producers.get(group)
        handler = getattr(producer, "check_transaction_state", None)
        if handler is None:
            log.warning("transaction check for group %s, which no transaction producer here serves", group)
            return None
        addr = f"{conn.peer[0]}:{conn.peer[1]}"
        result = handler(addr, msg, dict(req.ext_fields or {}))
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(result)
            self._tasks.append(task)
            task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
        return None


    def _on_reply(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: a reply to one of our requests, for its waiter."""
        try:
            reply = decode_pushed_reply(req, now_ms())
        except (ApogeeError, ValueError) as exc:
            log.warning("undecodable reply pushed by %s:%d: %s", *conn.peer, exc)
            return req.response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = reply.properties.get(c.PROPERTY_CORRELATION_ID, "")
        if not self.requests.complete(correlation_id, reply):
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s, reply from host: %s:%d",
                correlation_id, *reply.born_host,
            )
        return req.response(ResponseCode.SUCCESS)


def parse_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """ResetOffsetBody in either shape: Java's map with MessageQueue keys (as a list of
    entries here) or the C++ list ``[{"brokerName","queueId","topic","offset"}]``."""
    obj = loads(body)
    table = obj.get("offsetTable") if isinstance(obj, dict) else None
    out: dict[MessageQueue, int] = {}
    items: Iterable[Any]
    if isinstance(table, list):
        items = table
    elif isinstance(table, dict):
        items = [{**(k if isinstance(k, dict) else {}), "offset": v} for k, v in table.items()]
    else:
        items = []
    for item in items:
        mq = item.get("mq", item) if isinstance(item, dict) else {}
        out[MessageQueue(str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"]))] = int(item["offset"])
    return out
