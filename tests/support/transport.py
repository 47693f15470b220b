"""A transport that records what a ``Connection`` writes, for unit tests of the connection's
own bookkeeping (write coalescing, opaque matching, answers): no socket, no network."""

from __future__ import annotations

import asyncio
import time

from apogee.remoting.codec import FrameDecoder
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.server import RequestDispatcher


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        """One write of all the parts (uvloop issues a single writev())."""
        self.writes.append(b"".join(parts))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def close(self) -> None:
        pass


def recorded_connection(dispatcher: RequestDispatcher | None = None) -> tuple[Connection, RecordingTransport]:
    """A connected ``Connection`` (call it inside a running loop) and what it writes."""
    conn = Connection(dispatcher, RemotingConfig())
    transport = RecordingTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def frames_written(writes: list[bytes], count: int, timeout_s: float = 10.0) -> list[RemotingCommand]:
    """The frames in ``writes`` (a recording transport's) once there are ``count`` of them:
    what another thread hands back to the loop arrives in later loop turns."""
    deadline = time.monotonic() + timeout_s
    while True:
        frames = FrameDecoder().feed(b"".join(writes))
        if len(frames) >= count:
            return frames
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} frames expected within {timeout_s} s, {len(frames)} written")
        await asyncio.sleep(0.005)
