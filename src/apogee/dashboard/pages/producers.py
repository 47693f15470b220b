"""``/producers``: the connections of a producer group on a topic's brokers
(GET_PRODUCER_CONNECTION_LIST, mqadmin producerConnection), and every producer group the
masters know with its clients (GET_ALL_PRODUCER_INFO, where the broker serves it)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.admin.groups import Connections
from apogee.dashboard.context import DashboardContext, context_of
from apogee.dashboard.errors import BadInput, Problem, attempt
from apogee.dashboard.pages.topics import cluster_view, topic_rows
from apogee.dashboard.web import NavEntry, json_response, render
from apogee.errors import RequestCodeNotSupportedError

NAV: NavEntry | None = NavEntry("Producers", "/producers", 40)


@dataclass
class ProducerGroup:
    """A producer group as GET_ALL_PRODUCER_INFO reports it, merged over the masters."""

    group: str
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)  # clientId -> its entry
    brokers: list[str] = field(default_factory=list)


async def producer_groups(ctx: DashboardContext) -> tuple[list[ProducerGroup], bool]:
    """Every producer group with live clients on some master, and whether every master
    answered 328 (an Apache RocketMQ broker before 4.9.4 does not serve it)."""

    async def load() -> tuple[list[ProducerGroup], bool]:
        masters = (await cluster_view(ctx)).masters()

        async def one(addr: str) -> dict[str, list[dict[str, Any]]] | None:
            try:
                return await ctx.admin.all_producers(addr)
            except RequestCodeNotSupportedError:
                return None

        answers = await asyncio.gather(*(one(addr) for addr in masters.values()))
        groups: dict[str, ProducerGroup] = {}
        for name, table in zip(masters, answers, strict=True):
            for group, clients in (table or {}).items():
                entry = groups.setdefault(group, ProducerGroup(group))
                entry.brokers.append(name)
                for client in clients:
                    entry.clients[str(client.get("clientId"))] = client
        return sorted(groups.values(), key=lambda g: g.group), all(a is not None for a in answers)

    return await ctx.cached("producers:groups", load)


async def index(request: Request) -> Response:
    ctx = context_of(request)
    group = request.query_params.get("group", "").strip()
    topic = request.query_params.get("topic", "").strip()
    problems: list[Problem] = []
    listed = await attempt(problems, "producer groups", producer_groups(ctx))
    rows = await attempt(problems, "topics", topic_rows(ctx))
    connections: Connections | None = None
    if group or topic:
        if not (group and topic):
            problems.append(Problem("Invalid input", "give both the producer group and the topic", 400))
        else:
            connections = await attempt(problems, "connections", ctx.admin.producer_connection(group, topic))
    return render(request, "producers/index.html", {
        "title": "Producers", "group": group, "topic": topic, "connections": connections,
        "groups": listed[0] if listed else [], "all_answered": listed[1] if listed else True,
        "topics": [r.name for r in rows[0] if r.kind == "normal"] if rows else [],
    }, problems=problems)


async def api_connections(request: Request) -> Response:
    group = request.query_params.get("group", "").strip()
    topic = request.query_params.get("topic", "").strip()
    if not (group and topic):
        raise BadInput("give both group and topic")
    conns = await context_of(request).admin.producer_connection(group, topic)
    return json_response({"group": group, "topic": topic, "connections": conns.clients})


routes: list[BaseRoute] = [
    Route("/producers", index, name="producers"),
    Route("/api/producers", api_connections, name="api_producers"),
]
