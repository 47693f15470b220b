"""The producers page: a live producer group's connections on a topic's brokers."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from apogee.client.sync import SyncProducer
from apogee.common.message import Message
from tests.browser.conftest import Cluster, screenshot


@pytest.fixture
def producer(cluster: Cluster) -> Iterator[SyncProducer]:
    producer = SyncProducer("PG_Orders", cluster.namesrv.addr).start()
    producer.send(Message("OrderEvents", b"first"))  # creates the topic (autoCreateTopicEnable) and connects
    yield producer
    producer.shutdown()


def test_a_producer_groups_connections(page: Page, producer: SyncProducer) -> None:
    page.goto("/producers")
    page.get_by_label("Producer group").fill("PG_Orders")
    page.get_by_label("Topic").fill("OrderEvents")
    page.get_by_role("button", name="Show connections").click()
    rows = page.locator("#connections tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td").first).to_have_text(re.compile(r"^\S+@\S+$"))  # a client id: ip@instance
    expect(rows.first).to_contain_text("PYTHON")
    expect(page.locator("#producer-groups tr", has_text="PG_Orders")).to_contain_text("broker-a")
    screenshot(page, "producers")

    # A group nobody runs: said so, not an empty table.
    page.get_by_label("Producer group").fill("PG_Nobody")
    page.get_by_role("button", name="Show connections").click()
    expect(page.locator(".banner.error")).to_contain_text("producer group 'PG_Nobody' has no live producer")
