"""Write coalescing in ``Connection.send``: the first frame of a loop turn leaves at once,
later frames of the same turn go out in one write (a writelines), and a turn ends by itself.

A recording transport stands in for the socket: this is the connection's own bookkeeping,
not the network."""

from __future__ import annotations

import asyncio

from apogee.remoting.codec import encode_bytes
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from tests.support.transport import RecordingTransport, recorded_connection


def _frame(code: int) -> RemotingCommand:
    return RemotingCommand.request(code, {"k": str(code)}, b"body")


async def _connection() -> tuple[Connection, RecordingTransport]:
    return recorded_connection()


async def _next_turn() -> None:
    # Two yields: a callback scheduled in this turn has run once the second returns.
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_frames_of_one_turn_go_out_in_two_writes() -> None:
    async def main() -> None:
        conn, transport = await _connection()
        frames = [_frame(code) for code in (10, 11, 12)]
        for f in frames:
            conn.send(f)
        assert transport.writes == [encode_bytes(frames[0])]  # the first at once
        await _next_turn()
        assert transport.writes == [encode_bytes(frames[0]), encode_bytes(frames[1]) + encode_bytes(frames[2])]

    asyncio.run(main())


def test_a_frame_of_a_later_turn_is_not_held_back() -> None:
    """A held pull's answer, or a request after a quiet spell, is written when it is sent,
    even though no data arrived since the connection last wrote."""

    async def main() -> None:
        conn, transport = await _connection()
        first, later = _frame(20), _frame(21)
        conn.send(first)
        await _next_turn()
        conn.send(later)
        assert transport.writes == [encode_bytes(first), encode_bytes(later)]

    asyncio.run(main())


def test_arriving_data_opens_a_new_turn() -> None:
    """The request/reply pattern: each response to an arriving request leaves at once."""

    async def main() -> None:
        conn, transport = await _connection()
        conn.send(_frame(30))
        conn.data_received(b"")  # an arrival (empty: no complete frame in it)
        second = _frame(31)
        conn.send(second)
        assert transport.writes[-1] == encode_bytes(second)
        assert len(transport.writes) == 2

    asyncio.run(main())
