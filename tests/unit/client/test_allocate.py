"""Allocation strategies: every queue owned exactly once, RocketMQ's exact layouts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.client.consumer.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateConsistentHash,
    mq_java_string,
)
from apogee.client.consumer.rebalance import allocate_queues
from apogee.client.types import MessageModel
from apogee.common.message import MessageQueue


def mqs(n: int, brokers: int = 1) -> list[MessageQueue]:
    return sorted(MessageQueue("T", f"broker-{b}", q) for b in range(brokers) for q in range(n))


CIDS = ["10.0.0.1@a", "10.0.0.1@b", "10.0.0.2@c"]


def test_averagely_gives_contiguous_ranges_larger_first() -> None:
    queues = mqs(8)
    got = [AllocateAveragely().allocate("g", cid, queues, CIDS) for cid in CIDS]
    assert [[q.queue_id for q in part] for part in got] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_averagely_by_circle_deals_round_robin() -> None:
    queues = mqs(8)
    got = [AllocateAveragelyByCircle().allocate("g", cid, queues, CIDS) for cid in CIDS]
    assert [[q.queue_id for q in part] for part in got] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_more_consumers_than_queues_leaves_some_idle() -> None:
    queues = mqs(2)
    cids = [f"c{i}" for i in range(4)]
    got = [AllocateAveragely().allocate("g", cid, queues, cids) for cid in cids]
    assert [len(p) for p in got] == [1, 1, 0, 0]


def test_unknown_client_gets_nothing() -> None:
    assert AllocateAveragely().allocate("g", "stranger", mqs(4), CIDS) == []
    assert AllocateConsistentHash().allocate("g", "stranger", mqs(4), CIDS) == []


def test_mq_java_string_matches_java_to_string() -> None:
    assert mq_java_string(MessageQueue("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"


def test_consistent_hash_moves_few_queues_when_a_client_leaves() -> None:
    strategy = AllocateConsistentHash()
    queues = mqs(64, brokers=2)
    before = {q: cid for cid in CIDS for q in strategy.allocate("g", cid, queues, CIDS)}
    after_cids = CIDS[:2]
    after = {q: cid for cid in after_cids for q in strategy.allocate("g", cid, queues, after_cids)}
    moved = [q for q in queues if before[q] != after[q]]
    assert all(before[q] == CIDS[2] for q in moved)


def test_by_config_returns_its_queues() -> None:
    fixed = [MessageQueue("T", "b", 1)]
    assert AllocateByConfig(fixed).allocate("g", "x", mqs(4), CIDS) == fixed


@pytest.mark.parametrize("strategy", [AllocateAveragely(), AllocateAveragelyByCircle(), AllocateConsistentHash(3)])
@given(n_queues=st.integers(1, 40), n_brokers=st.integers(1, 3), n_clients=st.integers(1, 12))
def test_every_queue_has_exactly_one_owner(strategy: object, n_queues: int, n_brokers: int, n_clients: int) -> None:
    queues = mqs(n_queues, n_brokers)
    cids = sorted(f"10.0.0.{i}@inst" for i in range(n_clients))
    owned: list[MessageQueue] = []
    for cid in cids:
        owned += strategy.allocate("g", cid, queues, cids)  # type: ignore[attr-defined]
    assert sorted(owned) == queues


@given(n_queues=st.integers(1, 40), n_clients=st.integers(1, 12))
def test_averagely_is_balanced(n_queues: int, n_clients: int) -> None:
    queues = mqs(n_queues)
    cids = [f"c{i:02d}" for i in range(n_clients)]
    sizes = [len(AllocateAveragely().allocate("g", cid, queues, cids)) for cid in cids]
    assert max(sizes) - min(sizes) <= 1


def test_broadcasting_owns_everything_and_inputs_are_sorted_first() -> None:
    queues = mqs(4)
    assert allocate_queues(MessageModel.BROADCASTING, AllocateAveragely(), "g", "x", queues, []) == set(queues)
    shuffled_cids = list(reversed(CIDS))
    got = allocate_queues(MessageModel.CLUSTERING, AllocateAveragely(), "g", CIDS[0], reversed(queues), shuffled_cids)
    assert got == {MessageQueue("T", "broker-0", 0), MessageQueue("T", "broker-0", 1)}
