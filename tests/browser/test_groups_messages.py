"""Consumer groups, messages and dead letters in the dashboard, in Chromium, against the real
NameServer, broker and dashboard processes of ``conftest.cluster`` and Apogee's own clients
(the blocking facade) in this process.

* a message found by key, by topic and time (a job), opened: properties, body as JSON;
* a group's lag: up while no consumer runs, down to 0 while one runs, resent to that consumer
  (309), up again after a reset by time;
* a dead letter (a consumer that fails with max reconsume times 0: straight to the DLQ) resent
  to the retry topic and found there.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from apogee.client.sync import SyncProducer, SyncPushConsumer
from apogee.client.types import ConsumeFromWhere, ConsumeResult
from apogee.common.message import Message, MessageExt
from tests.browser.conftest import Cluster, screenshot
from tests.integration.client.conftest import FAST, FAST_CONSUMER
from tests.support.names import unique
from tests.support.waiting import block_until

WAIT_MS = 15_000  # a page expectation that depends on the sampler or a consumer
RESET_GAP_MS = 3_000  # the warm-up's age when the reset time is taken (see the lag test)


@pytest.fixture(scope="module")
def producer(cluster: Cluster) -> Iterator[SyncProducer]:
    with SyncProducer(unique("PG"), cluster.namesrv.addr, enable_msg_trace=True, **FAST) as p:
        yield p


def send(producer: SyncProducer, topic: str, body: bytes, keys: str = "", tags: str = "") -> str:
    msg = Message(topic, body)
    if keys:
        msg.keys = keys
    if tags:
        msg.tags = tags
    return producer.send(msg).msg_id


def consumer(cluster: Cluster, group: str, topic: str, listener: Any, **options: Any) -> SyncPushConsumer:
    c = SyncPushConsumer(group, cluster.namesrv.addr, listener=listener,
                         consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **{**FAST_CONSUMER, **options})
    c.subscribe(topic, "*")
    return c.start()


def local_input(ms: int) -> str:
    """A datetime-local value, to the millisecond (the dashboard's local time is ours)."""
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(timespec="milliseconds")


def test_find_a_message_by_key_and_by_time_and_open_its_detail(page: Page, producer: SyncProducer) -> None:
    topic, key = unique("DashMsg"), unique("order")
    began = int(time.time() * 1000) - 1000
    msg_id = send(producer, topic, b'{"order": 42, "items": ["tea"]}', keys=key, tags="paid")
    send(producer, topic, b"another message", keys=unique("other"))

    page.goto("/messages")
    form = page.locator("form#by-key")
    form.get_by_label("Topic").fill(topic)
    form.get_by_label("Key").fill(key)
    form.get_by_role("button", name="Find").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(key)
    screenshot(page, "messages")

    rows.first.get_by_role("link", name=msg_id).click()
    expect(page.locator("#summary")).to_contain_text(topic)
    expect(page.locator("#properties")).to_contain_text(key)
    expect(page.locator('pre[data-view="text"]')).to_have_text('{"order": 42, "items": ["tea"]}')
    page.locator("#body .tabs button", has_text="JSON").click()
    expect(page.locator('pre[data-view="json"]')).to_be_visible()
    expect(page.locator('pre[data-view="json"]')).to_contain_text('"order": 42,\n')
    page.locator("#body .tabs button", has_text="Hex").click()
    expect(page.locator('pre[data-view="hex"]')).to_contain_text("00000000  7b 22 6f 72")

    # by topic and time: a job, its progress, then both messages
    page.goto("/messages")
    form = page.locator("form#by-time")
    form.get_by_label("Topic").fill(topic)
    form.get_by_label("From").fill(local_input(began))
    form.get_by_role("button", name="Search").click()
    expect(page.locator("#messages tbody tr")).to_have_count(2)
    expect(page.locator("main")).to_contain_text("2 messages in the range")


def test_lag_falls_to_zero_while_a_consumer_runs_and_rises_after_a_reset_by_time(
    page: Page, cluster: Cluster, producer: SyncProducer
) -> None:
    topic, group = unique("DashLag"), unique("dash-lag")
    consumed: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeResult:
        consumed.extend(msgs)
        return ConsumeResult.CONSUME_SUCCESS

    warm_up_sent_ms = time.time() * 1000
    send(producer, topic, b"warm-up")
    first = consumer(cluster, group, topic, listener)  # the group gets offsets on the topic
    block_until(lambda: len(consumed) == 1, timeout_s=15)
    first.shutdown()

    # A reset by time goes to the message stored *nearest* the time (RocketMQ's rule): the
    # warm-up must lie much further before `before` than the next message of its queue after
    # it, however slowly a loaded machine sends the 10 below.
    block_until(lambda: time.time() * 1000 - warm_up_sent_ms > RESET_GAP_MS, timeout_s=15)
    before = int(time.time() * 1000) - 1  # store times of the 10 below are after this
    ids = [send(producer, topic, b"m%d" % i, keys=f"lag-{i}") for i in range(10)]
    page.goto(f"/groups/{group}")
    lag = page.locator('[data-field="group-lag"]')
    expect(lag).to_have_text("10", timeout=WAIT_MS)  # no consumer runs: the 10 wait

    second = consumer(cluster, group, topic, listener, enable_msg_trace=True)
    try:
        expect(lag).to_have_text("0", timeout=WAIT_MS)  # the page refreshes itself meanwhile
        assert len(consumed) >= 11

        # the list: its online client, how it consumes, no lag
        page.goto("/groups")
        row = page.locator(f'#groups tr[data-group="{group}"]')
        expect(row.locator('[data-field="clients"]')).to_have_text("1", timeout=WAIT_MS)
        expect(row).to_contain_text("passively")
        expect(row.locator('[data-field="lag"]')).to_have_text("0")
        screenshot(page, "groups")

        # its page: consumed by the group, and the trace the producer and consumer wrote
        page.goto(f"/messages?topic={topic}&id={ids[3]}")
        expect(page.locator("#summary")).to_contain_text("lag-3")
        expect(page.locator("#tracks")).to_contain_text("CONSUMED")

        def traced() -> bool:
            page.reload()
            return page.locator("#trace tbody tr", has_text="consumed").count() == 1

        block_until(traced, 15, "the consumption traced", interval_s=0.3)
        expect(page.locator("#trace tbody tr", has_text="sent")).to_contain_text("ok")
        screenshot(page, "message-detail")

        # resend it to the running consumer (CONSUME_MESSAGE_DIRECTLY): its listener sees it again
        count = len(consumed)
        page.locator("form#resend").get_by_role("button", name="Resend").click()
        expect(page.locator("#banner")).to_contain_text("CR_SUCCESS")
        assert len(consumed) == count + 1 and consumed[-1].keys == ["lag-3"]
    finally:
        second.shutdown()

    page.goto(f"/groups/{group}")
    expect(lag).to_have_text("0")
    reset = page.locator("form#reset-form")
    reset.get_by_label("To the message stored at").fill(local_input(before))
    reset.get_by_role("button", name="Reset offset by time").click()
    # a job: the page shows its progress, then reloads with its outcome
    expect(page.locator("#job")).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    expect(page.locator("#job")).to_contain_text(f"reset {topic} (")
    expect(lag).to_have_text("10")
    screenshot(page, "group")

    page.goto("/groups")
    expect(row.locator('[data-field="lag"]')).to_have_text("10", timeout=WAIT_MS)
    expect(row.locator('[data-field="clients"]')).to_have_text("0")


def test_a_dead_letter_resent_to_the_retry_topic(page: Page, cluster: Cluster, producer: SyncProducer) -> None:
    topic, group, key = unique("DashDlq"), unique("dash-dlq"), unique("dead")
    failed = threading.Event()

    def failing(msgs: list[MessageExt], ctx: Any) -> ConsumeResult:
        failed.set()
        return ConsumeResult.RECONSUME_LATER

    dying = consumer(cluster, group, topic, failing, max_reconsume_times=0)  # first failure: the DLQ
    try:
        send(producer, topic, b"cannot be processed", keys=key)
        assert failed.wait(15)

        def listed() -> bool:
            page.goto(f"/messages/dlq?group={group}")
            return page.locator("#dead-letters tbody tr", has_text=key).count() == 1

        block_until(listed, timeout_s=15, what="the dead letter listed", interval_s=0.3)
    finally:
        dying.shutdown()  # the resent letter stays in the retry topic for us to find
    row = page.locator("#dead-letters tbody tr", has_text=key)
    expect(row).to_contain_text(topic)  # the topic it was first sent to
    row.get_by_role("checkbox").check()
    screenshot(page, "dead-letters")
    page.get_by_role("button", name="Resend selected to the retry topic").click()
    expect(page.locator("#banner")).to_contain_text(f"Resent 1 to %RETRY%{group}")

    page.goto("/messages")
    form = page.locator("form#by-key")
    form.get_by_label("Topic").fill(f"%RETRY%{group}")
    form.get_by_label("Key").fill(key)
    form.get_by_role("button", name="Find").click()
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    expect(page.locator("#messages tbody tr")).to_contain_text(f"%RETRY%{group}")
