"""The CommitLog: every topic's messages appended, in RocketMQ's record format, to one log.

Appends take ``_lock`` (one writer at a time) and do the minimum under it: pick the file
(rolling to the next one with an end-of-file blank record when the record does not fit),
assign queue offset, physical offset and store timestamp, pack the 88 fixed bytes into the
mapping and copy body, topic and properties.  Encoding work that does not depend on those
three values (topic and properties fields, body CRC) happens before the lock.

Each append also leaves a *dispatch hint* (the fields the dispatcher needs, already known
here) so that the ConsumeQueue and index are built without decoding the record again.  Hints
are bounded; when the dispatcher lags too far it decodes from the log instead.  Hint tuple:
``(phys, size, topic, queue_id, queue_offset, tags_code, store_ts, sysflag, properties)``.
Index keys (KEYS, UNIQ_KEY) are looked up by the dispatcher, as RocketMQ's reput does, to keep
the append path short.

A client batch that ``native.scan_batch`` accepted is written by ``native.write_batch`` straight
from the request body, and leaves one *run hint* for the whole batch instead:
``(phys, size, topic, queue_id, first_queue_offset, count, cq_entries, tag_codes, store_ts,
sysflag, index_entries)`` (11 fields), which the dispatcher applies with one copy into the
ConsumeQueue and one C call for the index.

Threads: appends and reads on the owner's (event loop) thread; file pre-creation, fdatasync
and deletion on the I/O thread through the MappedFileQueue.
"""

from __future__ import annotations

import collections
import errno
import logging
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.java_hash import index_prefix_hash
from apogee.common.java_hash import tags_code as compute_tags_code
from apogee.common.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    OFF_BODY,
    RECORD_FIXED,
    body_crc,
    check_record,
    get_property,
    join_properties,
    properties_field,
    properties_to_string,
    read_dispatch_fields,
    read_store_timestamp,
    topic_field,
    topic_field_cache,
    write_record,
)
from apogee.common.message_id import ip_bytes_cache, ip_to_bytes
from apogee.errors import StoreError
from apogee.store.config import StoreConfig
from apogee.store.inner import InnerBatch, InnerMessage, PlainMessage
from apogee.store.mapped_file import MappedFile
from apogee.store.mapped_file_queue import MappedFileQueue
from apogee.store.results import PutResult, PutStatus

log = logging.getLogger("apogee.store.commitlog")

_BLANK = struct.Struct(">ii")
_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_pack_fixed_into = RECORD_FIXED.pack_into
_NOT_V6 = ~(c.BORNHOST_V6_FLAG | c.STOREHOSTADDRESS_V6_FLAG)
_NOT = c.TRANSACTION_NOT_TYPE
_COMMIT = c.TRANSACTION_COMMIT_TYPE
_TRAN_MASK = c.TRANSACTION_TYPE_MASK
_QUEUED = frozenset((_NOT, _COMMIT))  # transaction types that get a ConsumeQueue entry
_TAGS = c.PROPERTY_TAGS
_DELAY = c.PROPERTY_DELAY_TIME_LEVEL
_PUT_OK = PutStatus.PUT_OK  # read per put (an Enum class attribute read is slow: docs/architecture.md)
_SCHEDULE = c.SCHEDULE_TOPIC

DEFAULT_HINT_CAPACITY = 32_768  # ~10 MiB of hints at most; beyond, dispatch decodes the log


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class CommitLog:
    def __init__(
        self,
        config: StoreConfig,
        mfq: MappedFileQueue,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        delay_levels_ms: list[int] | None = None,
    ) -> None:
        self.config = config
        self.mfq = mfq
        self.file_size = mfq.file_size
        self._clock = clock
        self._lock = threading.Lock()
        self._max_body = config.max_message_size
        self._delay_ms = delay_levels_ms or c.parse_delay_levels(config.message_delay_level)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.last_store_ts = 0
        self.hints: collections.deque[tuple[Any, ...]] = collections.deque()
        self.hint_capacity = DEFAULT_HINT_CAPACITY
        self.index_enabled = config.message_index_enable
        self._populate_step = config.populate_ahead_bytes
        self._populate_end = 0  # position in the last file up to which population was requested
        self._populate_mark = 0  # write position that triggers the next request
        self.no_space = False  # the last file creation failed for lack of disk space

    # --- offsets ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset

    @property
    def max_offset(self) -> int:
        """Offset just past the last appended byte (the next record's offset)."""
        return self.mfq.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.mfq.flushed_offset

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # --- appends -------------------------------------------------------------------------------

    def _schedule_tags(self, props: str | None, store_ts: int) -> int:
        """SCHEDULE_TOPIC tagsCode: the deliver time (RocketMQ computeDeliverTimestamp)."""
        try:
            level = int(props) if props else 0
        except ValueError:
            level = 0
        if 0 < level <= len(self._delay_ms):
            return store_ts + self._delay_ms[level - 1]
        return store_ts + 1000

    def put_message(self, msg: InnerMessage) -> PutResult:
        """Append one record.  Owner thread; never blocks except to roll into a new file.

        Written flat on purpose: this is the hottest path of the broker (one pack_into for the
        fixed fields, crc32, three slice copies into the mapping).
        """
        body = msg.body
        body_len = len(body)
        if body_len > self._max_body:
            log.warning("message body of %d bytes exceeds maxMessageSize", body_len)
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        topic = msg.topic
        tf = topic_field_cache.get(topic)
        if tf is None:
            try:
                tf = topic_field(topic)
            except ValueError:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
        props = msg.properties
        tags = msg.tags_code
        if props.__class__ is str:
            pstr = props
            if tags is None:
                tags = compute_tags_code(get_property(pstr, _TAGS)) if pstr else 0
        else:
            pstr = properties_to_string(props)  # type: ignore[arg-type]
            if tags is None:
                tags = compute_tags_code(props.get(_TAGS))  # type: ignore[union-attr]
        praw = pstr.encode("utf-8")
        props_len = len(praw)
        if props_len > c.MAX_PROPERTIES_LENGTH:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
        if b"\x00" in praw:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)  # NUL marks torn writes (recovery)
        tail = tf + _I16.pack(props_len) + praw
        total = OFF_BODY + body_len + len(tail)
        if total + 8 > self.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        crc = body_crc(body)
        born_host = msg.born_host
        store_host = msg.store_host
        born_ip = ip_bytes_cache.get(born_host[0]) or ip_to_bytes(born_host[0])
        store_ip = ip_bytes_cache.get(store_host[0]) or ip_to_bytes(store_host[0])
        store_port = store_host[1]
        sysflag = msg.sysflag & _NOT_V6
        tran = sysflag & _TRAN_MASK
        queue_id = msg.queue_id
        with self._lock:
            mf = self._file_for_locked(total)
            if mf.__class__ is not MappedFile:
                return PutResult(mf)  # type: ignore[arg-type]
            pos = mf.wrote
            phys = mf.start + pos
            now = self._clock()
            if now < self.last_store_ts:
                now = self.last_store_ts  # store times never go backwards (recovery relies on it)
            self.last_store_ts = now
            key = (topic, queue_id)
            queued = tran in _QUEUED  # PREPARED / ROLLBACK: no ConsumeQueue entry (RocketMQ)
            qoff = self.topic_queue_table.get(key, 0) if queued else 0
            mm = mf.mm
            try:
                p = pos + OFF_BODY
                mm[p : p + body_len] = body
                p += body_len
                mm[p : pos + total] = tail
                # fixed part last (see message_codec.write_record): no half record looks valid
                _pack_fixed_into(
                    mm, pos, total, MESSAGE_MAGIC_CODE, crc, queue_id, msg.flag, qoff, phys, sysflag,
                    msg.born_timestamp, born_ip, born_host[1], now, store_ip, store_port,
                    msg.reconsume_times, msg.prepared_transaction_offset, body_len,
                )
            except BaseException as exc:
                return self._unwrite_locked(mf, pos, total, exc)
            # The queue offset is taken only now, by a record that is written (issue 16).
            mf.wrote = pos + total
            if queued:
                self.topic_queue_table[key] = qoff + 1
            if topic == _SCHEDULE:
                tags = self._schedule_tags(get_property(pstr, _DELAY), now)
            hints = self.hints
            if len(hints) < self.hint_capacity:
                hints.append((phys, total, topic, queue_id, qoff, tags, now, sysflag, pstr))
        return PutResult(_PUT_OK, phys, total, qoff, now, 1, store_ip, store_port)

    @staticmethod
    def _unwrite_locked(mf: MappedFile, pos: int, total: int, exc: BaseException) -> PutResult:
        """A write into the mapping failed part way (a field out of its Java range makes
        ``pack_into`` raise after earlier fields are in place): clear what was written, so the
        space past ``wrote`` stays zero as recovery expects, and refuse the put.  Nothing else
        changed: ``wrote``, the queue offset and the hints are only updated after a write.
        Anything but a value error is a bug and is raised again."""
        mf.zero_range(pos, min(pos + total, mf.size))
        if not isinstance(exc, (struct.error, OverflowError, TypeError, ValueError)):
            raise exc
        log.warning("put refused, a field is out of range: %s", exc)
        return PutResult(PutStatus.MESSAGE_ILLEGAL)

    def _file_for_locked(self, total: int) -> MappedFile | PutStatus:
        """The file the next ``total`` bytes go to (rolling to a new file when they do not fit
        with room for the end-of-file blank), its pages populated ahead and its disk blocks
        reserved; or the status that refuses the put."""
        files = self.mfq.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote + total + 8 > mf.size:
            rolled = self._roll_locked()
            if isinstance(rolled, PutStatus):
                return rolled
            mf = rolled
        end = mf.wrote + total
        if end > self._populate_mark:
            self._populate_ahead_locked(mf)
        if end > mf.reserved and not self._reserve_locked(mf, end):
            return PutStatus.DISK_FULL
        return mf

    def _reserve_locked(self, mf: MappedFile, needed: int) -> bool:
        """Allocate disk blocks for a write the I/O thread has not reserved yet (rare: it
        normally runs ahead with the population).  False when the disk is full."""
        try:
            mf.reserve(max(needed, min(mf.size, mf.wrote + max(self._populate_step, 1 << 22))))
        except OSError as exc:
            log.error("cannot allocate CommitLog space in %s: %s", mf.path.name, exc)
            return False
        return True

    def _populate_ahead_locked(self, mf: MappedFile) -> None:
        """Ask the I/O thread to fault in the next window of the file being written."""
        step = self._populate_step
        executor = self.mfq.executor
        if step <= 0 or executor is None:
            self._populate_mark = 1 << 62
            return
        begin = max(self._populate_end, mf.wrote)
        end = min(begin + step, mf.size)
        if end > begin:
            executor.submit(mf.populate, begin, end)
        self._populate_end = end
        self._populate_mark = end - step // 2 if end < mf.size else 1 << 62

    def put_messages(self, batch: InnerBatch) -> PutResult:
        """Append a batch as contiguous records in one file with consecutive queue offsets."""
        if batch.raw is not None:
            return self._put_raw_batch(batch, batch.raw)
        if not batch.items:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        sysflag = batch.sysflag & ~(c.BORNHOST_V6_FLAG | c.STOREHOSTADDRESS_V6_FLAG)
        if sysflag & _TRAN_MASK != _NOT:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)  # no transactional batches (RocketMQ)
        bprops = batch.properties
        batch_pstr = bprops if isinstance(bprops, str) else properties_to_string(bprops)
        if get_property(batch_pstr, _DELAY):
            return PutResult(PutStatus.MESSAGE_ILLEGAL)  # no delayed batches (RocketMQ)
        try:
            tf = topic_field(batch.topic)
        except ValueError:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        encoded: list[tuple[Any, ...]] = []
        batch_total = 0
        for flag, body, item_props in batch.items:
            if len(body) > self._max_body:
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
            pstr = join_properties(item_props, batch_pstr)
            try:
                pf = properties_field(pstr)
            except ValueError:
                if "\x00" in pstr:
                    return PutResult(PutStatus.MESSAGE_ILLEGAL)
                return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
            total = OFF_BODY + len(body) + len(tf) + len(pf)
            tags = compute_tags_code(get_property(pstr, _TAGS))
            encoded.append((flag, body, pf, total, body_crc(body), tags, pstr))
            batch_total += total
        if batch_total + 8 > self.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        born_ip = ip_to_bytes(batch.born_host[0])
        born_port = batch.born_host[1]
        store_ip = ip_to_bytes(batch.store_host[0])
        store_port = batch.store_host[1]
        topic, queue_id = batch.topic, batch.queue_id
        offsets: list[int] = []
        with self._lock:
            mf = self._file_for_locked(batch_total)
            if mf.__class__ is not MappedFile:
                return PutResult(mf)  # type: ignore[arg-type]
            now = max(self._clock(), self.last_store_ts)
            self.last_store_ts = now
            key = (topic, queue_id)
            first_qoff = qoff = self.topic_queue_table.get(key, 0)
            pos = mf.wrote
            first_phys = mf.start + pos
            mm = mf.mm
            hints: list[tuple[Any, ...]] = []
            try:
                for flag, body, pf, total, crc, tags, pstr in encoded:
                    phys = mf.start + pos
                    write_record(
                        mm, pos, total, crc, queue_id, flag, qoff, phys, sysflag,
                        batch.born_timestamp, born_ip, born_port, now, store_ip, store_port,
                        batch.reconsume_times, 0, body, tf, pf,
                    )
                    hints.append((phys, total, topic, queue_id, qoff, tags, now, sysflag, pstr))
                    offsets.append(phys)
                    pos += total
                    qoff += 1
            except BaseException as exc:
                return self._unwrite_locked(mf, first_phys - mf.start, batch_total, exc)
            mf.wrote = pos
            self.topic_queue_table[key] = qoff
            if len(self.hints) < self.hint_capacity - len(hints):
                self.hints.extend(hints)
        return PutResult(
            _PUT_OK, first_phys, batch_total, first_qoff, now, len(encoded),
            store_ip, store_port, offsets,
        )

    def put_plain(self, msg: PlainMessage) -> PutResult:
        """``put_message`` of a single send whose properties ``native.scan_single`` accepted:
        the same record, written in C, with a run hint of one.

        The broker's common case (no delay, no transaction, no retry topic) in one C call
        instead of a dict round trip of the properties and an ``InnerMessage``.
        """
        assert native is not None
        topic, queue_id, body, props, extra, props_len, sysflag, flag, born_timestamp, born_host, store_host, \
            reconsume_times = msg
        sysflag &= _NOT_V6
        try:
            tf = topic_field(topic)
        except ValueError:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        body_len = len(body)
        total = OFF_BODY + body_len + len(tf) + 2 + props_len
        if body_len > self._max_body or total + 8 > self.file_size or sysflag & _TRAN_MASK != _NOT:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        born_ip = ip_bytes_cache.get(born_host[0]) or ip_to_bytes(born_host[0])
        store_ip = ip_bytes_cache.get(store_host[0]) or ip_to_bytes(store_host[0])
        store_port = store_host[1]
        prefix = index_prefix_hash(topic) if self.index_enabled else -1
        return self._put_run(
            total, topic, queue_id, 1, sysflag, store_ip, store_port, native.write_single,
            (body, props, extra, tf, queue_id), (sysflag, flag, born_timestamp, born_ip, born_host[1]),
            (store_ip, store_port, reconsume_times, prefix),
        )

    def _put_raw_batch(self, batch: InnerBatch, raw: bytes) -> PutResult:
        """``put_messages`` for a body ``native.scan_batch`` accepted: same records, in C."""
        assert native is not None
        sysflag = batch.sysflag & _NOT_V6
        if sysflag & _TRAN_MASK != _NOT:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)  # no transactional batches (RocketMQ)
        bprops = batch.properties
        batch_pstr = bprops if isinstance(bprops, str) else properties_to_string(bprops)
        topic = batch.topic
        try:
            tf = topic_field(topic)
        except ValueError:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        count, size = batch.raw_scan
        batch_total = size + count * len(tf)
        if batch_total + 8 > self.file_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        born_ip = ip_bytes_cache.get(batch.born_host[0]) or ip_to_bytes(batch.born_host[0])
        store_ip = ip_bytes_cache.get(batch.store_host[0]) or ip_to_bytes(batch.store_host[0])
        store_port = batch.store_host[1]
        queue_id = batch.queue_id
        prefix = index_prefix_hash(topic) if self.index_enabled else -1
        return self._put_run(
            batch_total, topic, queue_id, count, sysflag, store_ip, store_port, native.write_batch,
            (raw, batch_pstr.encode("utf-8"), tf, queue_id),
            (sysflag, batch.born_timestamp, born_ip, batch.born_host[1]),
            (store_ip, store_port, batch.reconsume_times, prefix),
        )

    def _put_run(
        self,
        total: int,
        topic: str,
        queue_id: int,
        count: int,
        sysflag: int,
        store_ip: bytes,
        store_port: int,
        write: Callable[..., tuple[bytes, bytes, str, tuple[int, ...] | None]],
        head: tuple[Any, ...],
        mid: tuple[Any, ...],
        tail: tuple[Any, ...],
    ) -> PutResult:
        """Append ``count`` records written in C by ``write`` (``native.write_batch`` or
        ``write_single``, called as ``write(mm, pos, *head, queue_offset, phys, *mid, store_ts,
        *tail)``) and leave their run hint."""
        with self._lock:
            mf = self._file_for_locked(total)
            if mf.__class__ is not MappedFile:
                return PutResult(mf)  # type: ignore[arg-type]
            pos = mf.wrote
            now = self._clock()
            if now < self.last_store_ts:
                now = self.last_store_ts
            self.last_store_ts = now
            key = (topic, queue_id)
            qoff = self.topic_queue_table.get(key, 0)
            phys = mf.start + pos
            try:
                cq, index_entries, msg_ids, tags = write(mf.mm, pos, *head, qoff, phys, *mid, now, *tail)
            except BaseException as exc:
                return self._unwrite_locked(mf, pos, total, exc)
            mf.wrote = pos + total
            self.topic_queue_table[key] = qoff + count
            hints = self.hints
            if len(hints) < self.hint_capacity:
                hints.append((phys, total, topic, queue_id, qoff, count, cq, tags, now, sysflag, index_entries))
        return PutResult(_PUT_OK, phys, total, qoff, now, count, store_ip, store_port, msg_id=msg_ids)

    def _roll_locked(self) -> MappedFile | PutStatus:
        """Close the current file with a blank record and start the next; on failure the
        status refusing the put, with ``no_space`` telling whether the disk was full."""
        last = self.mfq.files[-1] if self.mfq.files else None
        if last is not None and last.wrote < last.size:
            remaining = last.size - last.wrote
            _BLANK.pack_into(last.mm, last.wrote, remaining, BLANK_MAGIC_CODE)
            last.wrote = last.size
        start = last.end if last is not None else self.mfq.min_offset
        try:
            mf = self.mfq.add_file(start)
        except OSError as exc:
            log.error("cannot create CommitLog file at offset %d: %s", start, exc)
            self.no_space = exc.errno == errno.ENOSPC
            return PutStatus.CREATE_MAPPED_FILE_FAILED
        self.no_space = False
        self._populate_end = 0
        self._populate_mark = 0
        return mf

    # --- replication (a slave's appends) -------------------------------------------------------

    def append_replica(self, offset: int, data: bytes) -> None:
        """Write the master's CommitLog bytes ``data`` at ``offset``, the slave's end (RocketMQ
        ``CommitLog.appendData``): the slave's files become byte-identical to the master's,
        EOF blanks included.  An empty CommitLog starts with the file holding ``offset``.
        Raises StoreError when the bytes do not continue this log or do not fit its file."""
        with self._lock:
            files = self.mfq.files
            if len(files) == 1 and files[0].wrote == 0 and offset != files[0].start:
                # An empty log (its first file made at start): it begins where the master's bytes do.
                # Its pre-created successor would be a stray file beside the new start.
                self.mfq.discard_preallocated()
                empty = files.pop()
                self.mfq.destroy_files([empty])
            mf = files[-1] if files else None
            expected = mf.start + mf.wrote if mf is not None else offset - offset % self.file_size
            if offset != expected:
                raise StoreError(f"replicated bytes at {offset} do not continue the CommitLog at {expected}")
            try:
                if mf is None:
                    mf = self._replica_file_locked(offset)
                elif mf.wrote >= mf.size:
                    mf = self._replica_file_locked(mf.end)
            except OSError as exc:
                self.no_space = exc.errno == errno.ENOSPC
                raise StoreError(f"cannot create the CommitLog file for offset {offset}: {exc}") from exc
            end = mf.wrote + len(data)
            if end > mf.size:
                raise StoreError(f"replicated bytes at {offset} ({len(data)}) overrun the file {mf.path.name}")
            if end > self._populate_mark:
                self._populate_ahead_locked(mf)
            if end > mf.reserved and not self._reserve_locked(mf, end):
                self.no_space = True
                raise StoreError("no disk space for replicated CommitLog bytes")
            mf.mm[mf.wrote : end] = data
            mf.wrote = end

    def _replica_file_locked(self, start: int) -> MappedFile:
        mf = self.mfq.add_file(start)
        self._populate_end = 0
        self._populate_mark = 0
        return mf

    def complete_end(self, begin: int) -> int:
        """The end of the last whole record (or EOF blank) from ``begin``, a record start: a
        replica's bytes may stop inside a record, which dispatch must not read yet."""
        pos = max(begin, self.mfq.min_offset)
        while True:
            mf = self.mfq.find(pos)
            if mf is None:
                return pos
            rel = pos - mf.start
            if rel >= mf.wrote:
                if mf.wrote >= mf.size:
                    pos = mf.end
                    continue
                return pos
            if rel + 8 > mf.wrote:
                return pos
            if native is not None:  # the message records in one C call; the rest below
                ends = native.record_ends(mf.mm, rel, mf.wrote)
                if ends != rel:
                    pos += ends - rel
                    continue
            total, magic = _BLANK.unpack_from(mf.mm, rel)
            if magic == BLANK_MAGIC_CODE:
                if mf.wrote < mf.size:
                    return pos
                pos = mf.end
                continue
            if total <= 0 or rel + total > mf.wrote:
                return pos
            pos += total

    # --- reads ---------------------------------------------------------------------------------

    def get_message(self, phys: int, size: int) -> memoryview | None:
        """Zero-copy slice of the record at ``phys``; None if it is gone or not written."""
        mf = self.mfq.find(phys)
        if mf is None:
            return None
        pos = phys - mf.start
        if pos + size > mf.wrote:
            return None
        return mf.view[pos : pos + size]

    def get_record(self, phys: int) -> memoryview | None:
        """The record at ``phys`` with its size read from its TOTALSIZE field."""
        mf = self.mfq.find(phys)
        if mf is None:
            return None
        pos = phys - mf.start
        if pos + 8 > mf.wrote:
            return None
        (size,) = _SIZE.unpack_from(mf.mm, pos)
        if size <= 0 or pos + size > mf.wrote:
            return None
        return mf.view[pos : pos + size]

    def record_matches(self, phys: int, size: int, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Whether a valid record of ``size`` bytes of this topic, queue and queue offset
        starts at ``phys`` (recovery checks ConsumeQueue entries with it; no body CRC)."""
        mf = self.mfq.find(phys)
        if mf is None:
            return False
        rel = phys - mf.start
        if rel + size > mf.wrote or check_record(mf.mm, rel, rel + size, phys, check_crc=False) != size:
            return False
        f = read_dispatch_fields(mf.mm, rel)
        return f.queue_id == queue_id and f.queue_offset == queue_offset and f.topic == topic

    def pickup_store_timestamp(self, phys: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``phys``, or -1 if it is not readable."""
        mf = self.mfq.find(phys)
        if mf is None or phys - mf.start + min(size, 64) > mf.wrote:
            return -1
        return read_store_timestamp(mf.mm, phys - mf.start)

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's next queue offsets, so a topic made again starts at 0."""
        with self._lock:
            for key in [k for k in self.topic_queue_table if k[0] == topic]:
                del self.topic_queue_table[key]

    def forget_queue(self, topic: str, queue_id: int, dispatched_end: int) -> bool:
        """Drop one queue's next offset if every offset given out is dispatched (the queue's
        ConsumeQueue ends at ``dispatched_end``); False, changing nothing, otherwise."""
        key = (topic, queue_id)
        with self._lock:
            if self.topic_queue_table.get(key, 0) != dispatched_end:
                return False
            self.topic_queue_table.pop(key, None)
            return True

    def rebuild_topic_queue_table(self, table: Mapping[tuple[str, int], int]) -> None:
        with self._lock:
            self.topic_queue_table = dict(table)
