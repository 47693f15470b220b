"""The layout every page shares: the nav, the NameServer, pages served from the dashboard."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Cluster


def test_the_layout_names_the_nameserver_and_links_every_page(page: Page, cluster: Cluster) -> None:
    page.goto("/")
    expect(page.locator("header .namesrv")).to_contain_text(cluster.namesrv.addr)
    nav = page.locator("header nav a")
    expect(nav.filter(has_text="Topics")).to_have_attribute("href", "/topics")
    nav.filter(has_text="Cluster").click()
    expect(page).to_have_url(f"{cluster.url}/cluster")
    expect(page.locator("header nav a.active")).to_have_text("Cluster")
