"""IndexService: the run of IndexFiles under ``<root>/index``, built by the dispatcher.

Keys indexed per message (RocketMQ IndexService.buildIndex): ``topic#UNIQ_KEY``, then
``topic#k`` for each non-empty space-separated token of KEYS; ROLLBACK messages are not
indexed.  A message at or below the newest file's ``end_phy`` was indexed already (a repeated
dispatch after recovery) and is skipped.

When the newest file cannot take all keys of a message the dispatcher asks for a new file,
created on the I/O thread, before indexing it, so a message's keys never straddle a retry.
"""

from __future__ import annotations

import logging
from pathlib import Path

from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.java_hash import index_hashes, index_key_hash, index_prefix_hash
from apogee.store.index_file import IndexFile, index_file_name

log = logging.getLogger("apogee.store.index_service")

_ROLLBACK = c.TRANSACTION_ROLLBACK_TYPE


class IndexService:
    def __init__(self, directory: Path, hash_slot_num: int, index_num: int, max_query_num: int,
                 *, preallocate: bool = True) -> None:
        self.directory = directory
        self.slots = hash_slot_num
        self.index_num = index_num
        self.max_query_num = max_query_num
        self.preallocate = preallocate
        self.files: list[IndexFile] = []
        self.zombies: list[IndexFile] = []

    # --- loading / recovery (startup, I/O thread) --------------------------------------------

    def load(self, *, clean_shutdown: bool, commitlog_end: int) -> None:
        """Map the index files.  After a crash, drop inconsistent files and forget entries
        past the recovered CommitLog end.  Blocking."""
        if not self.directory.exists():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()):
            try:
                f = IndexFile.load(path, self.slots, self.index_num)
            except OSError as exc:
                log.warning("index file %s unreadable (%s); deleting it", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            if not clean_shutdown:
                if not f.is_consistent():
                    log.warning("index file %s inconsistent after a crash; deleting it", f.name)
                    self._destroy(f)
                    continue
                f.clamp_end(commitlog_end)
            self.files.append(f)

    # --- building (owner thread) --------------------------------------------------------------

    @property
    def last(self) -> IndexFile | None:
        return self.files[-1] if self.files else None

    def build(self, topic: str, keys: str | None, uniq: str | None, phys: int, store_ts: int) -> bool:
        """Index the message at ``phys`` (RocketMQ buildIndex).  False: create a file first.

        Does nothing for a message already indexed.  Hashes ``topic#`` once per topic.
        """
        files = self.files
        last = files[-1] if files else None
        if last is not None:
            end = last.end_phy
            if phys < end or (phys == end and (end > 0 or last.index_count > 1)):
                return True
        tokens = [uniq] if uniq else []  # RocketMQ: UNIQ_KEY first, then each KEYS token
        if keys:
            tokens.extend(k for k in keys.split(" ") if k)
        count = len(tokens)
        if not count:
            return True
        if last is None or last.index_num - last.index_count < min(count, self.index_num - 1):
            return False
        hashes = index_hashes(index_prefix_hash(topic), tokens)
        if last.put_keys(hashes, phys, store_ts) < len(hashes):
            log.warning("index file %s full; keys of offset %d partly not indexed", last.name, phys)
        return True

    def build_run(self, entries: bytes, store_ts: int) -> bool:
        """Index a batch's messages from the entries ``native.write_batch`` made (C only).

        Same entries, order and skip rule as ``build`` per message.  False: the newest file
        cannot take the next message's keys; create a file and call again (messages indexed
        already are skipped by their offsets).
        """
        assert native is not None
        last = self.files[-1] if self.files else None
        if last is None:
            return False
        header = (last.begin_ts, last.end_ts, last.begin_phy, last.end_phy, last.slot_count, last.index_count)
        header, resume = native.index_put(last.mf.mm, last.slots, last.index_num, header, store_ts, entries, 0)
        (last.begin_ts, last.end_ts, last.begin_phy, last.end_phy, last.slot_count, last.index_count) = header
        last.dirty = True
        return bool(resume * 16 >= len(entries))

    def new_file_path(self, now_ms: int) -> Path:
        path = self.directory / index_file_name(now_ms)
        while path.exists() or (self.files and path.name <= self.files[-1].name):
            now_ms += 1
            path = self.directory / index_file_name(now_ms)
        return path

    def create_file(self, path: Path) -> IndexFile:
        """Create the next index file, continuing the newest one's end.  Blocking."""
        last = self.files[-1] if self.files else None
        return IndexFile.create(
            path, self.slots, self.index_num,
            prev_end_phy=last.end_phy if last else 0, prev_end_ts=last.end_ts if last else 0,
            preallocate=self.preallocate,
        )

    def attach(self, f: IndexFile) -> None:
        self.files.append(f)

    # --- query (owner thread) -----------------------------------------------------------------

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int
              ) -> tuple[list[int], int, int]:
        """Offsets of ``key`` stored in [begin, end] ms, newest first, at most ``max_num``.

        Returns ``(offsets, index_last_update_timestamp, index_last_update_phyoffset)``.
        """
        max_num = max(0, min(max_num, self.max_query_num))
        out: list[int] = []
        last_ts = last_phy = 0
        if not self.files or max_num == 0:
            return out, last_ts, last_phy
        key_hash = index_key_hash(f"{topic}#{key}")
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                last_ts, last_phy = f.end_ts, f.end_phy
            if f.is_time_matched(begin, end):
                f.select(key_hash, max_num, begin, end, out)
            if f.begin_ts < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    # --- maintenance --------------------------------------------------------------------------

    def flush_targets(self) -> list[IndexFile]:
        return [f for f in self.files if f.dirty]

    @staticmethod
    def flush(files: list[IndexFile]) -> None:
        """Blocking."""
        for f in files:
            f.flush()

    def take_expired(self, commitlog_min: int) -> list[IndexFile]:
        """Remove files (never the newest) whose entries all point below ``commitlog_min``."""
        count = 0
        for f in self.files[:-1]:
            if f.end_phy >= commitlog_min:
                break
            count += 1
        taken = self.files[:count]
        del self.files[:count]
        return taken

    def destroy_files(self, files: list[IndexFile]) -> None:
        """Blocking."""
        for f in files:
            self._destroy(f)

    def _destroy(self, f: IndexFile) -> None:
        if not f.mf.destroy():
            self.zombies.append(f)

    def retry_zombies(self) -> None:
        self.zombies = [f for f in self.zombies if not f.mf.close()]

    def close(self) -> None:
        for f in self.files:
            f.write_header()
            f.mf.close()
        self.files.clear()
        self.retry_zombies()
