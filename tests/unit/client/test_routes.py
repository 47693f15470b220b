"""The route cache the producer and the Spark sink share, with a NameServer stand-in."""

from __future__ import annotations

import asyncio

import pytest

from apogee.client.routes import TopicRoutes
from apogee.common import constants as c
from apogee.errors import NoRouteError
from apogee.remoting.bodies.route import BrokerData, QueueData, TopicRouteData

TBW102_ROUTE = TopicRouteData(
    [QueueData("a", 8, 8, c.PERM_READ | c.PERM_WRITE | c.PERM_INHERIT)], [BrokerData("c", "a", {0: "127.0.0.1:1"})]
)


class NameServer:
    def __init__(self, known: dict[str, TopicRouteData]) -> None:
        self.known = known
        self.asked: list[str] = []
        self.gate: asyncio.Event | None = None

    async def fetch(self, topic: str) -> TopicRouteData | None:
        self.asked.append(topic)
        if self.gate is not None:
            await self.gate.wait()
        return self.known.get(topic)


async def test_an_unknown_topic_borrows_the_default_topics_route() -> None:
    ns = NameServer({c.TBW102: TBW102_ROUTE})
    routes = TopicRoutes(ns.fetch, "ns")
    info = await routes.publish_info("New", c.TBW102, 4)
    assert info.from_default_topic and [q.queue_id for q in info.queues] == [0, 1, 2, 3]
    assert ns.asked == ["New", c.TBW102]
    assert routes.master_addr("a") == "127.0.0.1:1" and routes.routes["New"].queue_datas[0].perm & c.PERM_INHERIT == 0
    with pytest.raises(NoRouteError, match="no route for topic 'Other'"):
        await TopicRoutes(NameServer({}).fetch, "ns").publish_info("Other", c.TBW102, 4)


async def test_concurrent_fetches_of_a_topic_share_one_request() -> None:
    ns = NameServer({"T": TBW102_ROUTE})
    ns.gate = asyncio.Event()
    routes = TopicRoutes(ns.fetch, "ns")
    waiting = [asyncio.ensure_future(routes.update("T")) for _ in range(3)]
    await asyncio.sleep(0)
    ns.gate.set()
    assert await asyncio.gather(*waiting) == [True, True, True]
    assert ns.asked == ["T"]


async def test_a_route_older_than_max_age_is_fetched_again() -> None:
    ns = NameServer({"T": TBW102_ROUTE})
    routes = TopicRoutes(ns.fetch, "ns")
    await routes.publish_info("T", c.TBW102, 4, max_age_s=60)
    await routes.publish_info("T", c.TBW102, 4, max_age_s=60)
    assert ns.asked == ["T"]
    routes.fetched_at["T"] -= 61
    await routes.publish_info("T", c.TBW102, 4, max_age_s=60)
    assert ns.asked == ["T", "T"]


async def test_listeners_hear_of_new_brokers_and_changed_routes() -> None:
    heard: list[str] = []
    ns = NameServer({"T": TBW102_ROUTE})
    routes = TopicRoutes(
        ns.fetch, "ns", on_new_broker=lambda: heard.append("broker"),
        on_route_changed=lambda topic, route, old: heard.append(f"route {topic}"),
    )
    await routes.update("T")
    await routes.update("T")  # the same route again: nothing new
    assert heard == ["broker", "route T"]
