"""CommitLog recovery: find the end of the valid log and cut everything after it.

Normal restart (no ``abort`` file): scan the last three files (RocketMQ recoverNormally).
After a crash (``abort`` present): start at the newest file whose first message is older than
the checkpoint's safe time (RocketMQ recoverAbnormally), or at the safe offset of the
checkpoint or of the abort mark when that is later (Apogee: the scan then covers what was
written since, however long the log).  Either way each record is checked:
magic, size, field lengths, PHYSICALOFFSET = its position and, with ``checkCRCOnRecover``
(default), the body CRC.

The log ends at the first record that fails.  What follows it (a torn write, corruption, or
stale bytes) is zeroed in its file and later files are deleted, with a warning saying how
many bytes were dropped.  Zeroing matters: the next start finds the end where zeros begin, and
no stale record can be mistaken for a new one.  The ConsumeQueues and the index are cut to
match afterwards and the dispatcher re-runs from the recovery start (see ``message_store``).

Blocking throughout: runs on the I/O thread before the store serves anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from apogee.common.message_codec import RECORD_BLANK, check_record, read_store_timestamp
from apogee.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger("apogee.store.recovery")

NORMAL_RECOVER_FILES = 3


@dataclass(slots=True)
class RecoveryReport:
    clean_shutdown: bool
    start_offset: int  # where the scan (and the re-dispatch after a crash) began
    end_offset: int  # end of the valid log
    records: int  # records checked
    dropped_bytes: int  # non-zero bytes cut after the end
    removed_files: int
    last_store_timestamp: int


def _first_record_ts(mfq: MappedFileQueue, idx: int, check_crc: bool) -> int:
    mf = mfq.files[idx]
    size = check_record(mf.mm, 0, mf.size, mf.start, check_crc=check_crc)
    if size <= 0:
        return -1
    return read_store_timestamp(mf.mm, 0)


def choose_start(mfq: MappedFileQueue, *, clean_shutdown: bool, safe_ts: int, check_crc: bool) -> int:
    """Index of the file where the scan starts."""
    files = mfq.files
    if clean_shutdown:
        return max(0, len(files) - NORMAL_RECOVER_FILES)
    for idx in range(len(files) - 1, -1, -1):
        ts = _first_record_ts(mfq, idx, check_crc)
        if 0 < ts <= safe_ts:
            log.info("crash recovery starts at file %s (first message %d <= checkpoint %d)",
                     files[idx].path.name, ts, safe_ts)
            return idx
    return 0


def recover_commitlog(mfq: MappedFileQueue, *, clean_shutdown: bool, safe_ts: int,
                      check_crc: bool, safe_offset: int = -1) -> RecoveryReport:
    """Scan, cut and report (see module docstring).  Blocking.

    After a crash, ``safe_offset`` (a record boundary below which the log and everything built
    from it are known good: ``checkpoint``) starts the scan when it is later than the file the
    checkpoint's times choose.
    """
    files = mfq.files
    if not files:
        return RecoveryReport(clean_shutdown, 0, 0, 0, 0, 0, 0)
    crc = check_crc
    start_idx = choose_start(mfq, clean_shutdown=clean_shutdown, safe_ts=safe_ts, check_crc=crc)
    start_offset = files[start_idx].start
    start_pos = 0
    if not clean_shutdown and start_offset < safe_offset:
        safe = min(safe_offset, files[-1].end)
        start_idx = min(len(files) - 1, (safe - files[0].start) // mfq.file_size)
        start_offset, start_pos = safe, safe - files[start_idx].start
        log.info("crash recovery starts at offset %d (safe point of the checkpoint or abort mark)", safe)
    records = 0
    last_ts = 0
    end = start_offset
    for mf in files[start_idx:]:
        pos, start_pos = start_pos, 0
        complete = False
        while pos < mf.size:
            size = check_record(mf.mm, pos, mf.size, mf.start + pos, check_crc=crc)
            if size > 0:
                last_ts = read_store_timestamp(mf.mm, pos)
                pos += size
                records += 1
                continue
            if size == RECORD_BLANK:
                pos = mf.size
            break
        if pos >= mf.size:
            complete = True
        end = mf.start + pos
        if not complete:
            break
    # Cut: zero the torn tail of the end file, delete later files.
    end_file = mfq.find(end) if end < files[-1].end else None
    dropped = 0
    if end_file is not None:
        rel = end - end_file.start
        tail = end_file.last_nonzero(rel)
        if tail > rel:
            dropped += tail - rel
            end_file.zero_range(rel, tail)
    removed = mfq.truncate_to(end)
    for mf in removed:
        dropped += mf.last_nonzero(0)
    mfq.destroy_files(removed)
    for mf in mfq.files:
        mf.flushed = mf.wrote = mf.size if mf.end <= end else max(0, end - mf.start)
    for mf in mfq.files[start_idx:]:
        mf.flushed = 0  # unknown: make the store fsync it before exposing anything
    report = RecoveryReport(clean_shutdown, start_offset, end, records, dropped, len(removed), last_ts)
    if dropped:
        log.warning(
            "CommitLog recovery: cut at offset %d, dropped %d bytes of torn or corrupt data "
            "(%d file(s) removed); %d records verified from offset %d",
            end, dropped, len(removed), records, start_offset,
        )
    else:
        log.info("CommitLog recovery: %d records verified from offset %d, end at %d (%s%s)",
                 records, start_offset, end, "clean shutdown" if clean_shutdown else "after crash",
                 f", {len(removed)} empty file(s) removed" if removed else "")
    return report
