"""Live charts and the subscription group form, in Chromium, against the shared cluster.

The dashboard of ``conftest.cluster`` samples every second, so the charts get points in
seconds; the page polls ``/api/charts`` and redraws in place (no reload).
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from apogee.client.sync import SyncProducer
from apogee.common.message import Message
from tests.browser.conftest import Cluster, screenshot
from tests.integration.client.conftest import FAST
from tests.support.names import unique

WAIT_MS = 15_000


def test_create_update_and_delete_a_subscription_group_in_the_form(page: Page) -> None:
    group = unique("dash-form")
    page.goto("/groups/new")
    form = page.locator("form#group-form")
    form.get_by_label("Group name").fill(group)
    form.get_by_label("Max reconsume times").fill("3")
    form.get_by_label("Broadcast consumption allowed").check()
    form.get_by_role("button", name="Save").click()
    expect(page.locator("#banner")).to_contain_text(f"Saved group {group} on broker-a")
    config = page.locator("main .card dl.kv").last
    expect(config).to_contain_text("retryMaxTimes3")
    expect(config).to_contain_text("consumeBroadcastEnabletrue")

    page.get_by_role("link", name="Edit").click()
    form.get_by_label("Max reconsume times").fill("5")
    form.get_by_role("button", name="Save").click()
    expect(page.locator("main .card dl.kv").last).to_contain_text("retryMaxTimes5")

    page.on("dialog", lambda dialog: dialog.accept())  # "Delete consumer group ...?"
    page.get_by_role("button", name="Delete").click()
    expect(page.locator("#banner")).to_contain_text(f"Deleted group {group}")
    page.goto(f"/groups/{group}")
    expect(page.locator("#banner")).to_contain_text("does not exist")


def test_charts_draw_points_as_the_sampler_ticks(page: Page, cluster: Cluster) -> None:
    topic, group = unique("DashChart"), unique("dash-chart")
    with SyncProducer(unique("PG"), cluster.namesrv.addr, **FAST) as producer:
        for i in range(20):
            producer.send(Message(topic, b"chart %d" % i))
    assert page.request.post("/groups", form={"groupName": group, "consumeEnable": "on"}).ok  # the form's post
    page.goto(f"/charts?topics={topic}&groups={group}")

    def points(chart: str, series: str) -> str:
        """JS: how many samples of ``series`` in ``chart`` hold a value."""
        return (f"(() => {{ const u = (window.apogeeCharts || {{}})['{chart}']; if (!u) return 0;"
                f" const i = u.names.indexOf('{series}'); if (i < 0) return 0;"
                f" return u.data[i + 1].filter((v) => v !== null).length; }})()")

    page.wait_for_function(f"{points('broker_put', 'broker-a')} >= 2", timeout=WAIT_MS)
    page.wait_for_function(f"{points('topic_put', topic)} >= 2", timeout=WAIT_MS)
    page.wait_for_function(f"{points('group_lag', group)} >= 2", timeout=WAIT_MS)
    # updated in place: the last sample time moves on without a reload
    last = page.evaluate("window.apogeeCharts.broker_put.data[0].at(-1)")
    page.wait_for_function(f"window.apogeeCharts.broker_put.data[0].at(-1) > {last}", timeout=WAIT_MS)
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    expect(page.locator('[data-chart="broker_put"] .u-legend')).to_contain_text("broker-a")
    screenshot(page, "charts")
