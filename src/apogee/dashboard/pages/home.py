"""``/``: where to go, and whether the NameServer answers."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.web import NavEntry, render

NAV: NavEntry | None = None  # the brand link in the layout leads here


async def home(request: Request) -> Response:
    return render(request, "home/index.html", {"title": "Overview"})


routes: list[BaseRoute] = [Route("/", home, name="home")]
