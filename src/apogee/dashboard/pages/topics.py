"""``/topics``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.web import NavEntry, render

NAV: NavEntry | None = NavEntry("Topics", "/topics", 20)


async def index(request: Request) -> Response:
    return render(request, "topics/index.html", {"title": "Topics"})


routes: list[BaseRoute] = [Route("/topics", index, name="topics")]
