"""A transport that records what a ``Connection`` writes, for unit tests of the connection's
own bookkeeping (write coalescing, opaque matching, answers): no socket, no network."""

from __future__ import annotations

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
