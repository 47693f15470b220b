"""The dispatcher (RocketMQ's ReputMessageService): CommitLog -> ConsumeQueues and index.

It walks the CommitLog in order from ``offset`` up to a limit the store chooses: the written
end under ASYNC_FLUSH, the *flushed* end under SYNC_FLUSH, so a consumer never sees a message
that a crash could take back (RocketMQ's broker has acknowledged such sends).

Where it runs: on the owner's event loop, in bounded batches, not in a thread.  Dispatch is
pure Python work; with the GIL a second thread adds no parallelism, and a CPU-bound thread next
to an event loop makes every loop syscall wait for the GIL (the convoy effect), hurting the
broker's network path far more than it helps.  A batch that needs a new ConsumeQueue or index
file stops and returns a ``FileNeed``; the driver creates the file on the I/O thread and calls
again (the record is retried; puts are idempotent).

Each record comes from the append's *hint* when one is queued for its offset (no decoding),
else it is decoded from the mapped CommitLog (a slave's replicated bytes, the log after
recovery, or when hints overflowed): with the C extension, ``native.scan_dispatch`` reads a
whole span of records in one call (one ConsumeQueue run per queue, the index entries of all),
declining any record it does not take to ``_decode``, the reference.  Several single sends
stored in C queued at once (pipelined SEND_MESSAGE_V2 of clients that do not batch) are read
that way too, their hints dropped: one scan costs less than a pass of Python per hint
(``benchmarks/store_bench.py --only single``).
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import struct
from collections.abc import Callable
from typing import Any

from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.java_hash import tags_code as compute_tags_code
from apogee.common.message_codec import BLANK_MAGIC_CODE, get_property, read_dispatch_fields
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from apogee.store.index_service import IndexService
from apogee.store.mapped_file import MappedFile

log = logging.getLogger("apogee.store.dispatch")

ArrivalListener = Callable[[str, int, int, "int | None", str], None]
"""``cb(topic, queue_id, max_offset, tags_code, properties)``; ``properties`` is the raw
properties string (parse it with ``message_codec.parse_properties`` if needed).  For a batch
written by the C path the listener hears once per distinct tag code with the batch's last
offset and empty properties, and ``tags_code`` None means "more tags than listed: any"."""

_SIZE_MAGIC = struct.Struct(">ii")
_NOT = c.TRANSACTION_NOT_TYPE
_COMMIT = c.TRANSACTION_COMMIT_TYPE
_ROLLBACK = c.TRANSACTION_ROLLBACK_TYPE
_QUEUED = frozenset((_NOT, _COMMIT))
_KEYS = c.PROPERTY_KEYS
_UNIQ = c.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_RUN_HINT_LEN = 11  # see CommitLog: a whole client batch written by the C path


SCAN_SINGLES_FROM = 4  # single sends queued from which one scan reads them (store_bench --only single)


def _is_single(hint: tuple[Any, ...]) -> bool:
    """A C-path run hint of one message (``put_plain``)."""
    return len(hint) == _RUN_HINT_LEN and hint[5] == 1


def _singles_lead(hints: collections.deque[tuple[Any, ...]]) -> bool:
    """The first ``SCAN_SINGLES_FROM`` hints are single sends'."""
    return all(_is_single(hint) for hint in itertools.islice(hints, SCAN_SINGLES_FROM))


class FileNeed:
    """A file the dispatcher must have before it can go on."""

    __slots__ = ("create", "attach", "what")

    def __init__(self, create: Callable[[], Any], attach: Callable[[Any], None], what: str) -> None:
        self.create = create  # blocking: run on the I/O thread
        self.attach = attach  # owner thread
        self.what = what

    def __repr__(self) -> str:
        return f"FileNeed({self.what})"


DONE = "done"  # caught up with the limit
MORE = "more"  # batch budget used; call again after yielding


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        *,
        clock: Callable[[], int],
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.clock = clock
        self.offset = 0
        self.last_store_ts = 0  # store time of the last dispatched record
        self.listeners: list[ArrivalListener] = []
        self.dispatched = 0

    def _schedule_tags(self, props: str, store_ts: int) -> int:
        return self.commitlog._schedule_tags(get_property(props, c.PROPERTY_DELAY_TIME_LEVEL), store_ts)

    def _cq_need(self, cq: ConsumeQueue, queue_offset: int) -> FileNeed:
        start = cq.file_start_for(queue_offset)
        create = functools.partial(cq.mfq.create_file, start)
        return FileNeed(create, lambda mf: cq.attach(mf, queue_offset),
                        f"consume queue {cq.topic}-{cq.queue_id} file {start}")

    def _index_need(self) -> FileNeed:
        index = self.index
        assert index is not None
        path = index.new_file_path(self.clock())
        return FileNeed(functools.partial(index.create_file, path), index.attach,
                        f"index file {path.name}")

    def dispatch(self, limit: int, max_records: int, notify: bool = True) -> str | FileNeed:
        """Dispatch records in [offset, limit), at most ``max_records``.  Owner thread.

        Returns DONE, MORE or the FileNeed that stopped it.
        """
        clog = self.commitlog
        hints = clog.hints
        queues = self.queues.queues
        index = self.index
        notes: list[tuple[str, int, int, int | None, str]] | None = [] if notify and self.listeners else None
        pos = self.offset
        done = 0
        result: str | FileNeed = DONE
        try:
            while pos < limit:
                if done >= max_records:
                    result = MORE
                    break
                hint = hints[0] if hints else None
                if (len(hints) >= SCAN_SINGLES_FROM and native is not None and hints[0][0] == pos
                        and _singles_lead(hints)):
                    # Single sends (the Java/C++/Go clients' SEND_MESSAGE_V2) queued since the
                    # last pass: one scan_dispatch reads them all, one ConsumeQueue write per
                    # queue and one index call, where each hint would cost a pass of Python.
                    # Fewer keep their hints (the scan's setup costs more than it saves).
                    while hints and _is_single(hints[0]):
                        hints.popleft()
                    hint = None
                if hint is not None and hint[0] == pos:
                    if len(hint) == _RUN_HINT_LEN:  # a batch written by the C path
                        if pos + hint[1] > limit:
                            break
                        need = self._dispatch_run(hint, notes)
                        if need is not None:
                            result = need
                            break
                        hints.popleft()
                        pos += hint[1]
                        self.last_store_ts = hint[8]
                        done += hint[5]
                        continue
                    phys, size, topic, qid, qoff, tags, ts, sysflag, pstr = hint
                else:
                    while hints and hints[0][0] < pos:
                        hints.popleft()
                    hint = None
                    mf = clog.mfq.find(pos)
                    if mf is None:
                        if pos < clog.min_offset:
                            log.warning("dispatch offset %d below CommitLog min; skipping ahead", pos)
                            pos = clog.min_offset
                            continue
                        break
                    rel = pos - mf.start
                    if rel >= mf.wrote:
                        if mf.wrote >= mf.size:
                            pos = mf.end
                            continue
                        break
                    total, magic = _SIZE_MAGIC.unpack_from(mf.mm, rel)
                    if magic == BLANK_MAGIC_CODE:
                        pos = mf.end
                        continue
                    if native is not None:  # the records up to the next hint, in one C call
                        stop = min(limit, mf.start + mf.wrote, hints[0][0] if hints else limit) - mf.start
                        span = native.scan_dispatch(mf.mm, rel, stop, pos, max_records - done, index is not None)
                        if span[1]:
                            need = self._dispatch_span(span, notes)
                            if need is not None:
                                result = need
                                break
                            pos += span[0] - rel
                            self.last_store_ts = span[3]
                            done += span[1]
                            continue
                    phys, size, topic, qid, qoff, tags, ts, sysflag, pstr = self._decode(mf, pos)
                tran = sysflag & 0xC
                if tran in _QUEUED:
                    cq = queues.get((topic, qid))
                    if cq is None:
                        cq = self.queues.get_or_create(topic, qid)
                    if not cq.put(phys, size, tags, qoff):
                        result = self._cq_need(cq, qoff)
                        break
                    if notes is not None:
                        notes.append((topic, qid, qoff + 1, tags, pstr))
                if (index is not None and tran != _ROLLBACK and pstr and not index.build(
                        topic, get_property(pstr, _KEYS), get_property(pstr, _UNIQ), phys, ts)):
                    result = self._index_need()
                    break
                if hint is not None:
                    hints.popleft()
                pos = phys + size
                self.last_store_ts = ts
                done += 1
        finally:
            self.offset = pos
            self.dispatched += done
        if notes:
            self._notify(notes)
        return result

    def _decode(self, mf: MappedFile, pos: int) -> tuple[int, int, str, int, int, int, int, int, str]:
        """A hint's fields, read from the record at ``pos`` (in ``mf``)."""
        f = read_dispatch_fields(mf.mm, pos - mf.start)
        topic, ts, pstr = f.topic, f.store_timestamp, f.properties
        if topic == c.SCHEDULE_TOPIC:
            tags = self._schedule_tags(pstr, ts)
        else:
            tags = compute_tags_code(get_property(pstr, c.PROPERTY_TAGS)) if pstr else 0
        return pos, f.size, topic, f.queue_id, f.queue_offset, tags, ts, f.sysflag, pstr

    def repair(self, cq: ConsumeQueue, first: int, stop: int, begin: int, end: int) -> int:
        """Fill the holes ``first .. stop-1`` of ``cq`` from the records in CommitLog
        ``[begin, end)`` (recovery: the re-dispatch found them missing).  Returns how many were
        filled; the others hold no message (a put that failed before issue 16's fix).
        Blocking (startup)."""
        clog = self.commitlog
        pos = max(begin, clog.min_offset)
        filled = 0
        while pos < end:
            mf = clog.mfq.find(pos)
            if mf is None or pos - mf.start >= mf.wrote:
                if mf is not None and mf.wrote >= mf.size:
                    pos = mf.end
                    continue
                break
            total, magic = _SIZE_MAGIC.unpack_from(mf.mm, pos - mf.start)
            if magic == BLANK_MAGIC_CODE:
                pos = mf.end
                continue
            phys, size, topic, qid, qoff, tags, _ts, sysflag, _p = self._decode(mf, pos)
            if (qid == cq.queue_id and first <= qoff < stop and topic == cq.topic and sysflag & 0xC in _QUEUED
                    and cq.fill(qoff, phys, size, tags)):
                filled += 1
            pos += size
        return filled

    def _dispatch_run(self, hint: tuple[Any, ...], notes: list[tuple[str, int, int, int | None, str]] | None
                      ) -> FileNeed | None:
        """Apply a run hint (``CommitLog._put_raw_batch``): ConsumeQueue entries, arrival
        notes (one per distinct tag code, with the batch's last offset), index entries.
        Idempotent, so a run stopped by a FileNeed is simply applied again."""
        _, _, topic, qid, qoff, count, cq_entries, tag_codes, ts, _, index_entries = hint
        need = self._put_run(topic, qid, qoff, count, cq_entries, tag_codes, notes)
        if need is None and self.index is not None and index_entries and not self.index.build_run(index_entries, ts):
            return self._index_need()
        return need

    def _dispatch_span(self, span: tuple[int, int, int, int, list[Any], bytes],
                       notes: list[tuple[str, int, int, int | None, str]] | None) -> FileNeed | None:
        """Apply what ``native.scan_dispatch`` read from records without hints: one run per
        (topic, queue), then the index entries of them all.  Idempotent like ``_dispatch_run``:
        a span stopped by a FileNeed is scanned and applied again."""
        _, _, first_ts, _, groups, index_entries = span
        for topic, qid, qoff, count, cq_entries, tag_codes in groups:
            need = self._put_run(topic, qid, qoff, count, cq_entries, tag_codes, notes)
            if need is not None:
                return need
        if self.index is not None and index_entries and not self.index.build_run(index_entries, first_ts):
            return self._index_need()
        return None

    def _put_run(self, topic: str, qid: int, qoff: int, count: int, cq_entries: bytes,
                 tag_codes: tuple[int, ...] | None, notes: list[tuple[str, int, int, int | None, str]] | None
                 ) -> FileNeed | None:
        """Consecutive ConsumeQueue entries of one queue and their arrival notes (one per
        distinct tag code, with the run's last offset; None: any tag)."""
        cq = self.queues.queues.get((topic, qid))
        if cq is None:
            cq = self.queues.get_or_create(topic, qid)
        written = cq.put_run(qoff, cq_entries)
        if written < count:
            return self._cq_need(cq, qoff + written)
        if notes is not None:
            for tag in (None,) if tag_codes is None else tag_codes:
                notes.append((topic, qid, qoff + count, tag, ""))
        return None

    def _notify(self, notes: list[tuple[str, int, int, int | None, str]]) -> None:
        for listener in list(self.listeners):
            for topic, qid, max_offset, tags, props in notes:
                try:
                    listener(topic, qid, max_offset, tags, props)
                except Exception:  # a faulty listener must not stop dispatching
                    log.exception("arrival listener %r failed", listener)

    def dispatch_all_inline(self, limit: int) -> int:
        """Dispatch up to ``limit`` creating files in place (startup, I/O thread).  Blocking."""
        before = self.dispatched
        while True:
            result = self.dispatch(limit, 1 << 30, notify=False)
            if isinstance(result, FileNeed):
                result.attach(result.create())
                continue
            if result == DONE:
                return self.dispatched - before
