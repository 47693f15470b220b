"""Reads for the broker: pulls, queue offsets, lookups by offset, time and key.

``get_message`` follows RocketMQ DefaultMessageStore.getMessage status by status, including
``next_begin_offset`` (docs/protocol.md, Pull) and the batch limits for data in memory and on disk;
results are zero-copy slices of the mapped CommitLog.  Owner thread only; nothing here blocks
except page faults on cold data (``MessageStore.get_message_async`` pre-faults those on the
I/O thread).
"""

from __future__ import annotations

import logging
import os
import struct

from apogee.common import constants as c
from apogee.common import message_codec
from apogee.common.accel import native
from apogee.common.message import MessageExt
from apogee.store.commitlog import CommitLog
from apogee.store.config import StoreConfig
from apogee.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from apogee.store.index_service import IndexService
from apogee.store.layout.cq_unit import CQ_UNIT, CQ_UNIT_SIZE
from apogee.store.mapped_file import MappedFile
from apogee.store.results import GetResult, GetStatus, MessageFilter, QueryResult, TagCodeFilter
from apogee.store.time_search import Boundary, offset_by_time

log = logging.getLogger("apogee.store.reads")

_iter_units = CQ_UNIT.iter_unpack
_head = struct.Struct(">ii").unpack_from  # TOTALSIZE, MAGICCODE of a record
_phys_at = struct.Struct(">q").unpack_from  # the CommitLog offset of a ConsumeQueue entry, at byte 0
_SIZE_AT = struct.Struct(">i")  # the size field of a ConsumeQueue entry, at byte 8
_MAGIC = message_codec.MESSAGE_MAGIC_CODE
_FOUND = GetStatus.FOUND  # read per pull (an Enum class attribute read is slow: docs/architecture.md)
SCREEN_ENTRIES = 512  # entries from before a restart checked per pull (StoreReader._screen)


def total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class StoreReader:
    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: ConsumeQueueTable,
                 index: IndexService | None) -> None:
        self.config = config
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.memory_limit = total_physical_memory() * config.access_message_in_memory_max_ratio // 100
        self.bad_entries = 0  # distinct bad ConsumeQueue entries met by pulls
        self._bad_logged: set[tuple[str, int, int]] = set()

    # --- pulls ---------------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_bytes: int,
        message_filter: MessageFilter | None,
    ) -> GetResult:
        result = GetResult()
        result.next_begin_offset = offset
        cq = self.queues.queues.get((topic, queue_id))
        if cq is None:
            result.status = GetStatus.NO_MATCHED_LOGIC_QUEUE
            result.next_begin_offset = 0
            return result
        min_off = cq.min_offset
        max_off = cq.max_offset
        result.min_offset = min_off
        result.max_offset = max_off
        if max_off == 0:
            result.status = GetStatus.NO_MESSAGE_IN_QUEUE
            result.next_begin_offset = 0
        elif offset < min_off:
            result.status = GetStatus.OFFSET_TOO_SMALL
            result.next_begin_offset = min_off
        elif offset == max_off:
            result.status = GetStatus.OFFSET_OVERFLOW_ONE
        elif offset > max_off:
            result.status = GetStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = max_off  # RocketMQ 4.9.8 (older releases sent 0 when min was 0)
        else:
            buf = cq.get_index_buffer(offset)
            if buf is None:
                result.status = GetStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = cq.roll_next_file(offset)
            else:
                if offset < cq.verify_below:  # entries from before this start: check them first
                    buf = self._screen(cq, buf, offset, max_msg_nums)
                try:
                    self._collect(result, cq, buf, offset, max_msg_nums, max_total_bytes, message_filter)
                finally:
                    buf.release()
        return result

    @staticmethod
    def _scan_entries(max_msg_nums: int) -> int:
        """How many ConsumeQueue entries a pull looks at, at most (RocketMQ's 16000)."""
        return max(16000, max_msg_nums * CQ_UNIT_SIZE) // CQ_UNIT_SIZE

    def _screen(self, cq: ConsumeQueue, buf: memoryview, offset: int, max_msg_nums: int) -> memoryview:
        """The entries a pull looks at (``buf``, released) as a copy in which each entry below
        ``cq.verify_below`` that does not point at a record start of its size (TOTALSIZE and
        MAGICCODE there) has size 0, so that ``_collect`` steps over it.  Only entries this
        process did not write (nor its recovery rebuild) need it: the dispatcher's are right by
        construction, and the usual pull pays nothing.  At most SCREEN_ENTRIES old entries a
        pull (the window ends there): a consumer catching up on old data pulls again."""
        old = min(cq.verify_below - offset, max(SCREEN_ENTRIES, max_msg_nums))
        n = min(len(buf) // CQ_UNIT_SIZE, self._scan_entries(max_msg_nums))
        if old < cq.verify_below - offset:
            n = min(n, old)
        find = self.commitlog.mfq.find
        screened = bytearray(buf[: n * CQ_UNIT_SIZE])
        buf.release()
        for i, (phys, size, _tags) in enumerate(CQ_UNIT.iter_unpack(bytes(screened[: old * CQ_UNIT_SIZE]))):
            mf = find(phys) if size > 0 else None
            if mf is None or phys - mf.start + size > mf.wrote or phys < self.commitlog.min_offset:
                continue  # _collect judges these itself
            if _head(mf.mm, phys - mf.start) != (size, _MAGIC):
                self._bad_entry(cq, offset + i, phys, size)
                _SIZE_AT.pack_into(screened, i * CQ_UNIT_SIZE + 8, 0)
        return memoryview(screened)

    def _collect(self, result: GetResult, cq: ConsumeQueue, buf: memoryview, offset: int, max_msg_nums: int,
                 max_total_bytes: int, message_filter: MessageFilter | None) -> None:
        """Pick the records for a pull from the ConsumeQueue entries in ``buf``.

        Records stored back to back (a client batch, consecutive sends to one queue) leave as
        one slice of the mapped file, not one slice each: fewer objects here, and one join
        instead of hundreds when the response is written.

        A bad entry (size 0: a hole left by a failed put before issue 16 was fixed, or an
        entry ``_screen`` found pointing at no record; or pointing past the written CommitLog)
        is logged and stepped over, that entry only.  Only an entry below the CommitLog's
        minimum (its file expired) skips to the next CommitLog file, as RocketMQ does: the
        entries after it in the queue point there too.

        ``native.collect_records`` does the same for the usual pull (no SQL92 filter, every
        record in one CommitLog file and in memory, no bad entry) and copies the records into
        one buffer (a memoryview, as the slices are): no per-message Python object at all.  It
        declines anything else, and this loop, the specification, decides.
        """
        if (
            native is not None
            and (message_filter is None or message_filter.__class__ is TagCodeFilter)
            and self._collect_native(result, buf, offset, max_msg_nums, max_total_bytes, message_filter)
        ):
            return
        clog = self.commitlog
        clog_min = clog.min_offset
        cfg = self.config
        max_phy = clog.max_offset
        memory_limit = self.memory_limit
        scan_entries = self._scan_entries(max_msg_nums)
        nbytes = min(len(buf), scan_entries * CQ_UNIT_SIZE)
        consumed = nbytes // CQ_UNIT_SIZE
        status = GetStatus.NO_MATCHED_MESSAGE
        buffers = result.buffers
        qoffsets = result.queue_offsets
        total = 0
        count = 0
        next_file_start = -1
        max_phy_pulling = 0
        find = clog.mfq.find
        by_tag = message_filter.is_matched_by_consume_queue if message_filter is not None else None
        by_record = (message_filter.is_matched_by_commit_log
                     if message_filter is not None and not isinstance(message_filter, TagCodeFilter) else None)
        mf: MappedFile | None = None
        mf_start = mf_end = 0  # readable range of mf (global offsets)
        run_start = run_end = -1  # the slice being built (global offsets within mf)
        window = buf[:nbytes]
        try:
            for i, (phys, size, tags) in enumerate(_iter_units(window)):
                max_phy_pulling = phys
                if next_file_start >= 0 and phys < next_file_start:
                    continue
                if count:  # RocketMQ isTheBatchFull; the first message always goes
                    if count >= max_msg_nums or total + size > max_total_bytes:
                        consumed = i
                        break
                    if max_phy - phys > memory_limit:
                        full = (total + size > cfg.max_transfer_bytes_on_message_in_disk
                                or count > cfg.max_transfer_count_on_message_in_disk - 1)
                    else:
                        full = (total + size > cfg.max_transfer_bytes_on_message_in_memory
                                or count > cfg.max_transfer_count_on_message_in_memory - 1)
                    if full:
                        consumed = i
                        break
                if by_tag is not None and not by_tag(tags):
                    continue
                if not (mf_start <= phys and phys + size <= mf_end) or size <= 0:
                    found = find(phys) if size > 0 else None
                    if found is None or phys - found.start + size > found.wrote:
                        if size > 0 and phys < clog_min:
                            if not count:
                                status = GetStatus.MESSAGE_WAS_REMOVING
                            next_file_start = clog.roll_next_file(phys)
                        else:
                            self._bad_entry(cq, offset + i, phys, size)
                        continue
                    if run_start >= 0:
                        buffers.append(mf.view[run_start - mf_start : run_end - mf_start])  # type: ignore[union-attr]
                        run_start = run_end = -1
                    mf, mf_start, mf_end = found, found.start, found.start + found.wrote
                if by_record is not None:
                    with mf.view[phys - mf_start : phys + size - mf_start] as record:  # type: ignore[union-attr]
                        matched = by_record(record)
                    if not matched:
                        if not count:
                            status = GetStatus.NO_MATCHED_MESSAGE
                        continue
                if phys != run_end:
                    if run_start >= 0:
                        buffers.append(mf.view[run_start - mf_start : run_end - mf_start])  # type: ignore[union-attr]
                    run_start = phys
                run_end = phys + size
                qoffsets.append(offset + i)
                total += size
                count += 1
                status = _FOUND
                next_file_start = -1
            if run_start >= 0:
                buffers.append(mf.view[run_start - mf_start : run_end - mf_start])  # type: ignore[union-attr]
        finally:
            window.release()
        result.status = status
        result.buffer_total_size = total
        result.next_begin_offset = offset + consumed
        result.suggest_pulling_from_slave = max_phy - max_phy_pulling > memory_limit

    def _collect_native(self, result: GetResult, buf: memoryview, offset: int, max_msg_nums: int,
                        max_total_bytes: int, message_filter: TagCodeFilter | None) -> bool:
        """``_collect`` by ``native.collect_records``; False when it declines."""
        if len(buf) < CQ_UNIT_SIZE:
            return False
        clog = self.commitlog
        mf = clog.mfq.find(_phys_at(buf, 0)[0])
        if mf is None:
            return False
        cfg = self.config
        max_phy = clog.max_offset
        memory_limit = self.memory_limit
        done = native.collect_records(  # the caller checked native
            buf, self._scan_entries(max_msg_nums), mf.view, mf.start, mf.wrote, offset, max_msg_nums, max_total_bytes,
            cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory,
            max(clog.min_offset, max_phy - memory_limit),  # older is removed or on disk: declined
            message_filter.codes if message_filter is not None else None,
        )
        if done is None:
            return False
        body, queue_offsets, consumed, last_phys = done
        if queue_offsets:
            result.buffers.append(body)
            result.queue_offsets = queue_offsets
            result.status = _FOUND
        else:
            result.status = GetStatus.NO_MATCHED_MESSAGE
        result.buffer_total_size = len(body)
        result.next_begin_offset = offset + consumed
        result.suggest_pulling_from_slave = max_phy - last_phys > memory_limit
        return True

    def _bad_entry(self, cq: ConsumeQueue, queue_offset: int, phys: int, size: int) -> None:
        """Log a ConsumeQueue entry that points at no record (once per entry)."""
        key = (cq.topic, cq.queue_id, queue_offset)
        if key in self._bad_logged:
            return
        if len(self._bad_logged) >= 10_000:
            self._bad_logged.clear()
        self._bad_logged.add(key)
        self.bad_entries += 1
        log.warning("%s-%d: ConsumeQueue entry %d (CommitLog offset %d, size %d) points at no record; "
                    "skipping it", cq.topic, cq.queue_id, queue_offset, phys, size)

    # --- offsets and times -----------------------------------------------------------------

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else -1

    def commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.queues.get(topic, queue_id)
        entry = cq.get_entry(queue_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def store_time_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.queues.get(topic, queue_id)
        entry = cq.get_entry(queue_offset) if cq is not None else None
        if entry is None:
            return -1
        return self.commitlog.pickup_store_timestamp(entry[0], entry[1])

    def offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = Boundary.NEAREST
    ) -> int:
        """The queue offset ``timestamp_ms`` names by ``boundary``'s rule (``time_search``):
        RocketMQ 4.9.8's nearest entry unless asked otherwise; 0 for an unknown queue."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        commitlog = self.commitlog
        commitlog_min = commitlog.min_offset

        def time_at(offset: int) -> int | None:
            entry = cq.get_entry(offset)
            if entry is None:
                return -1
            if entry[0] < commitlog_min:
                return None
            return commitlog.pickup_store_timestamp(entry[0], entry[1])

        return offset_by_time(cq.min_offset, cq.max_offset, timestamp_ms, time_at, boundary)

    def earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the oldest message (of one queue, or of the whole store); -1 if none."""
        if topic is None or queue_id is None:
            rec = self.commitlog.get_record(self.commitlog.min_offset)
            return message_codec.read_store_timestamp(rec) if rec is not None else -1
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return -1
        return self.store_time_in_queue(topic, queue_id, cq.min_offset)

    # --- by physical offset and by key -------------------------------------------------------

    def select_by_offset(self, phys: int, size: int | None = None) -> memoryview | None:
        if size is None:
            return self.commitlog.get_record(phys)
        return self.commitlog.get_message(phys, size)

    def look_by_offset(self, phys: int, size: int | None = None) -> MessageExt | None:
        view = self.select_by_offset(phys, size)
        if view is None:
            return None
        try:
            return message_codec.decode_record(view, inflate=False)
        except ValueError:
            return None
        finally:
            view.release()

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryResult:
        """Messages of ``topic`` with KEYS token or UNIQ_KEY ``key``, newest first.

        Index hits are checked against the record: hash collisions and entries left from
        before a crash are dropped, and duplicates (a repeated dispatch) are removed.
        """
        result = QueryResult()
        if self.index is None:
            return result
        # The index keeps store times to the second (RocketMQ's timeDiff): ask it with a
        # window one second wider, then keep only records whose exact store time is inside.
        offsets, last_ts, last_phy = self.index.query(topic, key, max_num * 2, begin_ms - 1000, end_ms + 1000)
        result.index_last_update_timestamp = last_ts
        result.index_last_update_phyoffset = last_phy
        seen: set[int] = set()
        for phys in offsets:
            if phys in seen:
                continue
            seen.add(phys)
            view = self.commitlog.get_record(phys)
            if view is None:
                continue
            if self._record_has_key(view, phys, topic, key, begin_ms, end_ms) and len(result.buffers) < max_num:
                result.buffers.append(view)
                result.phys_offsets.append(phys)
            else:
                view.release()
        return result

    @staticmethod
    def _record_has_key(view: memoryview, phys: int, topic: str, key: str, begin_ms: int, end_ms: int) -> bool:
        if message_codec.check_record(view, 0, len(view), phys, check_crc=False) <= 0:
            return False
        fields = message_codec.read_dispatch_fields(view, 0)
        if fields.topic != topic or not begin_ms <= fields.store_timestamp <= end_ms:
            return False
        props = fields.properties
        if message_codec.get_property(props, c.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
            return True
        keys = message_codec.get_property(props, c.PROPERTY_KEYS)
        return keys is not None and key in keys.split(c.KEY_SEPARATOR)
