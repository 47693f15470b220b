"""``/producers``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.web import NavEntry, render

NAV: NavEntry | None = NavEntry("Producers", "/producers", 40)


async def index(request: Request) -> Response:
    return render(request, "producers/index.html", {"title": "Producers"})


routes: list[BaseRoute] = [Route("/producers", index, name="producers")]
