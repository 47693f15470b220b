"""The quick-start application API against real NameServer and broker processes: the template's
sends reach decorated listeners decoded by annotation, failures return through %RETRY% (and
the DLQ), and a start that cannot work says why in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from apogee.admin.client import AdminClient
from apogee.cli.admin.topics import wait_for_route
from apogee.client import ConsumeResult, MessageExt, PullConsumer, PullStatus
from apogee.client.app import App
from apogee.common import constants as c
from apogee.errors import NameServerUnreachableError, TopicMissingError
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, start_broker, unique, wait_until
from tests.support.processes import start_namesrv

# Every delay level 1 s, so a retry (level 3 + reconsume times) comes back in a second, not 10 s.
BROKER_CONF = "messageDelayLevel=" + " ".join(["1s"] * 18) + "\nenablePropertyFilter=true\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("app")
    conf = base / "broker.conf"
    conf.write_text(BROKER_CONF)
    namesrv = start_namesrv(base / "namesrv")
    broker = start_broker(namesrv.addr, base / "store", "-c", str(conf))
    try:
        yield Cluster(namesrv, [broker], base)
    finally:
        broker.close()
        namesrv.close()


async def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    async with AdminClient(cluster.ns) as admin:
        await admin.update_topic(topic, cluster.brokers[0].addr, queues)
        await wait_for_route(admin, topic)


def make_app(cluster: Cluster) -> App:
    return App(unique("app"), namesrv_addr=cluster.ns, **FAST_CONSUMER)


@dataclasses.dataclass
class Warn:
    level: int
    text: str


async def test_template_sends_reach_listeners_decoded_by_their_annotations(cluster: Cluster) -> None:
    topic = unique("T_app")
    await create_topic(cluster, topic)
    app = make_app(cluster)
    warns: list[tuple[Warn, list[str]]] = []
    texts: list[str] = []
    blobs: list[bytes] = []
    selected: list[dict[str, object]] = []

    @app.listener(topic, group=unique("G_warn"), tag="warn")
    async def on_warn(warn: Warn, raw: MessageExt) -> None:
        warns.append((warn, raw.keys))

    @app.listener(topic, group=unique("G_text"), tag="text")
    class WarnConsumer:
        def on_message(self, message: str) -> None:
            texts.append(message)

    @app.listener(topic, group=unique("G_bin"), tag="bin")
    def on_bytes(body: bytes) -> None:
        blobs.append(body)
        # A plain listener runs on a worker thread: the blocking facade works there.
        app.template.sync.send_sync_msg(topic, "text", "sent from a worker thread")

    @app.listener(topic, group=unique("G_sql"), sql="level > 2", orderly=True)
    def on_selected(data: dict[str, object]) -> None:
        selected.append(data)

    async with app:
        result = await app.template.send(topic, Warn(3, "disk full"), tag="warn", keys=["host-1", "disk"])
        assert result.msg_id
        await app.template.send_sync_msg(topic, "text", "sync hello world!")
        # The blocking facade, from a thread other than the app's loop (as a web handler's).
        await asyncio.to_thread(app.template.sync.send, topic, b"\x00\xff", tag="bin")
        # Same order key, same queue: the orderly SQL92 listener sees them in this order.
        low = await app.template.send_async(topic, {"level": 1}, properties={"level": "1"}, order_key="k")
        high = await app.template.send_async(topic, {"level": 5}, properties={"level": "5"}, order_key="k")
        await asyncio.gather(low, high)
        await wait_until(lambda: warns and len(texts) >= 2 and blobs and selected, 20, "every listener's message")
    assert warns == [(Warn(3, "disk full"), ["host-1", "disk"])]
    assert sorted(texts) == ["sent from a worker thread", "sync hello world!"]
    assert blobs == [b"\x00\xff"]
    assert selected == [{"level": 5}]  # the level-1 message, earlier in the same queue, was filtered out
    assert not app.running and app.producer is None and not app.consumers


async def test_a_raising_listener_gets_the_message_again_through_the_retry_topic(cluster: Cluster) -> None:
    topic = unique("T_retry")
    group = unique("G_retry")
    await create_topic(cluster, topic)
    app = make_app(cluster)
    attempts: list[tuple[int, str, str | None, str]] = []

    @app.listener(topic, group=group)
    def flaky(text: str, raw: MessageExt) -> None:
        attempts.append((raw.reconsume_times, raw.topic, raw.properties.get(c.PROPERTY_RETRY_TOPIC), text))
        if raw.reconsume_times == 0:
            raise RuntimeError("the first attempt fails")

    async with app:
        sent = await app.template.send(topic, "retry me")
        await wait_until(lambda: len(attempts) >= 2, 15, "the redelivery")
        assert attempts == [(0, topic, None, "retry me"), (1, topic, topic, "retry me")]
        async with AdminClient(cluster.ns) as admin:
            # The send-back went through %RETRY%<group>: it holds that one message.
            retry = await admin.consumer_progress(group, c.retry_topic(group))
            assert sum(q.broker_offset for q in retry) == 1
    assert sent.msg_id


async def test_an_undecodable_payload_is_retried_then_dead_lettered(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("T_bad")
    group = unique("G_bad")
    await create_topic(cluster, topic)
    app = make_app(cluster)
    got: list[Warn] = []

    @app.listener(topic, group=group, max_reconsume_times=1)
    def on_warn(warn: Warn) -> None:
        got.append(warn)

    def failures(msg_id: str) -> list[str]:
        return [
            r.getMessage() for r in caplog.records if msg_id in r.getMessage() and "cannot be decoded" in r.getMessage()
        ]

    with caplog.at_level(logging.ERROR, "apogee.client.app"):
        async with app:
            sent = await app.template.send(topic, "this is not JSON")
            await wait_until(lambda: len(failures(sent.msg_id)) >= 2, 15, "two failed deliveries")
    assert got == []
    assert "reconsumed 0 of 1" in failures(sent.msg_id)[0] and "reconsumed 1 of 1" in failures(sent.msg_id)[1]
    async with PullConsumer(unique("dlq_reader"), cluster.ns, **FAST) as reader:
        found: list[MessageExt] = []
        deadline = time.monotonic() + 10
        while not found and time.monotonic() < deadline:
            try:
                for mq in await reader.fetch_message_queues(c.dlq_topic(group)):
                    result = await reader.pull(mq, "*", 0, 32)
                    if result.status is PullStatus.FOUND:
                        found += result.messages
            except Exception:
                await asyncio.sleep(0.2)
        assert [m.body for m in found] == [b"this is not JSON"]


async def test_a_listener_returning_reconsume_later_is_retried_too(cluster: Cluster) -> None:
    topic = unique("T_later")
    await create_topic(cluster, topic)
    app = make_app(cluster)
    seen: list[int] = []

    @app.listener(topic, group=unique("G_later"))
    async def later(raw: MessageExt) -> ConsumeResult | None:
        seen.append(raw.reconsume_times)
        return ConsumeResult.RECONSUME_LATER if raw.reconsume_times == 0 else None

    async with app:
        await app.template.send(topic, b"x")
        await wait_until(lambda: len(seen) >= 2, 15, "the redelivery")
    assert seen == [0, 1]


async def test_stop_lets_a_running_listener_finish_then_commits_its_offset(cluster: Cluster) -> None:
    topic = unique("T_drain")
    group = unique("G_drain")
    await create_topic(cluster, topic, queues=1)
    app = make_app(cluster)
    ready, running = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    @app.listener(topic, group=group)
    async def slow(text: str) -> None:
        running.set()
        await asyncio.sleep(0.5)  # work in progress when the stop is asked for
        finished.append(text)

    serving = asyncio.create_task(app.serve(on_ready=lambda _: ready.set()))
    await asyncio.wait_for(ready.wait(), 15)
    await app.template.send(topic, "in flight")
    await asyncio.wait_for(running.wait(), 15)
    app.request_stop()  # what SIGTERM does under app.run() / apogee run
    await asyncio.wait_for(serving, 15)
    assert finished == ["in flight"] and not app.running
    async with AdminClient(cluster.ns) as admin:
        progress = await admin.consumer_progress(group, topic)
    assert [(q.broker_offset, q.consumer_offset) for q in progress] == [(1, 1)]


async def test_a_missing_topic_fails_the_start_saying_how_to_create_it(cluster: Cluster) -> None:
    topic = unique("T_missing")
    app = make_app(cluster)

    @app.listener(topic, group=unique("G"))
    def on_text(text: str) -> None: ...

    with pytest.raises(TopicMissingError) as info:
        await app.start()
    message = str(info.value)
    assert f"topic {topic} does not exist" in message and "\n" not in message
    assert f"apogee admin update-topic -n '{cluster.ns}' -t {topic}" in message and "autoCreateTopicEnable" in message
    assert not app.running and not app.consumers and app.producer is None


async def test_an_unreachable_nameserver_fails_the_start_naming_it() -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    app = App(unique("app"), namesrv_addr=addr)

    @app.listener("TopicTest", group=unique("G"))
    def on_text(text: str) -> None: ...

    started = time.monotonic()
    with pytest.raises(NameServerUnreachableError, match=f"cannot reach the NameServer at {addr}"):
        await app.start()
    assert time.monotonic() - started < 10 and not app.running
