"""The cluster page: the broker with its role, and its runtime figures and configuration."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Cluster, screenshot


def test_the_cluster_page_lists_the_broker_with_its_role(page: Page, cluster: Cluster) -> None:
    page.goto("/")
    page.get_by_role("navigation").get_by_role("link", name="Cluster").click()
    row = page.locator(f'tr[data-addr="{cluster.broker.addr}"]')
    expect(row.locator("td").first).to_have_text("broker-a")
    expect(row.locator(".tag.master")).to_have_text("master")
    expect(row).to_contain_text("ASYNC_MASTER")
    expect(row).to_contain_text("V4_9_8")
    expect(row).to_contain_text("0 slaves linked")
    expect(page.locator("h2")).to_contain_text("DefaultCluster")
    screenshot(page, "cluster")

    row.get_by_role("link", name=cluster.broker.addr).click()
    expect(page.locator("h1")).to_contain_text("broker-a")
    expect(page.locator("#broker-config tr", has_text="brokerName")).to_contain_text("broker-a")
    expect(page.locator("#broker-info tr", has_text="brokerVersionDesc")).to_contain_text("V4_9_8")
    page.get_by_label("Filter runtime figures and settings").fill("tps")
    expect(page.locator("#broker-info tbody tr:visible", has_text="putTps")).to_have_count(1)
    expect(page.locator("#broker-info tbody tr:visible", has_text="commitLogMaxOffset")).to_have_count(0)
    screenshot(page, "broker")


def test_an_address_the_nameserver_does_not_list_is_not_contacted(page: Page, cluster: Cluster) -> None:
    page.goto(f"/cluster/broker/{cluster.namesrv.addr}")
    expect(page.locator(".banner.error")).to_contain_text("is not a broker the NameServer lists")
