"""``/cluster``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.web import NavEntry, render

NAV: NavEntry | None = NavEntry("Cluster", "/cluster", 10)


async def index(request: Request) -> Response:
    return render(request, "cluster/index.html", {"title": "Cluster"})


routes: list[BaseRoute] = [Route("/cluster", index, name="cluster")]
