"""Topics in the browser: the quick start's "create the topic by hand", its status, a test
send, the list's filters, a refused request's code and remark, deletion with confirmation."""

from __future__ import annotations

import re

from playwright.sync_api import Dialog, Page, expect

from tests.browser.conftest import Cluster, screenshot


def create_topic(page: Page, topic: str, queues: int = 4) -> None:
    page.goto("/topics")
    page.get_by_role("link", name="Create topic").click()
    page.get_by_label("Topic").fill(topic)
    page.get_by_label("Write queues").fill(str(queues))
    page.get_by_label("Read queues").fill(str(queues))
    page.get_by_role("button", name="Create").click()


def test_create_a_topic_in_the_form_see_it_listed_and_its_status(page: Page, cluster: Cluster) -> None:
    page.goto("/topics/+new")
    page.get_by_label("Topic").fill("QuickStartTopic")
    page.get_by_label("Write queues").fill("4")
    page.get_by_label("Read queues").fill("4")
    screenshot(page, "topic-create")
    page.get_by_role("button", name="Create").click()

    # Created on the cluster's master and served by the NameServer: the topic's own page.
    expect(page).to_have_url(f"{cluster.url}/topics/QuickStartTopic")
    expect(page.locator(".banner.ok")).to_contain_text("Topic QuickStartTopic created on broker-a")
    expect(page.locator("#route tbody tr")).to_have_count(1)
    expect(page.locator("#route")).to_contain_text(cluster.broker.addr)
    status = page.locator("#status tbody tr")
    expect(status).to_have_count(4)
    expect(status.first.locator("td").nth(3)).to_have_text("0")  # max offset of an empty queue

    # Listed among the normal topics (not the system ones), found by the text filter.
    page.goto("/topics")
    row = page.locator("#topics tbody tr", has_text="QuickStartTopic")
    expect(row).to_contain_text("broker-a")
    page.get_by_label("Filter topics by name").fill("quickstart")
    expect(page.locator("#topics tbody tr:visible")).to_have_count(1)
    page.get_by_label("Filter topics by name").fill("")
    screenshot(page, "topics")
    page.locator("[data-kind=system]").click()
    expect(page.locator("#topics")).to_contain_text("TBW102")
    expect(page.locator("#topics")).not_to_contain_text("QuickStartTopic")


def test_send_a_test_message_and_see_the_result(page: Page, cluster: Cluster) -> None:
    create_topic(page, "SendProbeTopic", queues=2)
    expect(page.locator(".banner.ok")).to_contain_text("created")
    page.get_by_label("Tags").fill("TagA")
    page.get_by_label("Keys").fill("order-1001")
    page.get_by_label("Body").fill('{"orderId": 1001}')
    page.get_by_role("button", name="Send").click()

    result = page.locator("#send-result")
    expect(result).to_contain_text("Sent: SEND_OK")
    expect(result.locator("[data-field=msg-id]")).to_have_text(re.compile(r"^[0-9A-F]{32}$"))
    expect(result.locator("[data-field=queue]")).to_have_text(re.compile(r"^broker-a / [01]$"))
    expect(result.locator("[data-field=queue-offset]")).to_have_text("0")
    # The status beside it already counts the message.
    expect(page.locator("h2", has_text="Status")).to_contain_text("1 message held")
    screenshot(page, "topic")


def test_a_refused_request_shows_rocketmqs_code_and_remark(page: Page, cluster: Cluster) -> None:
    create_topic(page, "TooManyQueues", queues=5000)
    banner = page.locator(".banner.error")
    expect(banner).to_contain_text("The request was refused")
    expect(banner).to_contain_text("code 1 SYSTEM_ERROR: readQueueNums and writeQueueNums must be between 1 and 1024")
    # The form is shown again with what was entered; no trace of Python.
    expect(page.get_by_label("Write queues")).to_have_value("5000")
    assert "Traceback" not in page.content()
    # A name the dashboard refuses before asking anyone.
    page.get_by_label("Topic").evaluate("e => e.removeAttribute('pattern')")
    page.get_by_label("Topic").fill("bad topic!")
    page.get_by_label("Write queues").fill("4")
    page.get_by_role("button", name="Create").click()
    expect(page.locator(".banner.error")).to_contain_text("Invalid input")
    expect(page.locator(".banner.error")).to_contain_text("contains characters other than")


def test_delete_a_topic_after_confirming(page: Page, cluster: Cluster) -> None:
    create_topic(page, "DoomedTopic", queues=1)
    expect(page).to_have_url(f"{cluster.url}/topics/DoomedTopic")
    questions: list[str] = []

    def answer(accept: bool) -> None:
        def on_dialog(dialog: Dialog) -> None:
            questions.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        page.once("dialog", on_dialog)

    answer(False)  # cancelled: nothing happens
    page.get_by_role("button", name="Delete").click()
    expect(page).to_have_url(f"{cluster.url}/topics/DoomedTopic")
    answer(True)
    page.get_by_role("button", name="Delete").click()
    expect(page).to_have_url(f"{cluster.url}/topics")
    expect(page.locator(".banner.ok")).to_contain_text("Topic DoomedTopic deleted")
    expect(page.locator("#topics")).not_to_contain_text("DoomedTopic")
    assert questions == ["Delete topic DoomedTopic from every broker and the NameServer? "
                         "Its messages can no longer be consumed."] * 2
    page.goto("/topics/DoomedTopic")
    expect(page.locator(".banner.error")).to_contain_text("topic 'DoomedTopic' does not exist")
