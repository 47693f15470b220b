"""StoreConfig: the message store's settings, under RocketMQ's MessageStoreConfig names.

Field names are snake_case with units; the broker.conf key is the camel-cased name unless the
field's metadata says otherwise (see ``apogee.common.config``).  Sizes of ConsumeQueue files
are in bytes, as in RocketMQ (entries x 20).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from apogee.common.config import rmq_key
from apogee.common.constants import DEFAULT_MESSAGE_DELAY_LEVEL
from apogee.errors import ConfigError
from apogee.store.layout.cq_unit import CQ_UNIT_SIZE


class FlushDiskType(enum.Enum):
    """When a put counts as stored: after the page-cache copy, or after fsync."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass(slots=True)
class StoreConfig:
    # Root of commitlog/, consumequeue/, index/, checkpoint, abort and lock.
    store_path_root_dir: str = field(
        default=str(Path.home() / "store"), metadata=rmq_key("storePathRootDir")
    )
    # CommitLog directory; empty means <root>/commitlog.
    store_path_commit_log: str = field(default="", metadata=rmq_key("storePathCommitLog"))
    # Bytes per CommitLog file (1 GiB).
    mapped_file_size_commitlog: int = field(
        default=1 << 30, metadata=rmq_key("mappedFileSizeCommitLog")
    )
    # Bytes per ConsumeQueue file: 300 000 entries of 20 bytes.
    mapped_file_size_consume_queue: int = field(
        default=300_000 * CQ_UNIT_SIZE, metadata=rmq_key("mappedFileSizeConsumeQueue")
    )
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    # ASYNC_FLUSH: flush the CommitLog every this many ms ...
    flush_interval_commitlog_ms: int = field(
        default=500, metadata=rmq_key("flushIntervalCommitLog")
    )
    # ... when at least this many 4 KiB pages are dirty ...
    flush_commitlog_least_pages: int = field(
        default=4, metadata=rmq_key("flushCommitLogLeastPages")
    )
    # ... and whatever is dirty at least this often.
    flush_commitlog_thorough_interval_ms: int = field(
        default=10_000, metadata=rmq_key("flushCommitLogThoroughInterval")
    )
    # ConsumeQueue and index flushing (and checkpoint persistence) period.
    flush_interval_consume_queue_ms: int = field(
        default=1000, metadata=rmq_key("flushIntervalConsumeQueue")
    )
    flush_consume_queue_least_pages: int = field(
        default=2, metadata=rmq_key("flushConsumeQueueLeastPages")
    )
    flush_consume_queue_thorough_interval_ms: int = field(
        default=60_000, metadata=rmq_key("flushConsumeQueueThoroughInterval")
    )
    # SYNC_FLUSH: a put waits at most this long for its fsync, then FLUSH_DISK_TIMEOUT.
    sync_flush_timeout_ms: int = field(default=5000, metadata=rmq_key("syncFlushTimeout"))
    # Keep CommitLog files this many hours after their last write.
    file_reserved_time_h: int = field(default=72, metadata=rmq_key("fileReservedTime"))
    # Hours of day (";"-separated, "04" or "04;16") when expired files are deleted.
    delete_when: str = "04"
    # Above this disk use (percent) expired files are deleted at any hour.
    disk_max_used_space_ratio: int = 75
    # Above this disk use (percent) the oldest files are deleted even if not expired.
    disk_space_clean_forcibly_ratio: int = 85
    # Above this disk use (percent) puts are refused with DISK_FULL.
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    # Apogee: False keeps every CommitLog file holding a message some consumer group (one with
    # a committed offset) has not consumed yet, expired or not; when the disk fills up, puts are
    # refused (DISK_FULL) instead.  True: RocketMQ's rule, files go by age and disk use only.
    clean_unconsumed_file_enable: bool = True
    # Period of the expiry / disk-guard check.
    clean_resource_interval_ms: int = field(
        default=10_000, metadata=rmq_key("cleanResourceInterval")
    )
    # Largest body accepted (bytes).
    max_message_size: int = 4 * 1024 * 1024
    message_index_enable: bool = True
    # Use the index flush time too when picking the recovery start after a crash.
    message_index_safe: bool = False
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    # Most results of a key query.
    max_msgs_num_batch: int = 64
    check_crc_on_recover: bool = field(default=True, metadata=rmq_key("checkCRCOnRecover"))
    # get_message batch limits, as in RocketMQ, for data in page cache and on disk.
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    # Data further behind the newest byte than this share of RAM counts as "on disk".
    access_message_in_memory_max_ratio: int = 40
    # Reserve disk blocks of new files (posix_fallocate) so a full disk fails the file
    # creation with a status instead of raising SIGBUS on a write into the mapping.
    preallocate_mapped_files: bool = True
    # Fault CommitLog pages in on the I/O thread this far ahead of the writer (0 = off).
    populate_ahead_bytes: int = 32 * 1024 * 1024
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL

    # --- master/slave replication (RocketMQ MessageStoreConfig, 4.9.8) ------------------------
    # The master's HA port.  0 = listenPort + 1, which RocketMQ always uses (BrokerStartup
    # overrides any configured value); Apogee honours a configured one.
    ha_listen_port: int = 0
    # A slave reports its max offset this often (and the master heartbeats an idle link).
    ha_send_heartbeat_interval_ms: int = field(default=5000, metadata=rmq_key("haSendHeartbeatInterval"))
    # A link silent this long is dropped (the master: nothing read; the slave: nothing reported).
    ha_housekeeping_interval_ms: int = field(default=20_000, metadata=rmq_key("haHousekeepingInterval"))
    # Most CommitLog bytes in one master -> slave frame.
    ha_transfer_batch_size: int = 32 * 1024
    # host:port of the master's HA port; empty = learnt from the NameServer's registration answer.
    ha_master_address: str = ""
    # SYNC_MASTER: a slave further behind than this many bytes counts as unavailable.
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # SYNC_MASTER: a send waits this long for a slave to hold its bytes (FLUSH_SLAVE_TIMEOUT after).
    slave_timeout_ms: int = field(default=3000, metadata=rmq_key("slaveTimeout"))
    # A slave answers OFFSET_MOVED corrections of pulls only when this is set.
    offset_check_in_slave: bool = False

    # --- derived paths ----------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return Path(os.path.expanduser(self.store_path_root_dir))

    @property
    def commitlog_dir(self) -> Path:
        if self.store_path_commit_log:
            return Path(os.path.expanduser(self.store_path_commit_log))
        return self.root / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    def validate(self) -> None:
        """Raise ConfigError for values the store cannot work with."""
        if self.mapped_file_size_commitlog < 4096:
            raise ConfigError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if (
            self.mapped_file_size_consume_queue < CQ_UNIT_SIZE
            or self.mapped_file_size_consume_queue % CQ_UNIT_SIZE
        ):
            raise ConfigError("mappedFileSizeConsumeQueue must be a positive multiple of 20")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise ConfigError("maxHashSlotNum must be >= 1 and maxIndexNum >= 2")
        if self.max_message_size < 1:
            raise ConfigError("maxMessageSize must be positive")
        if not 0 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"haListenPort={self.ha_listen_port}: expected 0 (listenPort + 1) or a port")
        if self.ha_transfer_batch_size < 1:
            raise ConfigError("haTransferBatchSize must be positive")
        if self.ha_send_heartbeat_interval_ms < 1 or self.ha_housekeeping_interval_ms < 1:
            raise ConfigError("haSendHeartbeatInterval and haHousekeepingInterval must be positive")
        for part in self.delete_when.split(";"):
            if part.strip() and not (part.strip().isdigit() and 0 <= int(part) <= 23):
                raise ConfigError(f"deleteWhen: {self.delete_when!r} is not a list of hours")
