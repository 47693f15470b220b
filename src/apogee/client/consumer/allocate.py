"""Queue allocation strategies for clustering consumers: pure functions of sorted inputs.

Every consumer of a group runs the same strategy over the same sorted queue list and the same
sorted client-id list, and keeps only its own share, so the group agrees on an assignment
without talking.  The strategies reproduce RocketMQ's (``AllocateMessageQueueAveragely``,
``...AveragelyByCircle``, ``...ConsistentHash``, ``...ByConfig``) exactly, so Apogee
consumers can share a group with Java or C++ consumers using the same strategy.

No I/O, no clock: ``allocate`` takes everything it needs.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

from apogee.common.message import MessageQueue


class AllocateStrategy(Protocol):
    """``allocate(group, current_cid, mq_all, cid_all)`` -> this client's queues."""

    name: str

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> int:
    """Index of ``current_cid`` in ``cid_all``, or -1 when it has no share."""
    if not current_cid or not mq_all or not cid_all:
        return -1
    try:
        return list(cid_all).index(current_cid)
    except ValueError:
        return -1


class AllocateAveragely:
    """Contiguous ranges: with 8 queues and 3 clients, 3 + 3 + 2."""

    name = "AVG"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        index = _check(current_cid, mq_all, cid_all)
        if index < 0:
            return []
        n_mq, n_cid = len(mq_all), len(cid_all)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        elif mod > 0 and index < mod:
            average = n_mq // n_cid + 1
        else:
            average = n_mq // n_cid
        start = index * average if mod > 0 and index < mod else index * average + mod
        count = min(average, n_mq - start)
        return [mq_all[(start + i) % n_mq] for i in range(max(0, count))]


class AllocateAveragelyByCircle:
    """Round robin: client i takes queues i, i + n, i + 2n..."""

    name = "AVG_BY_CIRCLE"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        index = _check(current_cid, mq_all, cid_all)
        if index < 0:
            return []
        return [mq_all[i] for i in range(index, len(mq_all), len(cid_all))]


def _md5_hash(key: str) -> int:
    """RocketMQ ``ConsistentHashRouter.MD5Hash``: the first 4 digest bytes, big-endian."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def mq_java_string(mq: MessageQueue) -> str:
    """``MessageQueue.toString()`` in Java: the key hashed onto the ring."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class AllocateConsistentHash:
    """A hash ring of clients (``virtual_nodes`` each); a queue goes to the next node clockwise.

    Adding or removing one client moves only the queues next to its nodes.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10) -> None:
        if virtual_nodes < 1:
            raise ValueError("virtual_nodes must be at least 1")
        self.virtual_nodes = virtual_nodes

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if _check(current_cid, mq_all, cid_all) < 0:
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for replica in range(self.virtual_nodes):
                ring[_md5_hash(f"{cid}-{replica}")] = cid  # later nodes overwrite, as a TreeMap put
        keys = sorted(ring)
        result = []
        for mq in mq_all:
            h = _md5_hash(mq_java_string(mq))
            i = bisect.bisect_left(keys, h)
            owner = ring[keys[i if i < len(keys) else 0]]
            if owner == current_cid:
                result.append(mq)
        return result


class AllocateByConfig:
    """A fixed list of queues, whatever the group looks like."""

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = list(queues)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.queues)


STRATEGIES: dict[str, type] = {
    "averagely": AllocateAveragely,
    "averagely_by_circle": AllocateAveragelyByCircle,
    "consistent_hash": AllocateConsistentHash,
}
