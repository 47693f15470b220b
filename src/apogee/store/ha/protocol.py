"""The RocketMQ 4.x HA wire protocol and the decisions of both ends, without I/O.

The HA port carries raw TCP, no RemotingCommand, no handshake; integers are big-endian
(RocketMQ's ``HAService``/``HAConnection``, 4.9.8):

* slave -> master: 8 bytes, the slave's CommitLog max physical offset (a *report*), at
  connect, every ``haSendHeartbeatInterval`` and after every append;
* master -> slave: frames of an 8-byte physical offset, a 4-byte size and ``size`` raw
  CommitLog bytes (at most ``haTransferBatchSize``, never spanning two files); an idle
  master sends a header with size 0 as heartbeat.

Everything read here is untrusted: a decision that the link cannot go on raises
``HALinkError`` with the reason, and the caller closes that link only.
"""

from __future__ import annotations

import struct

from apogee.errors import RemoteProtocolError

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
REPORT_SIZE = REPORT.size  # 8
HEADER_SIZE = HEADER.size  # 12
# The most CommitLog bytes a slave accepts in one frame: RocketMQ's slave reads into a 4 MiB
# buffer (HAClient READ_MAX_BUFFER_SIZE), so no RocketMQ master sends a larger frame.
MAX_FRAME_BODY = 4 * 1024 * 1024


class HALinkError(RemoteProtocolError):
    """The peer's bytes (or its offsets) end this HA link; the reason says why."""


def encode_report(max_offset: int) -> bytes:
    """A slave's report of its CommitLog max offset."""
    return REPORT.pack(max_offset)


def encode_header(offset: int, size: int) -> bytes:
    """A master's frame header: ``size`` CommitLog bytes from ``offset`` follow."""
    return HEADER.pack(offset, size)


class ReportReader:
    """The master's side of the slave's byte stream.

    Like RocketMQ, only the newest complete report counts (several may arrive at once); a
    partial one waits for its remaining bytes.  At most 7 bytes are ever kept, so no input
    grows memory.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The newest complete report in ``data`` (after what came before), or None.
        Raises HALinkError for a negative offset (no CommitLog has one)."""
        buf = self._pending + data if self._pending else data
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._pending = bytes(buf[whole:])
        if not whole:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - REPORT_SIZE)
        if offset < 0:
            raise HALinkError(f"slave reported a negative max offset {offset}")
        return int(offset)


class FrameReader:
    """The slave's side of the master's byte stream: complete frames out of any split of it.

    A frame's size is checked against ``MAX_FRAME_BODY`` from its header, before its body
    is waited for, so a garbage header cannot make the slave buffer gigabytes.
    """

    __slots__ = ("_buf", "_max_body")

    def __init__(self, max_body: int = MAX_FRAME_BODY) -> None:
        self._buf = bytearray()
        self._max_body = max_body

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The frames completed by ``data``: (physical offset, body); heartbeats have an
        empty body.  Raises HALinkError for a negative offset or size, or an oversized body."""
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytes]] = []
        pos = 0
        while len(buf) - pos >= HEADER_SIZE:
            offset, size = HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self._max_body:
                raise HALinkError(f"master sent a frame header with offset {offset} and size {size}")
            end = pos + HEADER_SIZE + size
            if end > len(buf):
                break
            frames.append((offset, bytes(buf[pos + HEADER_SIZE : end])))
            pos = end
        del buf[:pos]
        return frames


# --- the master's decisions -------------------------------------------------------------------


def check_report(reported: int, master_max: int) -> None:
    """A report past the master's end means the slave holds bytes the master never wrote
    (a diverged slave, or garbage): the link ends (RocketMQ closes it too)."""
    if reported > master_max:
        raise HALinkError(
            f"slave reported max offset {reported}, past the master's max offset {master_max}"
            " (the slave's log is longer than the master's)"
        )


def start_offset(reported: int, master_min: int, master_max: int, file_size: int) -> int:
    """Where the master starts streaming to a slave whose first report is ``reported``.

    An empty slave (0) starts at the start of the master's last CommitLog file, as in
    RocketMQ; any other slave where it ends.  A slave whose end the master no longer holds
    (its files were deleted) cannot be continued: RocketMQ would wait forever, Apogee ends
    the link with the reason."""
    check_report(reported, master_max)
    if reported == 0:
        return master_max - master_max % file_size
    if reported < master_min:
        raise HALinkError(
            f"slave's max offset {reported} is before the master's first CommitLog byte {master_min}"
            " (those files were deleted); the slave needs a fresh store"
        )
    return reported


def chunk_size(offset: int, file_start: int, file_wrote: int, batch: int) -> int:
    """How many bytes the next frame from ``offset`` carries: up to the end of what the
    file holding it has written, at most ``batch``, so a frame never spans two files."""
    return max(0, min(batch, file_start + file_wrote - offset))


# --- the slave's decisions --------------------------------------------------------------------


def check_frame(slave_max: int, offset: int, size: int, file_size: int) -> None:
    """A frame the slave can append: at its own end (a non-empty slave) or at a file start
    (an empty one), inside one CommitLog file.  Anything else ends the link; the slave then
    reconnects and reports its offset again, as in RocketMQ."""
    if slave_max != 0 and offset != slave_max:
        raise HALinkError(f"master sent bytes at offset {offset}, the slave's max offset is {slave_max}")
    if slave_max == 0 and offset % file_size and size:
        raise HALinkError(f"master's first frame at {offset} is not at a CommitLog file start")
    if offset % file_size + size > file_size:
        raise HALinkError(f"master's frame at {offset} of {size} bytes spans two CommitLog files")


def slave_ok(reporting_links: int, put_end: int, push2slave_max: int, fallbehind_max: int) -> bool:
    """SYNC_MASTER: whether a put ending at ``put_end`` may wait for a slave (RocketMQ
    ``HAService.isSlaveOK``): some slave is linked and the best one is less than
    ``haSlaveFallbehindMax`` behind; otherwise SLAVE_NOT_AVAILABLE at once.  Apogee counts a
    link once it has sent a valid report (RocketMQ counts every accepted connection, so a
    port scanner would make it wait for nothing)."""
    return reporting_links > 0 and put_end - push2slave_max < fallbehind_max


def lag_ms(acked: int, master_max: int, first_unheld_ts: int | None, now_ms: int) -> int:
    """How old the first record a slave does not hold is: 0 when it holds everything;
    ``first_unheld_ts`` (its store time, or an estimate) unknown counts as 0."""
    if acked >= master_max or first_unheld_ts is None or first_unheld_ts <= 0:
        return 0
    return max(0, now_ms - first_unheld_ts)
