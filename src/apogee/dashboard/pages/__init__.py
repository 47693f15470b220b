"""The dashboard's pages: one module per area, each with ``routes`` (its HTML pages and the
``/api/...`` JSON they poll, side by side) and ``NAV`` (its entry in the layout's nav, or None
for a module without one).  ``PAGES`` is the one list the app is built from: a new area is
one module and one line here."""

from __future__ import annotations

from types import ModuleType

from starlette.routing import BaseRoute

from apogee.dashboard.pages import charts, cluster, groups, home, messages, producers, topics
from apogee.dashboard.web import NavEntry

PAGES: tuple[ModuleType, ...] = (
    home,
    cluster,
    topics,
    producers,
    groups, messages, charts,
)


def page_routes(pages: tuple[ModuleType, ...] = PAGES) -> list[BaseRoute]:
    return [route for page in pages for route in page.routes]


def nav_entries(pages: tuple[ModuleType, ...] = PAGES) -> list[NavEntry]:
    entries: list[NavEntry] = [page.NAV for page in pages if page.NAV is not None]
    return sorted(entries, key=lambda e: e.order)
