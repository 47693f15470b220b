"""A signing client connection (remoting/signed.py) with a large body: hashed off the loop,
written when signed, and the requests made after it written after it.  A recording transport
stands in for the socket."""

from __future__ import annotations

import asyncio

import pytest

from apogee.remoting import signed
from apogee.remoting.body_hasher import LARGE_BODY_BYTES
from apogee.remoting.codec import FrameDecoder
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.signing import SIGNATURE, SessionCredentials, Signer
from tests.support.transport import RecordingTransport, frames_written

SIGNER = Signer(SessionCredentials("RocketMQ", "12345678"))
BIG = b"b" * LARGE_BODY_BYTES


@pytest.fixture(autouse=True)
def _off_the_loop_whatever_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signed, "BACKGROUND_MIN_BYTES", LARGE_BODY_BYTES)


def connected() -> tuple[signed.SigningConnection, RecordingTransport]:
    conn = signed.SigningConnection(SIGNER, None, RemotingConfig())
    transport = RecordingTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def test_requests_after_a_large_one_are_written_after_it_each_signed() -> None:
    async def main() -> None:
        conn, transport = connected()
        conn.invoke(RemotingCommand.request(320, {"b": "T"}, BIG), 5000)
        conn.invoke_fields(310, ("b",), ("T",), b"small", 5000)
        conn.invoke_oneway(RemotingCommand.request(34, {}, b"beat"))
        assert transport.writes == []  # all wait for the first one's signature
        frames = await frames_written(transport.writes, 3)
        assert [f.code for f in frames] == [320, 310, 34]
        for frame, unsigned in zip(frames, ({"b": "T"}, {"b": "T"}, {}), strict=True):
            assert frame.ext_fields == SIGNER.sign_ext(unsigned, frame.body), frame.code
        conn.invoke_fields(310, ("b",), ("T",), b"later", 5000)  # nothing waits: written at once
        assert len(FrameDecoder().feed(b"".join(transport.writes))) == 4

    asyncio.run(main())


class NotABuffer:
    """A body part that has a length but cannot be hashed: the hash fails on the thread."""

    def __len__(self) -> int:
        return LARGE_BODY_BYTES


def test_a_failed_hash_fails_its_request_and_those_behind_it_still_go() -> None:
    async def main() -> None:
        conn, transport = connected()
        failed = conn.invoke(RemotingCommand.request(320, {"b": "T"}, [NotABuffer()]), 5000)  # type: ignore[list-item]
        conn.invoke_fields(310, ("b",), ("T",), b"small", 5000)
        with pytest.raises(TypeError):
            await asyncio.wait_for(failed, 10)
        frames = await frames_written(transport.writes, 1)
        assert [f.code for f in frames] == [310] and SIGNATURE in (frames[0].ext_fields or {})

    asyncio.run(main())
