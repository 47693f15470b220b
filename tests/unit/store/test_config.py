from __future__ import annotations

import pytest

from apogee.common.config import apply, describe
from apogee.errors import ConfigError
from apogee.store import FlushDiskType, StoreConfig


def test_rocketmq_names_map_to_fields() -> None:
    cfg = StoreConfig()
    unknown = apply(cfg, {
        "storePathRootDir": "/data/store", "mappedFileSizeCommitLog": "2048000",
        "mappedFileSizeConsumeQueue": "6000", "flushDiskType": "SYNC_FLUSH",
        "flushIntervalCommitLog": "200", "flushCommitLogLeastPages": "8", "syncFlushTimeout": "3000",
        "fileReservedTime": "48", "deleteWhen": "04;16", "diskMaxUsedSpaceRatio": "80",
        "maxMessageSize": "1024", "maxHashSlotNum": "100", "maxIndexNum": "400",
        "messageIndexEnable": "false", "checkCRCOnRecover": "false",
    })
    assert unknown == []
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert (cfg.mapped_file_size_commitlog, cfg.file_reserved_time_h, cfg.sync_flush_timeout_ms) == (
        2048000, 48, 3000)
    assert not cfg.message_index_enable and not cfg.check_crc_on_recover
    assert str(cfg.commitlog_dir) == "/data/store/commitlog"
    assert str(cfg.consume_queue_dir) == "/data/store/consumequeue"
    cfg.validate()
    names = dict(describe(cfg))
    assert names["flushDiskType"] == "SYNC_FLUSH" and names["fileReservedTime"] == 48


def test_defaults_are_rocketmq_s() -> None:
    cfg = StoreConfig()
    assert cfg.mapped_file_size_commitlog == 1 << 30
    assert cfg.mapped_file_size_consume_queue == 300_000 * 20
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (cfg.flush_interval_commitlog_ms, cfg.flush_commitlog_least_pages) == (500, 4)
    assert (cfg.sync_flush_timeout_ms, cfg.file_reserved_time_h, cfg.delete_when) == (5000, 72, "04")
    assert (cfg.disk_max_used_space_ratio, cfg.max_message_size) == (75, 4 << 20)
    assert (cfg.max_hash_slot_num, cfg.max_index_num) == (5_000_000, 20_000_000)


@pytest.mark.parametrize(
    "change",
    [
        {"mapped_file_size_commitlog": 100},
        {"mapped_file_size_consume_queue": 30},
        {"max_index_num": 1},
        {"delete_when": "25"},
        {"max_message_size": 0},
    ],
)
def test_validate_rejects(change: dict[str, object]) -> None:
    cfg = StoreConfig()
    for k, v in change.items():
        setattr(cfg, k, v)
    with pytest.raises(ConfigError):
        cfg.validate()


def test_commitlog_path_override() -> None:
    cfg = StoreConfig(store_path_root_dir="/a", store_path_commit_log="/b/log")
    assert str(cfg.commitlog_dir) == "/b/log" and str(cfg.checkpoint_path) == "/a/checkpoint"
