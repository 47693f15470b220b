"""``/metrics`` of a real broker and NameServer, scraped over loopback HTTP and parsed with
prometheus_client's own parser: the put/get counters are exact under load, a stopped group's
lag is right in messages and in seconds, rocketmq-exporter's names carry its labels, and the
NameServer counts what it knows and answers."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apogee.admin.client import AdminClient
from apogee.cli.admin.topics import wait_for_route
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import UpdateConsumerOffsetRequestHeader
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import pull_all, send_request, wait_dispatched

T = 5000
METRICS_URL = re.compile(r"metrics (http://\S+/metrics)")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    base = tmp_path_factory.mktemp("metrics")
    namesrv = start_namesrv(base / "ns", "--metrics-listen", "127.0.0.1:0")
    try:
        broker = start_broker(namesrv.addr, base / "store", "brokerName=broker-m\n", "--metrics-listen", "127.0.0.1:0")
        yield namesrv, broker
        broker.close()
    finally:
        namesrv.close()


def metrics_url(server: ServerProcess) -> str:
    match = METRICS_URL.search(server.ready_line)
    assert match, server.ready_line
    return match.group(1)


def _scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def scrape(server: ServerProcess) -> Samples:
    return await asyncio.to_thread(_scrape, metrics_url(server))


def value(samples: Samples, name: str, /, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def labels_of(samples: Samples, name: str) -> list[set[str]]:
    return [{k for k, _ in ls} for (n, ls) in samples if n == name]


async def test_put_and_get_counters_are_exact_under_load(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    topic, group = unique("MetricsLoad"), unique("MetricsGroup")
    n = 300
    before = await scrape(broker)
    put0 = value(before, "apogee_broker_put_messages_total") or 0
    get0 = value(before, "apogee_broker_get_messages_total") or 0
    client = RemotingClient()
    try:
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, broker.addr, queues=2)
            await wait_for_route(admin, topic)

        async def send_all() -> None:
            for start in range(0, n, 30):
                answers = await asyncio.gather(*(
                    client.invoke(broker.addr, send_request(topic, b"m" * 50, queue_id=i % 2), T)
                    for i in range(start, start + 30)))
                assert all(a.code == ResponseCode.SUCCESS for a in answers)

        sending = asyncio.create_task(send_all())
        seen: list[float] = []
        while not sending.done():  # scrapes while the sends go on: each parses and counts up
            seen.append(value(await scrape(broker), "apogee_broker_put_messages_total") or 0)
        await sending
        assert seen and seen == sorted(seen) and seen[-1] <= put0 + n

        after = await scrape(broker)
        assert value(after, "apogee_broker_put_messages_total") == put0 + n
        assert value(after, "apogee_topic_put_messages_total", topic=topic) == n
        assert value(after, "rocketmq_brokeruntime_msg_put_total_today_now") == put0 + n

        await wait_dispatched(client, broker.addr, topic, 0, n // 2)
        await wait_dispatched(client, broker.addr, topic, 1, n // 2)
        pulled = await pull_all(client, broker.addr, topic, queues=2, group=group)
        assert len(pulled) == n
        after = await scrape(broker)
        assert value(after, "apogee_broker_get_messages_total") == get0 + n
        assert value(after, "apogee_group_get_messages_total", topic=topic, group=group) == n
        assert value(after, "apogee_group_get_bytes_total", topic=topic, group=group) == sum(
            m.store_size for m in pulled)
        assert value(after, "apogee_topic_put_bytes_total", topic=topic) == sum(m.store_size for m in pulled)
        # rocketmq-exporter's names, with its label sets.
        assert value(after, "rocketmq_producer_offset", cluster="DefaultCluster", broker="broker-m", topic=topic) == n
        assert labels_of(after, "rocketmq_producer_tps")[0] == {"cluster", "broker", "topic"}
        assert value(after, "rocketmq_producer_tps", topic=topic) is not None
        assert labels_of(after, "rocketmq_consumer_tps")[0] == {"cluster", "broker", "topic", "group"}
        assert value(after, "rocketmq_broker_tps", brokerIP=broker.addr, broker="broker-m") is not None
        assert labels_of(after, "rocketmq_brokeruntime_commitlog_maxoffset")[0] == {
            "cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}
        assert value(after, "apogee_remoting_connections") >= 1  # type: ignore[operator]
        assert value(after, "apogee_store_dispatch_latency_seconds_count") > 0  # type: ignore[operator]
    finally:
        await client.close()


async def test_lag_of_a_stopped_group_in_messages_and_seconds(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    topic, group = unique("MetricsLag"), unique("LagGroup")
    n, consumed = 10, 4
    client = RemotingClient()
    try:
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, broker.addr, queues=1)
            await wait_for_route(admin, topic)
        for i in range(n):
            resp = await client.invoke(broker.addr, send_request(topic, f"m{i}".encode()), T)
            assert resp.code == ResponseCode.SUCCESS
        await wait_dispatched(client, broker.addr, topic, 0, n)
        # The group consumed `consumed` messages, committed, and went away.
        pulled = await pull_all(client, broker.addr, topic, queues=1, group=unique("Reader"))
        header = UpdateConsumerOffsetRequestHeader(group, topic, 0, consumed).encode()
        resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header), T)
        assert resp.code == ResponseCode.SUCCESS
        first_unconsumed_ms = pulled[consumed].store_timestamp

        t0 = time.time() * 1000
        samples = await scrape(broker)
        t1 = time.time() * 1000
        queue = {"group": group, "topic": topic, "queue": "0"}
        assert value(samples, "apogee_consumer_lag_messages", **queue) == n - consumed
        lag_s = value(samples, "apogee_consumer_lag_seconds", **queue)
        assert lag_s is not None
        assert (t0 - first_unconsumed_ms) / 1000 - 0.002 <= lag_s <= (t1 - first_unconsumed_ms) / 1000 + 0.002
        # rocketmq-exporter's figures of the same: diff and latency by store time (ms).
        assert value(samples, "rocketmq_group_diff", group=group, topic=topic, countOfOnlineConsumers="0",
                     msgModel="1") == n - consumed
        latency_ms = value(samples, "rocketmq_group_get_latency_by_storetime", topic=topic, group=group)
        assert latency_ms is not None and t0 - first_unconsumed_ms - 2 <= latency_ms <= t1 - first_unconsumed_ms + 2
        assert value(samples, "rocketmq_consumer_offset", topic=topic, group=group) == consumed
        assert value(samples, "rocketmq_group_count", group=group) == 0

        # Caught up: no lag.
        header = UpdateConsumerOffsetRequestHeader(group, topic, 0, n).encode()
        await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header), T)
        samples = await scrape(broker)
        assert value(samples, "apogee_consumer_lag_messages", **queue) == 0
        assert value(samples, "apogee_consumer_lag_seconds", **queue) == 0
    finally:
        await client.close()


async def test_namesrv_metrics(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv, broker = cluster
    samples = await wait_until(lambda: _registered(namesrv), 10, "the broker counted by the NameServer")
    assert value(samples, "apogee_namesrv_brokers", cluster="DefaultCluster", broker="broker-m", role="slave") == 0
    assert value(samples, "apogee_namesrv_topics") >= 1  # type: ignore[operator]
    assert value(samples, "apogee_namesrv_requests_total", code="103", name="REGISTER_BROKER") >= 1  # type: ignore[operator]
    assert value(samples, "apogee_remoting_connections") >= 1  # type: ignore[operator]
    assert value(samples, "process_cpu_seconds_total") is not None


async def _registered(namesrv: ServerProcess) -> Samples | None:
    samples = await scrape(namesrv)
    master = value(samples, "apogee_namesrv_brokers", cluster="DefaultCluster", broker="broker-m", role="master")
    return samples if master == 1 else None
