"""The producer's pool of request-body buffers (no loop, no socket): large bodies are copied
into reused buffers, a buffer is reused only once given back, idle memory stays bounded."""

from __future__ import annotations

from collections.abc import Callable

from apogee.client.producer.accumulator import Accumulator, Batch, BatchKey
from apogee.client.producer.buffer_pool import MIN_BYTES, BufferPool
from apogee.client.types import SendResult
from apogee.common.message import Message
from apogee.common.message_codec import decode_batch
from apogee.common.uniq_id import UniqIdGenerator


def test_a_small_body_travels_as_a_bytes_copy() -> None:
    pool = BufferPool()
    data = bytearray(b"x" * (MIN_BYTES - 1))
    body, buf = pool.take(data)
    assert body.__class__ is bytes and body == data and buf is None


def test_a_buffer_is_reused_only_after_it_was_given_back() -> None:
    pool = BufferPool()
    first, second = bytearray(b"a" * MIN_BYTES), bytearray(b"b" * MIN_BYTES)
    body1, buf1 = pool.take(first)
    body2, buf2 = pool.take(second)
    assert buf1 is not None and buf2 is not None and buf1 is not buf2  # both in flight
    assert bytes(body1) == first and bytes(body2) == second
    pool.give(buf1)
    third = bytearray(b"c" * (MIN_BYTES + 10))  # fits in the eighth of room the buffer has
    body3, buf3 = pool.take(third)
    assert buf3 is buf1 and bytes(body3) == third and len(body3) == len(third)
    assert bytes(body2) == second  # the buffer still in flight is untouched


def test_a_body_larger_than_the_idle_buffer_gets_a_new_one() -> None:
    pool = BufferPool()
    _, small = pool.take(bytearray(MIN_BYTES))
    assert small is not None
    pool.give(small)
    body, big = pool.take(bytearray(b"z" * (2 * MIN_BYTES)))
    assert big is not small and len(body) == 2 * MIN_BYTES
    assert pool.idle_bytes == len(small)  # the smaller one stays idle


def test_idle_buffers_stay_under_the_budget() -> None:
    pool = BufferPool(max_bytes=3 * MIN_BYTES)
    bufs = [pool.take(bytearray(MIN_BYTES))[1] for _ in range(4)]
    for buf in bufs:
        assert buf is not None
        pool.give(buf)
    assert pool.idle_bytes <= 3 * MIN_BYTES and pool.idle_bytes == 2 * len(bufs[0])  # type: ignore[arg-type]
    pool.clear()
    assert pool.idle_bytes == 0


def test_the_accumulator_sends_a_large_batch_from_a_recycled_buffer() -> None:
    sent: list[tuple[Batch, bytes | memoryview]] = []
    acc = Accumulator(512, 1 << 20, 0.0, _schedule, lambda b, body: sent.append((b, body)), [])
    acc.ids = UniqIdGenerator("127.0.0.1", pid=7)

    def fill(mark: bytes) -> None:
        for _ in range(200):  # ~200 KiB: past MIN_BYTES
            acc.append(Message("T", mark * 1024), _Fut(), None)
        acc.flush_key("T")

    fill(b"a")
    fill(b"b")
    (b1, body1), (b2, body2) = sent
    assert b1.wire is not None and b2.wire is not None and b1.wire is not b2.wire
    assert [m.body for m in decode_batch(bytes(body1))] == [b"a" * 1024] * 200
    wire = b1.wire
    acc.recycle(b1)
    assert b1.wire is None
    fill(b"c")
    b3, body3 = sent[2]
    assert b3.wire is wire and [m.body for m in decode_batch(bytes(body3))] == [b"c" * 1024] * 200


class _Fut:
    def done(self) -> bool:
        return False

    def set_result(self, result: SendResult, /) -> None:
        pass

    def set_exception(self, exception: BaseException, /) -> None:
        pass


class _Handle:
    def cancel(self) -> None:
        pass


def _schedule(delay_s: float, fn: Callable[[BatchKey], None], key: BatchKey) -> _Handle:
    return _Handle()
