"""``/charts``: put and get TPS per broker and per topic, and the lag of consumer groups, over
the last hour, drawn with uPlot and updated in place: the page polls ``/api/charts`` (the
sampler's ``Timeline``\\ s as JSON) every sample interval.

Which lines: every broker; the topics named in ``topics`` (the sampler starts sampling them)
and the busiest ones the sampler charts anyway; the groups named in ``groups``, else the
``GROUPS_SHOWN`` groups with the largest lag now (system groups left out).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.context import context_of
from apogee.dashboard.lag import is_system_group
from apogee.dashboard.sampler import BROKER_GET, BROKER_PUT, GROUP_LAG, TOPIC_GET, TOPIC_PUT, Sampler
from apogee.dashboard.web import NavEntry, json_response, render

NAV: NavEntry | None = NavEntry("Charts", "/charts", 50)

GROUPS_SHOWN = 10
MAX_NAMES = 50  # names taken from one request's ``topics`` or ``groups``

CHARTS = (  # id, title, unit
    (BROKER_PUT, "Put TPS per broker", "messages/s"),
    (BROKER_GET, "Get TPS per broker", "messages/s"),
    (TOPIC_PUT, "Put TPS per topic", "messages/s"),
    (TOPIC_GET, "Get TPS per topic", "messages/s"),
    (GROUP_LAG, "Consumer lag per group", "messages"),
)


def _names(request: Request, param: str) -> list[str]:
    text = request.query_params.get(param, "")
    return [n for n in dict.fromkeys(p.strip() for p in text.split(",")) if n][:MAX_NAMES]


def _chosen(sampler: Sampler, chart: str, asked: list[str]) -> list[str] | None:
    """The series of ``chart`` to send (None: all of them)."""
    latest = sampler.timelines[chart].latest()
    if chart in (TOPIC_PUT, TOPIC_GET):
        return list(dict.fromkeys([*asked, *(n for n, v in latest.items() if v is not None)]))
    if chart == GROUP_LAG:
        if asked:
            return asked
        lagging = sorted((v or 0.0, n) for n, v in latest.items() if not is_system_group(n))
        return [n for _, n in reversed(lagging[-GROUPS_SHOWN:])]
    return None


async def index(request: Request) -> Response:
    sampler = context_of(request).sampler
    return render(request, "charts/index.html", {
        "title": "Charts", "charts": CHARTS, "topics": ", ".join(_names(request, "topics")),
        "groups": ", ".join(_names(request, "groups")), "interval_ms": int(sampler.settings.interval_s * 1000),
        "history_min": int(sampler.settings.history_s // 60),
    })


async def data(request: Request) -> Response:
    """``{"interval_s", "ticks", "tick_ms", "errors", "charts": {id: {title, unit, times, series}}}``."""
    sampler = context_of(request).sampler
    topics, groups = _names(request, "topics"), _names(request, "groups")
    if topics:
        sampler.watch(topics)
    asked = {TOPIC_PUT: topics, TOPIC_GET: topics, GROUP_LAG: groups}
    charts = {
        chart: {"title": title, "unit": unit,
                **sampler.timelines[chart].data(_chosen(sampler, chart, asked.get(chart, []))).to_json()}
        for chart, title, unit in CHARTS
    }
    return json_response({"interval_s": sampler.settings.interval_s, "ticks": sampler.ticks,
                          "tick_ms": round(sampler.tick_seconds * 1000, 1),
                          "errors": sampler.errors[:5], "charts": charts})


routes: list[BaseRoute] = [
    Route("/charts", index, name="charts"),
    Route("/api/charts", data, name="charts_data"),
]
