"""Reused buffers for the request bodies of large auto-batches (Kafka's producer ``BufferPool``).

Why: an auto-batch of 512 messages of 1 KiB is a ~560 KB body.  Copied into a fresh ``bytes``
for every request, it lands in memory the allocator has just taken from the kernel (glibc
maps blocks of this size, or trims the heap under them, and gives them back when freed), so
every page of every batch is faulted in and zeroed again: in the peer harness's W2 that was
three fifths of the client's page faults.  A buffer handed back after its request was
answered carries the next batch in pages that are already there.

A body is copied into a buffer taken from the pool (``take``), sent as a view of it, and the
buffer comes back only through ``give`` when nothing can still read it: the producer gives
it back when the broker has answered the batch's one and only attempt (every byte of the
request had left the connection by then).  A batch that went through the retry loop never
gives its buffer back: an attempt that failed may still have bytes queued on its connection.

Bodies under ``MIN_BYTES`` come from the heap's warm memory anyway and travel as ``bytes``.
The idle buffers kept are bounded by ``max_bytes``.  The buffers in use are one per in-flight
request, which the producer's ``max_inflight_messages`` bounds as before; a reused buffer may
be larger than the batch it now carries (it is an eighth larger than the batch it was made
for), so when batches shrink the memory in flight shrinks only as buffers are dropped.
"""

from __future__ import annotations

MIN_BYTES = 128 * 1024  # glibc's default mmap threshold: smaller blocks come from the heap
POOL_BYTES = 16 << 20  # idle buffers kept, at most


class BufferPool:
    """Idle buffers for large request bodies; no locking (the producer's loop only)."""

    __slots__ = ("max_bytes", "idle_bytes", "_idle")

    def __init__(self, max_bytes: int = POOL_BYTES) -> None:
        self.max_bytes = max_bytes
        self.idle_bytes = 0
        self._idle: list[bytearray] = []

    def take(self, data: bytearray) -> tuple[bytes | memoryview, bytearray | None]:
        """``data``'s bytes to send, and the pool buffer they are in (None: a ``bytes`` copy,
        nothing to give back).  The newest idle buffer is used when it is large enough (the
        one whose pages were touched last), else a new one an eighth larger than ``data``."""
        n = len(data)
        if n < MIN_BYTES:
            return bytes(data), None
        idle = self._idle
        if idle and len(idle[-1]) >= n:
            buf = idle.pop()
            self.idle_bytes -= len(buf)
            buf[:n] = data  # in place: the buffer keeps its size
        else:
            buf = bytearray(n + (n >> 3))  # room for a slightly larger batch next time
            buf[:n] = data
        return memoryview(buf)[:n], buf

    def give(self, buf: bytearray) -> None:
        """A buffer nothing can read any more; kept while the idle ones stay under
        ``max_bytes``, else left to the allocator."""
        if self.idle_bytes + len(buf) <= self.max_bytes:
            self._idle.append(buf)
            self.idle_bytes += len(buf)

    def clear(self) -> None:
        self._idle.clear()
        self.idle_bytes = 0
