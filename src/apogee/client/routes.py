"""The route cache of a client: topic routes, broker addresses and publish queues.

One class for whoever sends or subscribes: a ``ClientInstance`` keeps one (fed by its
NameServers with failover), and so does each Spark worker process per NameServer list
(``apogee.spark.runtime``), so the producer and the Spark sink read queues and master
addresses from the same table through the same sender.

Routes come from ``fetch(topic)`` (None: the NameServer does not know the topic).  A
producer's unknown topic borrows the default topic's (TBW102's) route, its queues capped, so
the first send auto-creates the topic on the broker (RocketMQ's
``updateTopicRouteInfoFromNameServer(topic, true, producer)``).  Concurrent fetches of one
topic share one request.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.errors import NoRouteError
from apogee.remoting.bodies.route import QueueData, TopicRouteData

RouteFetch = Callable[[str], Awaitable[TopicRouteData | None]]


class TopicPublishInfo:
    """The writable queues of a topic, in route order, with the round-robin counter."""

    __slots__ = ("topic", "queues", "order_topic", "route", "counter", "from_default_topic")

    def __init__(
        self,
        topic: str,
        queues: list[MessageQueue],
        route: TopicRouteData,
        *,
        order_topic: bool = False,
        from_default_topic: bool = False,
    ) -> None:
        self.topic = topic
        self.queues = queues
        self.route = route
        self.order_topic = order_topic
        self.from_default_topic = from_default_topic
        self.counter = random.randrange(1 << 16)

    def ok(self) -> bool:
        return bool(self.queues)

    def next_counter(self) -> int:
        self.counter += 1
        return self.counter


def publish_queues(topic: str, route: TopicRouteData) -> tuple[list[MessageQueue], bool]:
    """RocketMQ's topicRouteData2TopicPublishInfo: writable queues of brokers with a master."""
    queues: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.isdigit():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        return queues, True
    masters = {b.broker_name for b in route.broker_datas if b.master_addr()}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if c.is_writeable(qd.perm) and qd.broker_name in masters:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return queues, False


def subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """The readable queues of a topic (what consumers balance over)."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if c.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


def subscribe_addr(addrs: dict[int, str], broker_id: int) -> tuple[str, bool] | None:
    """Where to pull from (RocketMQ ``findBrokerAddressInSubscribe(name, id, false)``): the
    address of ``broker_id``; for a slave id, else the next id; else any address of the
    broker (the lowest id: the master when it is there).  With whether it is a slave, so the
    pull leaves its commit offset out.  None when the broker has no address at all.

    This is how a consumer keeps reading from a slave while its master is gone (the route
    lists the slave only), and returns to the master once the route names it again."""
    addr = addrs.get(broker_id)
    slave = broker_id != c.MASTER_ID
    if addr is None and slave:
        addr = addrs.get(broker_id + 1)
    if addr is None:
        if not addrs:
            return None
        first = min(addrs)
        addr, slave = addrs[first], first != c.MASTER_ID
    return addr, slave


def read_addr(addrs: dict[int, str]) -> str | None:
    """Where to read a broker's state from (consumer offsets, queue bounds, lookups,
    statistics): its master, else one of its slaves (RocketMQ ``findBrokerAddressInAdmin``;
    RemoteBrokerOffsetStore asks ``findBrokerAddressInSubscribe(name, MASTER_ID, ...)``, the
    same rule).  Writes (sends, locks, topic changes) go to the master only."""
    found = subscribe_addr(addrs, c.MASTER_ID)
    return found[0] if found is not None else None


def borrowed_route(base: TopicRouteData, default_queue_nums: int) -> TopicRouteData:
    """The route a topic unknown to the NameServer borrows from the default topic: the same
    brokers, at most ``default_queue_nums`` queues each, without the inherit bit."""
    return TopicRouteData(
        queue_datas=[
            QueueData(
                q.broker_name,
                min(default_queue_nums, q.read_queue_nums),
                min(default_queue_nums, q.read_queue_nums),
                q.perm & ~c.PERM_INHERIT,
                q.topic_sys_flag,
            )
            for q in base.queue_datas
        ],
        broker_datas=base.broker_datas,
    )


class TopicRoutes:
    """Routes by topic, master addresses by broker, publish queues by topic.

    ``on_new_broker()`` runs when a route names a broker address not seen before (a client
    instance heartbeats it at once); ``on_route_changed(topic, route)`` when a topic's route
    is new or differs from the cached one (consumers rebalance).
    """

    def __init__(
        self,
        fetch: RouteFetch,
        namesrvs: str,
        *,
        on_new_broker: Callable[[], None] | None = None,
        on_route_changed: Callable[[str, TopicRouteData, TopicRouteData | None], None] | None = None,
    ) -> None:
        self._fetch = fetch
        self._namesrvs = namesrvs
        self._on_new_broker = on_new_broker
        self._on_route_changed = on_route_changed
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.publish_infos: dict[str, TopicPublishInfo] = {}
        self.fetched_at: dict[str, float] = {}  # time.monotonic() of each topic's last fetch
        self._fetches: dict[str, asyncio.Future[bool]] = {}

    async def update(self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4) -> bool:
        """Refresh one topic's route; concurrent callers share one request.

        With ``default_topic`` (a producer's TBW102), a topic the NameServer does not know
        gets the default topic's route (``borrowed_route``).  Returns True when a route is
        known.
        """
        pending = self._fetches.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._fetches[topic] = fut
        try:
            ok = await self._update(topic, default_topic, default_queue_nums)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        else:
            fut.set_result(ok)
            return ok
        finally:
            del self._fetches[topic]

    async def _update(self, topic: str, default_topic: str | None, default_queue_nums: int) -> bool:
        route = await self._fetch(topic)
        from_default = False
        if route is None and default_topic:
            base = await self._fetch(default_topic)
            if base is not None:
                from_default = True
                route = borrowed_route(base, default_queue_nums)
        if route is None:
            return False
        self.apply(topic, route, from_default)
        return True

    def apply(self, topic: str, route: TopicRouteData, from_default: bool = False) -> None:
        old = self.routes.get(topic)
        self.fetched_at[topic] = time.monotonic()
        new_broker = False
        for bd in route.broker_datas:
            known = self.broker_addrs.get(bd.broker_name)
            if known is None or set(bd.broker_addrs.values()) - set(known.values()):
                new_broker = True
            self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        if new_broker and self._on_new_broker is not None:
            self._on_new_broker()
        if old == route and topic in self.publish_infos:
            return
        self.routes[topic] = route
        queues, order = publish_queues(topic, route)
        previous = self.publish_infos.get(topic)
        info = TopicPublishInfo(topic, queues, route, order_topic=order, from_default_topic=from_default)
        if previous is not None:
            info.counter = previous.counter
        self.publish_infos[topic] = info
        if self._on_route_changed is not None:
            self._on_route_changed(topic, route, old)

    def clean_offline_brokers(self) -> None:
        """Forget brokers that no cached route names any more."""
        live: dict[str, set[str]] = {}
        for route in self.routes.values():
            for bd in route.broker_datas:
                live.setdefault(bd.broker_name, set()).update(bd.broker_addrs.values())
        for name in list(self.broker_addrs):
            if name not in live:
                del self.broker_addrs[name]

    async def publish_info(
        self, topic: str, default_topic: str, default_queue_nums: int, max_age_s: float | None = None
    ) -> TopicPublishInfo:
        """The publish info of ``topic``, fetched on first use (and again when older than
        ``max_age_s``, for a cache nobody refreshes periodically); ``NoRouteError`` when none."""
        info = self.publish_infos.get(topic)
        if info is not None and info.ok() and (
            max_age_s is None or time.monotonic() - self.fetched_at.get(topic, 0.0) < max_age_s
        ):
            return info
        await self.update(topic, default_topic=default_topic, default_queue_nums=default_queue_nums)
        info = self.publish_infos.get(topic)
        if info is None or not info.ok():
            raise NoRouteError(
                f"no route for topic {topic!r}: the NameServers ({self._namesrvs}) know neither it "
                f"nor {default_topic} with a writable master (create the topic, or enable autoCreateTopicEnable)"
            )
        return info

    async def subscribe_info(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (fetched when unknown); ``NoRouteError`` when none."""
        route = self.routes.get(topic)
        if route is None:
            await self.update(topic)
            route = self.routes.get(topic)
        if route is None:
            raise NoRouteError(f"no route for topic {topic!r}: does it exist?")
        return subscribe_queues(topic, route)

    def master_addr(self, broker_name: str) -> str | None:
        table = self.broker_addrs.get(broker_name)
        return table.get(c.MASTER_ID) if table else None

    def broker_addr_in_subscribe(self, broker_name: str, broker_id: int = c.MASTER_ID) -> tuple[str, bool] | None:
        """Where to pull ``broker_name``'s queues from when ``broker_id`` is suggested
        (``subscribe_addr``): (address, is a slave), or None when the broker is unknown."""
        table = self.broker_addrs.get(broker_name)
        return subscribe_addr(table, broker_id) if table else None

    async def find_read_addr(self, broker_name: str, topic: str | None = None) -> str:
        """The master's address, else a slave's (``read_addr``), refreshing ``topic``'s route
        once if the broker has none."""
        addr = read_addr(self.broker_addrs.get(broker_name) or {})
        if addr is None and topic is not None:
            await self.update(topic)
            addr = read_addr(self.broker_addrs.get(broker_name) or {})
        if addr is None:
            raise NoRouteError(f"broker {broker_name!r} has no known address")
        return addr

    async def find_master_addr(self, broker_name: str, topic: str | None = None) -> str:
        """The master address, refreshing ``topic``'s route once if it is unknown."""
        addr = self.master_addr(broker_name)
        if addr is None and topic is not None:
            await self.update(topic)
            addr = self.master_addr(broker_name)
        if addr is None:
            raise NoRouteError(f"broker {broker_name!r} has no known master address")
        return addr

    async def any_broker_of_topic(self, topic: str) -> str:
        """Some broker serving ``topic`` (a master when possible), for group-level questions."""
        route = self.routes.get(topic)
        if route is None:
            await self.update(topic)
            route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            raise NoRouteError(f"no broker serves topic {topic!r}")
        bd = random.choice(route.broker_datas)
        addr = read_addr(bd.broker_addrs)
        if addr is None:
            raise NoRouteError(f"broker {bd.broker_name} of topic {topic!r} has no address")
        return addr

    def cancel_fetches(self) -> None:
        """Cancel the route fetches under way (shutdown)."""
        for fut in list(self._fetches.values()):
            fut.cancel()
