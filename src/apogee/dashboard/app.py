"""``create_app(settings)``: the dashboard as an ASGI application (Starlette).

Routes come from the page modules (``pages.PAGES``), plus ``/jobs/{id}`` (progress of long
operations) and ``/static`` (the stylesheet, ``app.js`` and the vendored uPlot: every asset is
served from the package, nothing from elsewhere).  Apogee failures become the page's banner
or a JSON error through ``errors.describe`` (``handle_error``).  The shared context
(``context.py``) opens at start and closes at stop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from apogee.dashboard import jobs
from apogee.dashboard.auth import AccessMiddleware
from apogee.dashboard.context import DashboardContext
from apogee.dashboard.errors import BadInput, Problem, describe
from apogee.dashboard.pages import nav_entries, page_routes
from apogee.dashboard.settings import DashboardSettings
from apogee.dashboard.web import STATIC_DIR, json_response, render
from apogee.errors import ApogeeError


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(("/api/", "/jobs/")) or "application/json" in request.headers.get(
        "accept", ""
    ).split(",")[0]


def problem_response(request: Request, problem: Problem) -> Response:
    """The answer for a request that failed as a whole: the error page (layout and banner) or,
    for the JSON endpoints, ``{"error": problem}``."""
    if wants_json(request):
        return json_response({"error": problem.to_json()}, problem.status)
    return render(request, "error.html", {"title": problem.title}, problems=[problem], status=problem.status)


async def handle_error(request: Request, exc: Exception) -> Response:
    problem = describe(exc)
    if problem.status >= 500:  # a server gone or unreachable: what is cached may be stale too
        request.app.state.ctx.invalidate()
    return problem_response(request, problem)


async def handle_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    title = "Not found" if exc.status_code == 404 else f"HTTP {exc.status_code}"
    return problem_response(request, Problem(title, str(exc.detail), exc.status_code))


def create_app(settings: DashboardSettings) -> Starlette:
    ctx = DashboardContext(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await ctx.start()
        try:
            yield
        finally:
            await ctx.close()

    routes = [
        *page_routes(),
        *jobs.routes,
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(AccessMiddleware, username=settings.username, password=settings.password)],
        exception_handlers={
            ApogeeError: handle_error, BadInput: handle_error, HTTPException: handle_http, Exception: handle_error,
        },
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.nav = nav_entries()
    return app
