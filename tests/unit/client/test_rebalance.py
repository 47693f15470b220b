"""The rebalance driver against a scripted host: adds, hand-offs, orderly locks, unknown offsets."""

from __future__ import annotations

from apogee.client.consumer.allocate import AllocateAveragely
from apogee.client.consumer.process_queue import ProcessQueue
from apogee.client.consumer.rebalance import Rebalancer
from apogee.client.types import MessageModel
from apogee.common.message import MessageQueue

QUEUES = {MessageQueue("T", "b", i) for i in range(4)}


class Host:
    group = "G"
    client_id = "c1"

    def __init__(self) -> None:
        self.cids = ["c1"]
        self.offsets: dict[MessageQueue, int] = {}
        self.started: dict[MessageQueue, int] = {}
        self.removed: list[MessageQueue] = []
        self.refuse_lock: set[MessageQueue] = set()
        self.refuse_remove: set[MessageQueue] = set()
        self.rescheduled: list[int] = []

    async def consumer_ids(self, topic: str) -> list[str]:
        return self.cids

    async def topic_queues(self, topic: str) -> set[MessageQueue]:
        return QUEUES if topic == "T" else set()

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return self.offsets.get(mq, 0)

    async def lock_queue(self, mq: MessageQueue) -> bool:
        return mq not in self.refuse_lock

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if mq in self.refuse_remove:
            return False
        self.removed.append(mq)
        return True

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self.started[mq] = offset

    def schedule_rebalance(self, delay_ms: int) -> None:
        self.rescheduled.append(delay_ms)


async def test_takes_its_share_and_hands_back_on_membership_change() -> None:
    host = Host()
    rb = Rebalancer(host, MessageModel.CLUSTERING, AllocateAveragely())
    host.offsets = {MessageQueue("T", "b", 3): 17}
    assert await rb.rebalance(["T"])
    assert set(rb.process_queues) == QUEUES and host.started[MessageQueue("T", "b", 3)] == 17
    assert not await rb.rebalance(["T"])  # nothing changed
    host.cids = ["c0", "c1"]  # c1 now owns the second half
    assert await rb.rebalance(["T"])
    assert set(rb.process_queues) == {MessageQueue("T", "b", 2), MessageQueue("T", "b", 3)}
    assert sorted(host.removed) == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]


async def test_unknown_start_offset_skips_the_queue_for_now() -> None:
    host = Host()
    host.offsets = {MessageQueue("T", "b", 0): -1}
    rb = Rebalancer(host, MessageModel.CLUSTERING, AllocateAveragely())
    await rb.rebalance(["T"])
    assert MessageQueue("T", "b", 0) not in rb.process_queues and len(rb.process_queues) == 3


async def test_orderly_queue_needs_the_broker_lock() -> None:
    host = Host()
    host.refuse_lock = {MessageQueue("T", "b", 1)}
    rb = Rebalancer(host, MessageModel.CLUSTERING, AllocateAveragely(), orderly=True, lock_retry_delay_ms=250)
    await rb.rebalance(["T"])
    assert MessageQueue("T", "b", 1) not in rb.process_queues
    assert all(pq.locked for pq in rb.process_queues.values())
    assert host.rescheduled == [250]
    host.refuse_lock.clear()
    await rb.rebalance(["T"])
    assert set(rb.process_queues) == QUEUES


async def test_a_hand_off_that_cannot_finish_is_retried() -> None:
    host = Host()
    rb = Rebalancer(host, MessageModel.CLUSTERING, AllocateAveragely())
    await rb.rebalance(["T"])
    host.cids = ["c0", "c1"]
    host.refuse_remove = {MessageQueue("T", "b", 0)}
    await rb.rebalance(["T"])
    pq = rb.process_queues[MessageQueue("T", "b", 0)]
    assert pq.dropped
    host.refuse_remove.clear()
    await rb.rebalance(["T"])
    assert MessageQueue("T", "b", 0) not in rb.process_queues


async def test_broadcasting_owns_all_and_unsubscribed_topics_are_released() -> None:
    host = Host()
    host.cids = []
    rb = Rebalancer(host, MessageModel.BROADCASTING, AllocateAveragely())
    await rb.rebalance(["T"])
    assert set(rb.process_queues) == QUEUES
    await rb.rebalance([])
    assert rb.process_queues == {} and len(host.removed) == 4
