"""Browser tests of the dashboard: Debian's Chromium, driven by Playwright, against real
NameServer, broker and ``apogee dashboard`` processes on free loopback ports.

* ``chromium``: the one browser, launched from ``/usr/bin/chromium`` (``make test`` installs
  it; never ``playwright install``), headless, in a fresh profile.  It is kept across
  consecutive browser modules and closed before any other test runs on the worker:
  Playwright's sync API leaves its event loop marked as running in the thread, which would
  break the asyncio tests that follow (see ``pytest_runtest_teardown``).  So tests here are
  plain functions: set things up through the dashboard itself or the blocking client
  (``apogee.client.sync``), never ``asyncio.run``.
* ``cluster``: a NameServer, a broker and a dashboard shared by every browser module of the
  worker; a test that breaks its cluster (stops the broker) starts its own with
  ``start_cluster`` / ``start_dashboard``.
* ``page``: a fresh browser context (1280x800, ``base_url`` the shared dashboard) per test.
* ``screenshot(page, name)``: ``dashboard-<name>.png`` at 1280x800, into ``build/screenshots/``,
  or into the directory ``APOGEE_SCREENSHOTS`` names: ``make screenshots`` runs these tests
  with ``docs/images``, the pictures the docs show (a plain test run leaves the tree clean).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from tests.support.processes import ServerProcess, start_broker, start_namesrv

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 15_000  # one page action or expectation; a failure shows within seconds
_ROOT = Path(__file__).resolve().parents[2]
IMAGES = _ROOT / os.environ.get("APOGEE_SCREENSHOTS", "build/screenshots")
expect.set_options(timeout=TIMEOUT_MS)


class _Chromium:
    """The browser of this worker, started on first use (one Playwright driver, one Chromium)."""

    playwright: Playwright | None = None
    browser: Browser | None = None

    @classmethod
    def get(cls) -> Browser:
        if cls.browser is None:
            if not os.access(CHROMIUM, os.X_OK):
                pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install -y chromium)")
            cls.playwright = sync_playwright().start()
            # Playwright's own launch gives the browser a fresh temporary profile (user-data dir).
            cls.browser = cls.playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS)
            )
        return cls.browser

    @classmethod
    def close(cls) -> None:
        if cls.browser is not None:
            cls.browser.close()
            cls.browser = None
        if cls.playwright is not None:
            cls.playwright.stop()
            cls.playwright = None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a run of browser modules (the fixtures are torn down by then):
    close the browser, so the next module's asyncio tests find no running loop."""
    if nextitem is None or Path(str(nextitem.path)).parent != Path(__file__).parent:
        _Chromium.close()


@dataclass
class Cluster:
    namesrv: ServerProcess
    broker: ServerProcess
    dashboard: ServerProcess

    @property
    def url(self) -> str:
        return f"http://{self.dashboard.addr}"

    def close(self) -> None:
        for server in (self.dashboard, self.broker, self.namesrv):
            server.close()


def dashboard_process(namesrv: str, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    """``apogee dashboard`` as a user runs it, on a free loopback port (``with ... as d:``
    starts and stops it)."""
    return ServerProcess(["dashboard", "-n", namesrv, "--listen", "127.0.0.1:0", *extra], env=env)


def start_dashboard(namesrv: str, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    return dashboard_process(namesrv, *extra, env=env).start()


def start_cluster(root: Path, broker_conf: str = "") -> Cluster:
    namesrv = start_namesrv(root / "namesrv")
    broker = dashboard = None
    try:
        broker = start_broker(namesrv.addr, root / "store", broker_conf)
        dashboard = start_dashboard(namesrv.addr, "--sample-interval", "1")  # charts and group list: a tick a second
    except BaseException:
        for server in (broker, namesrv):
            if server is not None:
                server.close()
        raise
    return Cluster(namesrv, broker, dashboard)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_cluster(tmp_path_factory.mktemp("dashboard-cluster"), "brokerName=broker-a\n")
    yield started
    started.close()


@pytest.fixture
def chromium() -> Browser:
    return _Chromium.get()


@contextmanager
def open_page(browser: Browser, base_url: str, **options: Any) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies, 1280x800) whose relative URLs go to
    ``base_url``; ``options`` go to ``new_context`` (``http_credentials=...``)."""
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url, **options)  # type: ignore[arg-type]
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(chromium: Browser, cluster: Cluster) -> Iterator[Page]:
    """A fresh context and page on the shared dashboard (``page.goto("/topics")``)."""
    with open_page(chromium, cluster.url) as fresh:
        yield fresh


def screenshot(page: Page, name: str) -> Path:
    """The page as it is now, 1280x800, into ``IMAGES/dashboard-<name>.png``."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"dashboard-{name}.png"
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
    return path
