"""Auto-batching without a loop or a socket: what goes into a batch body, when a batch
leaves, and that a refused message leaves its batch as it was."""

from __future__ import annotations

from typing import Any

import pytest

from apogee.client.producer.accumulator import Accumulator, Batch, BatchKey, batchable
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.message import Message, MessageQueue
from apogee.common.message_codec import decode_batch, parse_properties
from apogee.common.uniq_id import UniqIdGenerator
from apogee.errors import MessageValidationError


class Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Fut:
    """What a batch does with a future: nothing here, it is only counted."""

    def done(self) -> bool:
        return False


class Harness:
    def __init__(self, *, max_messages: int = 4, max_bytes: int = 1 << 20, linger_s: float = 0.0) -> None:
        self.scheduled: list[tuple[float, BatchKey, Handle]] = []
        self.sent: list[tuple[Batch, bytes]] = []
        self.hooks: list[Any] = []
        self.acc = Accumulator(max_messages, max_bytes, linger_s, self.schedule, self.ready, self.hooks)
        self.acc.ids = UniqIdGenerator("127.0.0.1", pid=7)

    def schedule(self, delay_s: float, fn: Any, key: BatchKey) -> Handle:
        handle = Handle()
        self.scheduled.append((delay_s, key, handle))
        return handle

    def ready(self, batch: Batch, body: bytes) -> None:
        self.sent.append((batch, body))


def msg(topic: str = "T", body: bytes = b"x", **props: str) -> Message:
    return Message(topic, body, properties=dict(props))


def test_messages_of_a_topic_fill_one_body_with_their_uniq_keys() -> None:
    h = Harness(linger_s=0.005)
    msgs = [msg(body=b"m%d" % i, k=str(i)) for i in range(3)]
    for m in msgs:
        h.acc.append(m, Fut(), None)
    assert [(d, k) for d, k, _ in h.scheduled] == [(0.005, "T")]  # one linger timer per batch
    assert not h.sent
    h.acc.flush_all()
    ((batch, body),) = h.sent
    assert h.scheduled[0][2].cancelled and not h.acc.pending
    items = decode_batch(body)
    assert [i.body for i in items] == [b"m0", b"m1", b"m2"]
    props = [parse_properties(i.properties) for i in items]
    assert [p["k"] for p in props] == ["0", "1", "2"]
    assert [p[c.UNIQ_KEY] for p in props] == batch.uniqs == [m.properties[c.UNIQ_KEY] for m in msgs]
    assert len(set(batch.uniqs)) == 3 and len(batch.futures) == 3
    assert batch.messages == []  # no hooks: the messages themselves are not kept


def test_a_full_batch_leaves_at_once_by_count_or_by_bytes() -> None:
    h = Harness(max_messages=2)
    for i in range(5):
        h.acc.append(msg(body=b"%d" % i), Fut(), None)
    assert [len(b.futures) for b, _ in h.sent] == [2, 2]
    assert len(h.acc.pending["T"].futures) == 1
    h = Harness(max_bytes=200)  # an item: 60 bytes of body, ~40 of UNIQ_KEY, 22 of layout
    h.acc.append(msg(body=b"a" * 60), Fut(), None)
    assert not h.sent
    h.acc.append(msg(body=b"b" * 60), Fut(), None)
    assert [len(b.futures) for b, _ in h.sent] == [2] and not h.acc.pending


def test_an_explicit_queue_has_its_own_batch() -> None:
    h = Harness()
    mq = MessageQueue("T", "b", 3)
    h.acc.append(msg(), Fut(), None)
    h.acc.append(msg(), Fut(), mq)
    assert set(h.acc.pending) == {"T", ("T", mq)}
    assert h.acc.pending[("T", mq)].queue == mq and h.acc.pending["T"].queue is None


@pytest.mark.parametrize("bad", [{"k": "a\x01b"}, {"": "v"}, {"k": 1}, {"k": "v" * 40_000}])
def test_a_refused_message_leaves_the_batch_as_it_was(bad: dict[str, Any]) -> None:
    h = Harness()
    h.acc.append(msg(body=b"before"), Fut(), None)
    batch = h.acc.pending["T"]
    body, count = bytes(batch.body), len(batch.futures)
    with pytest.raises(MessageValidationError):
        h.acc.append(Message("T", b"bad", properties=bad), Fut(), None)
    assert bytes(batch.body) == body and len(batch.futures) == count == len(batch.uniqs)
    fresh = Harness()  # refused as the first message of its topic: no batch is opened
    with pytest.raises(MessageValidationError):
        fresh.acc.append(Message("T", b"bad", properties=bad), Fut(), None)
    assert not fresh.acc.pending and not fresh.scheduled


def test_batches_keep_their_messages_while_hooks_are_registered() -> None:
    h = Harness()
    h.hooks.append(object())
    m = msg()
    h.acc.append(m, Fut(), None)
    assert h.acc.pending["T"].messages == [m]


def test_the_python_reference_writes_what_native_writes() -> None:
    if native is None:
        pytest.skip("no C extension")
    ids = UniqIdGenerator("127.0.0.1", pid=7)
    m = msg(body=b"\x00body", TAGS="t", KEYS="a b")
    fast = bytearray()
    uniq = native.batch_append(fast, m.flag, m.body, m.properties, ids.prefix, ids.start_ms, ids.next_start_ms, 5)
    assert uniq is not None
    h = Harness()
    reference = bytearray()
    m.properties[c.UNIQ_KEY] = uniq
    assert h.acc.append_py(reference, m) == uniq
    assert bytes(fast) == bytes(reference)


def test_which_messages_may_travel_in_a_batch() -> None:
    assert batchable(msg(), 4096)
    assert not batchable(msg(body=b"x" * 4096), 4096)  # compressed: alone
    assert not batchable(msg(DELAY="3"), 4096)
    assert not batchable(msg(TRAN_MSG="true"), 4096)
    assert not batchable(msg("%RETRY%G"), 4096)
