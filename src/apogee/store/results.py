"""Outcomes of store operations, as values (style rule 4).

A full disk, an offset past the end or a flush that timed out is a status the broker turns into
a response code; only the unexpected (corruption, a closed store, a bug) raises.  The status
names and the meaning of ``next_begin_offset`` follow RocketMQ's PutMessageStatus,
GetMessageStatus and DefaultMessageStore.getMessage (docs/protocol.md, Pull).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from apogee.common.message_id import create_offset_msg_id

# The filter a pull passes to the store: defined in common, so the filters themselves
# (apogee.filter, pure) need not import the store; part of the store's API all the same.
from apogee.common.pull_filter import MessageFilter as MessageFilter
from apogee.common.pull_filter import TagCodeFilter as TagCodeFilter


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    # Apogee: disk use passed diskSpaceWarningLevelRatio; writes are refused until cleanup
    # frees space (RocketMQ answers SERVICE_NOT_AVAILABLE; map it to that code, remark "disk full").
    DISK_FULL = "DISK_FULL"
    # Apogee: fsync failed.  The bytes may not be on disk; the store stops accepting writes
    # (RocketMQ swallowed such errors and still answered SEND_OK).
    FLUSH_DISK_FAILED = "FLUSH_DISK_FAILED"
    # Apogee: the store is a slave's (brokerRole=SLAVE): only the master's bytes are written
    # (RocketMQ answers SERVICE_NOT_AVAILABLE from checkStoreStatus; the same code, a remark
    # that says why).
    SLAVE_READ_ONLY = "SLAVE_READ_ONLY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        return self is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """The record is in the CommitLog, though a wait for its flush or a slave failed
        (RocketMQ answers these with the message's id: sendOK)."""
        return self in _STORED


_STORED = frozenset((
    PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE,
))


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutResult:
    """What one put (a message or a whole batch) did.

    ``wrote_offset`` is the CommitLog offset of the first record, ``logics_offset`` its queue
    offset; a batch wrote ``msg_num`` contiguous records.  ``msg_id`` (the offset msg id, comma
    joined for a batch) is computed on first use, since many callers never read it.
    """

    __slots__ = (
        "status", "wrote_offset", "wrote_bytes", "logics_offset", "store_timestamp", "msg_num",
        "store_ip", "store_port", "_record_offsets", "_msg_id",
    )

    def __init__(
        self,
        status: PutStatus,
        wrote_offset: int = -1,
        wrote_bytes: int = 0,
        logics_offset: int = -1,
        store_timestamp: int = 0,
        msg_num: int = 0,
        store_ip: bytes = b"\x00\x00\x00\x00",
        store_port: int = 0,
        record_offsets: Sequence[int] | None = None,
        msg_id: str | None = None,
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.logics_offset = logics_offset
        self.store_timestamp = store_timestamp
        self.msg_num = msg_num
        self.store_ip = store_ip
        self.store_port = store_port
        self._record_offsets = record_offsets
        self._msg_id = msg_id

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def record_offsets(self) -> Sequence[int]:
        """CommitLog offset of each record written (one for a single message)."""
        if self._record_offsets is not None:
            return self._record_offsets
        if self._msg_id is not None and self.msg_num > 1:  # a batch written by the C path
            return [int(one[16:], 16) for one in self._msg_id.split(",")]
        return [self.wrote_offset] if self.msg_num else []

    @property
    def msg_id(self) -> str:
        """Offset msg id(s), comma-joined for a batch, as the SEND response's ``msgId``."""
        if self._msg_id is None:
            self._msg_id = ",".join(
                create_offset_msg_id(self.store_ip, self.store_port, off)
                for off in self.record_offsets
            )
        return self._msg_id

    def __repr__(self) -> str:
        return (
            f"PutResult({self.status.name}, wrote_offset={self.wrote_offset}, "
            f"logics_offset={self.logics_offset}, msg_num={self.msg_num})"
        )


class GetResult:
    """Messages of one queue from one offset, as slices of the mapped CommitLog.

    ``buffers`` hold the stored records of ``queue_offsets``, in order, back to back: records
    stored contiguously share one slice, or all of them are one copy made by the C fast path
    (``StoreReader._collect``).  Hand them to the transport unchanged and drop them after (a
    live slice pins its file).
    """

    __slots__ = (
        "status", "buffers", "queue_offsets", "next_begin_offset", "min_offset", "max_offset",
        "buffer_total_size", "suggest_pulling_from_slave",
    )

    def __init__(self, status: GetStatus = GetStatus.NO_MESSAGE_IN_QUEUE) -> None:
        self.status = status
        self.buffers: list[memoryview] = []
        self.queue_offsets: list[int] = []
        self.next_begin_offset = 0
        self.min_offset = 0
        self.max_offset = 0
        self.buffer_total_size = 0
        self.suggest_pulling_from_slave = False

    @property
    def message_count(self) -> int:
        return len(self.queue_offsets)

    def release(self) -> None:
        """Release the slices now (else garbage collection does), letting files be unmapped."""
        for buf in self.buffers:
            buf.release()
        self.buffers.clear()
        self.queue_offsets.clear()

    def __repr__(self) -> str:
        return (
            f"GetResult({self.status.name}, count={self.message_count}, "
            f"next={self.next_begin_offset}, min={self.min_offset}, max={self.max_offset})"
        )


class QueryResult:
    """Messages found by key: stored records (newest first) plus the index's freshness."""

    __slots__ = ("buffers", "phys_offsets", "index_last_update_timestamp", "index_last_update_phyoffset")

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []
        self.phys_offsets: list[int] = []
        self.index_last_update_timestamp = 0
        self.index_last_update_phyoffset = 0

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def release(self) -> None:
        for buf in self.buffers:
            buf.release()
        self.buffers.clear()
