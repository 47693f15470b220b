"""The real Apache RocketMQ C++ client (rocketmq==0.4.4) against real Apogee processes."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.interop.conftest import Cluster, cpp, delay_ms, received, sent, unique

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def produce(cluster: Cluster, topic: str, *args: object) -> list[dict]:
    events = cpp("produce", cluster.namesrv.addr, topic, *args).wait()
    return sent(events)


@pytest.mark.parametrize("mode", ["sync", "async", "oneway"])
def test_send_modes_and_clustering_push_consumer_receive_messages_as_sent(cluster: Cluster, mode: str) -> None:
    topic = unique(f"T_{mode}")
    results = produce(cluster, topic, "--count", 20, "--mode", mode, "--tags", "TagA", "--prop", "color=blue")
    assert len(results) == 20
    if mode != "oneway":
        assert all(r["status"] == 0 and len(r["msg_id"]) == 32 for r in results)
    events = cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 20).wait()
    got = received(events)
    assert sorted(int(m["props"]["seq"]) for m in got) == list(range(20))
    for m in got:
        i = int(m["props"]["seq"])
        assert m["body"] == f"body-{i}"
        assert m["tags"] == "TagA"
        assert m["keys"] == f"key-{i}"
        assert m["props"]["color"] == "blue"
        assert m["topic"] == topic


def test_large_bodies_are_compressed_and_arrive_intact(cluster: Cluster) -> None:
    topic = unique("T_big")
    produce(cluster, topic, "--count", 5, "--body-size", 20000)
    got = received(cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 5).wait())
    assert sorted(m["body"] for m in got) == sorted(f"body-{i}".ljust(20000, "x") for i in range(5))


def test_send_offsets_and_ids_are_real(cluster: Cluster) -> None:
    topic = unique("T_ids")
    results = produce(cluster, topic, "--count", 12, "--mode", "sync")
    offsets_by_queue: dict[str, list[int]] = defaultdict(list)
    ids = {r["msg_id"] for r in results}
    assert len(ids) == 12
    got = received(cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 12).wait())
    for m in got:
        offsets_by_queue[m["queue_id"]].append(m["queue_offset"])
    for offsets in offsets_by_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))


def test_orderly_send_and_orderly_consumer_keep_per_key_order(cluster: Cluster) -> None:
    topic = unique("T_order")
    results = produce(cluster, topic, "--count", 60, "--mode", "orderly", "--shards", 4)
    assert len(results) == 60 and all(r["status"] == 0 for r in results)
    got = received(cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 60, "--orderly").wait())
    by_shard: dict[int, list[int]] = defaultdict(list)
    for m in got:
        i = int(m["props"]["seq"])
        by_shard[i % 4].append(i)
    assert sum(len(v) for v in by_shard.values()) == 60
    for shard, seqs in by_shard.items():
        assert seqs == sorted(seqs), f"shard {shard} out of order: {seqs}"


def test_batch_send(cluster: Cluster) -> None:
    topic = unique("T_batch")
    (result,) = produce(cluster, topic, "--count", 10, "--mode", "batch")
    assert result["status"] == 0
    got = received(cpp("consume", cluster.namesrv.addr, topic, unique("G"), "--expect", 10).wait())
    assert sorted(int(m["props"]["seq"]) for m in got) == list(range(10))
    assert {m["body"] for m in got} == {f"body-{i}" for i in range(10)}


def test_broadcasting_consumers_each_receive_everything(cluster: Cluster) -> None:
    topic = unique("T_bcast")
    group = unique("G")
    # The topic and its route exist before the consumers subscribe, with no message in it:
    # broadcasting consumers start at the queues' end, so each expects exactly the 20 below.
    cluster.create_topic(topic)
    a = cpp("consume", cluster.namesrv.addr, topic, group, "--expect", 20, "--broadcast", "--instance", "a")
    b = cpp("consume", cluster.namesrv.addr, topic, group, "--expect", 20, "--broadcast", "--instance", "b")
    a.wait_started()
    b.wait_started()
    produce(cluster, topic, "--count", 20, "--mode", "sync")
    for run in (a, b):
        got = received(run.wait())
        assert len(got) >= 20
        assert {m["props"]["seq"] for m in got} >= {str(i) for i in range(20)}


def test_tag_expression_receives_only_those_tags(cluster: Cluster) -> None:
    topic = unique("T_tags")
    produce(cluster, topic, "--count", 30, "--tags", "TagA,TagB,TagC")
    got = received(
        cpp(
            "consume",
            cluster.namesrv.addr,
            topic,
            unique("G"),
            "--expect",
            20,
            "--tags",
            "TagA || TagB",
            "--linger",
            "2",
        ).wait()
    )
    assert len(got) == 20
    assert {m["tags"] for m in got} == {"TagA", "TagB"}


def test_pull_consumer_reads_from_offset_zero(cluster: Cluster) -> None:
    topic = unique("T_pull")
    produce(cluster, topic, "--count", 16)
    got = received(cpp("pull", cluster.namesrv.addr, topic, unique("G"), "--expect", 16).wait())
    assert sorted(int(m["props"]["seq"]) for m in got) == list(range(16))
    assert min(m["queue_offset"] for m in got) == 0


def test_delay_level_2_arrives_no_sooner_than_its_delay(cluster: Cluster) -> None:
    topic = unique("T_delay")
    group = unique("G")
    produce(cluster, topic, "--count", 1)  # topic exists before the consumer subscribes
    consumer = cpp("consume", cluster.namesrv.addr, topic, group, "--expect", 4, "--timeout", "40")
    consumer.wait_started()
    results = produce(cluster, topic, "--count", 3, "--delay-level", 2, "--keys-prefix", "delayed-")
    sent_at = {f"delayed-{r['i']}": r["sent_ms"] for r in results}
    got = received(consumer.wait())
    delayed = [m for m in got if m["keys"].startswith("delayed-")]
    assert len(delayed) == 3
    for m in delayed:
        waited = m["received_ms"] - sent_at[m["keys"]]
        assert waited >= delay_ms(2), f"{m['keys']} arrived after {waited} ms"
        assert waited < delay_ms(2) + 10000


def test_failed_message_comes_back_through_the_retry_topic(cluster: Cluster) -> None:
    topic, group = unique("T_retry"), unique("G")
    produce(cluster, topic, "--count", 3)
    # The group's retry topic exists before the consumer starts (as it does once a group has
    # ever heartbeated): the C++ client looks up its route at start, or else only on its next
    # 10 s rebalance, and that timer of the client is not what this test is about.
    cluster.create_topic(f"%RETRY%{group}", 1)
    events = cpp(
        "consume", cluster.namesrv.addr, topic, group, "--expect", 3, "--fail-first", "--timeout", "60"
    ).wait(timeout=90)
    failing = [e for e in events if e["event"] == "failing"]
    got = received(events)
    assert len(failing) == 3
    assert sorted(m["keys"] for m in got) == ["key-0", "key-1", "key-2"]
    for m in got:
        assert m["reconsume_times"] >= 1
        assert m["topic"] == topic  # the client restores the original topic from RETRY_TOPIC
