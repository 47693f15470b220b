"""What a hostile or broken peer does to a server, over raw loopback sockets: connection
floods, frames that never finish, requests whose answers are never read.  Shared by
``tests/integration/test_connection_limits.py`` and ``benchmarks/limits_bench.py``."""

from __future__ import annotations

import errno
import resource
import selectors
import socket
import struct
import time

from apogee.remoting.codec import FrameDecoder, encode_bytes
from apogee.remoting.command import RemotingCommand


def rss_anon_kib(pid: int) -> int:
    """The anonymous resident memory of process ``pid`` (heap, not mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError(f"no RssAnon for {pid}")


def ensure_descriptors(count: int) -> None:
    """Raise this process's soft descriptor limit to ``count`` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        target = count if hard == resource.RLIM_INFINITY else min(count, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port))
    sock.setblocking(False)
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the peer closed ``sock`` (EOF or reset), without consuming data."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def send_until_blocked(sock: socket.socket, data: bytes, timeout_s: float = 5.0) -> int:
    """Send ``data``; stop early when the peer stops taking bytes (or closes)."""
    view = memoryview(data)
    sent = 0
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_WRITE)
        while sent < len(view) and time.monotonic() < deadline:
            try:
                sent += sock.send(view[sent:])
            except BlockingIOError:
                if not sel.select(0.2):
                    break  # nothing taken for a while: the peer is not reading
            except OSError:
                break
    return sent


class Flood:
    """``count`` connections opened at once (non-blocking connects), never sending a byte."""

    def __init__(self, host: str, port: int, count: int) -> None:
        ensure_descriptors(count + 256)
        self.socks: list[socket.socket] = []
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            err = sock.connect_ex((host, port))
            assert err in (0, errno.EINPROGRESS), errno.errorcode.get(err, err)
            self.socks.append(sock)

    def wait_closed(self, expected: int, timeout_s: float) -> list[socket.socket]:
        """Wait until the server closed ``expected`` of them; returns those still open."""
        open_socks = set(self.socks)
        closed = 0
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            for sock in self.socks:
                sel.register(sock, selectors.EVENT_READ)
            while closed < expected and time.monotonic() < deadline:
                for key, _ in sel.select(0.2):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    if closed_by_peer(ready):
                        sel.unregister(ready)
                        open_socks.discard(ready)
                        closed += 1
        return [s for s in self.socks if s in open_socks]

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def half_frame(frame_size: int) -> bytes:
    """The length word of a ``frame_size`` frame and half of the frame: it never completes."""
    return struct.pack(">i", frame_size) + bytes(frame_size // 2)


def roundtrip(sock: socket.socket, request: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    """Send ``request`` on a raw socket and read its one answer."""
    send_until_blocked(sock, encode_bytes(request), timeout_s)
    return read_answers(sock, 1, timeout_s)[0]


def read_answers(sock: socket.socket, count: int, timeout_s: float = 10.0) -> list[RemotingCommand]:
    """Read ``count`` frames from ``sock`` (raises on timeout or EOF)."""
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while len(answers) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(answers)} of {count} answers arrived")
            if not sel.select(min(remaining, 0.5)):
                continue
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError(f"closed after {len(answers)} of {count} answers")
            answers += decoder.feed(data)
    return answers
