"""The bookkeeping behind a server's connection limits, without sockets: the incomplete-frame
ledger, the rate-limited log line, what the decoder reports, and how a connection holds
requests and answers while its peer does not read."""

from __future__ import annotations

import asyncio
import logging

import pytest

from apogee.remoting.codec import FrameDecoder, encode_bytes
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.limits import FrameLimitError, IncompleteFrames, LimitCounters, RateLimitedLog, ServerLimits


class Holder:
    def __init__(self, name: str) -> None:
        self.peer = (name, 0)
        self.reading_paused = False
        self.dropped: list[str] = []

    def close(self, reason: str) -> None:
        self.dropped.append(reason)

    def drop_frame(self, reason: str) -> None:
        self.dropped.append(reason)

    def __repr__(self) -> str:
        return self.peer[0]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _ledger(max_bytes: int = 100, timeout_s: float = 5.0) -> tuple[IncompleteFrames, Clock]:
    ledger = IncompleteFrames(max_bytes, timeout_s, LimitCounters())
    clock = Clock()
    ledger._clock = clock
    return ledger, clock


def test_ledger_totals_follow_start_grow_release() -> None:
    ledger, _ = _ledger()
    a, b = Holder("a"), Holder("b")
    ledger.start(a, 10)
    ledger.grow(a, 30)
    ledger.start(b, 20)
    assert ledger.total == 50 and len(ledger) == 2
    ledger.release(a)
    ledger.release(a)  # idempotent: a closing connection releases too
    assert ledger.total == 20 and len(ledger) == 1


def test_over_the_total_the_oldest_frames_are_dropped_first() -> None:
    ledger, clock = _ledger(max_bytes=100)
    a, b, c = Holder("a"), Holder("b"), Holder("c")
    ledger.start(a, 40)
    clock.now += 1
    ledger.start(b, 40)
    clock.now += 1
    ledger.start(c, 50)  # 130 > 100: a (the oldest) goes, b and c fit
    assert a.dropped and "serverMaxIncompleteFrameBytes=100" in a.dropped[0]
    assert not b.dropped and not c.dropped
    assert ledger.total == 90 and ledger.counters.frames_dropped_for_memory == 1


def test_a_frame_that_is_itself_the_oldest_is_refused() -> None:
    ledger, clock = _ledger(max_bytes=100)
    a, b = Holder("a"), Holder("b")
    ledger.start(a, 10)
    clock.now += 1
    ledger.start(b, 10)
    with pytest.raises(FrameLimitError):
        ledger.grow(a, 200)
    assert not b.dropped and ledger.total == 10


def test_a_new_frame_on_the_same_connection_starts_a_new_deadline() -> None:
    ledger, clock = _ledger(timeout_s=5)
    a, b = Holder("a"), Holder("b")
    ledger.start(a, 10)
    ledger.start(b, 10)
    clock.now += 4
    ledger.start(a, 5)  # a's previous frame completed; this one is new
    clock.now += 2
    assert ledger.expired() == [b]


def test_expired_skips_connections_the_server_paused_and_restart_gives_a_new_deadline() -> None:
    ledger, clock = _ledger(timeout_s=5)
    a, b = Holder("a"), Holder("b")
    ledger.start(a, 10)
    ledger.start(b, 10)
    a.reading_paused = True
    clock.now += 6
    assert ledger.expired() == [b]
    a.reading_paused = False
    ledger.restart(a)
    assert ledger.expired() == [b]
    clock.now += 6
    assert ledger.expired() == [b, a]


def test_rate_limited_log_tells_a_flood_in_two_lines(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    line = RateLimitedLog(logging.getLogger("test.limits"), interval_s=10)
    line._clock = clock
    with caplog.at_level(logging.WARNING, "test.limits"):
        for i in range(2000):
            line("refusing connection %d", i)
        line.flush()  # the interval is not over yet
        assert [r.getMessage() for r in caplog.records] == ["refusing connection 0"]
        clock.now += 10
        line.flush()
        last = caplog.records[-1].getMessage()
        assert last == "1999 more like this in the last 10 s, the last: refusing connection 1999"
        line.flush()
        assert len(caplog.records) == 2


class Ledger:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def start(self, owner: object, nbytes: int) -> None:
        self.calls.append(("start", nbytes))

    def grow(self, owner: object, nbytes: int) -> None:
        self.calls.append(("grow", nbytes))

    def release(self, owner: object) -> None:
        self.calls.append(("release", 0))


def test_the_decoder_reports_only_reads_that_end_inside_a_frame() -> None:
    ledger = Ledger()
    decoder = FrameDecoder(1 << 20, ledger, "conn")
    frame = encode_bytes(RemotingCommand.request(10, {"k": "v"}, b"x" * 100))
    assert len(decoder.feed(frame + frame)) == 2
    assert ledger.calls == []  # complete frames: not a word to the ledger
    assert decoder.feed(frame[:50]) == []
    assert decoder.feed(frame[50:60]) == []
    assert len(decoder.feed(frame[60:] + frame[:7])) == 1  # one completes, the next begins
    assert len(decoder.feed(frame[7:])) == 1
    assert ledger.calls == [("start", 50), ("grow", 60), ("start", 7), ("release", 0)]


class PausableTransport:
    """Records writes; ``pause_at`` bytes buffered calls the protocol's pause_writing as a real
    transport does above its high-water mark."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.reading = True
        self.protocol: Connection | None = None
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        self.write(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Echo:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        self.seen.append(request.opaque)
        conn.send(request.response(0, body=b"a" * 10))


def _request(opaque: int) -> bytes:
    cmd = RemotingCommand.request(10)
    cmd.opaque = opaque
    return encode_bytes(cmd)


def test_a_server_connection_stops_taking_requests_while_its_peer_does_not_read() -> None:
    async def main() -> None:
        echo = Echo()
        conn = Connection(echo, RemotingConfig(), limits=ServerLimits(1 << 20, 30))
        transport = PausableTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(_request(0))
        conn.pause_writing()  # the transport is above its high-water mark
        assert not transport.reading
        conn.data_received(_request(1) + _request(2))  # read before the pause took effect
        assert echo.seen == [0]
        conn.resume_writing()
        assert echo.seen == [0, 1, 2] and transport.reading
        await asyncio.sleep(0)
        answers = FrameDecoder().feed(b"".join(transport.writes))
        assert [a.opaque for a in answers] == [0, 1, 2]

    asyncio.run(main())


def test_answers_written_while_paused_wait_unjoined_and_go_out_in_order() -> None:
    async def main() -> None:
        conn = Connection(Echo(), RemotingConfig(), limits=ServerLimits(1 << 20, 30))
        transport = PausableTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.pause_writing()
        late = [RemotingCommand.request(20 + i, body=[b"head", memoryview(b"view")]) for i in range(3)]
        for cmd in late:  # held pulls waking up: their answers are views of the store
            conn.send(cmd)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert transport.writes == []
        conn.resume_writing()
        assert [c.code for c in FrameDecoder().feed(b"".join(transport.writes))] == [20, 21, 22]

    asyncio.run(main())


def test_a_client_connection_never_stops_reading() -> None:
    async def main() -> None:
        echo = Echo()
        conn = Connection(echo, RemotingConfig())
        transport = PausableTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.pause_writing()
        conn.data_received(_request(5))
        assert transport.reading and echo.seen == [5]

    asyncio.run(main())
