"""Broker tables on disk: a burst of changes is one write, a failed write is retried and
never makes a later write skip anything."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

import apogee.broker.persistence as persistence
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableFile, TableWriter
from apogee.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupManager
from apogee.broker.topics import TopicConfigManager
from apogee.common.atomic_file import write_atomic
from apogee.remoting.bodies.route import TopicConfigData


class Table:
    """A table as the broker's are: a dict, and a TableFile that knows what is unsaved."""

    def __init__(self, path: Path) -> None:
        self.rows: dict[str, int] = {}
        self.file = TableFile(path, lambda: orjson.dumps(self.rows))

    def set(self, key: str, value: int) -> None:
        self.rows[key] = value
        self.file.changed()


def counting_writes(monkeypatch: pytest.MonkeyPatch, fail_first: int = 0) -> list[Path]:
    """Record every write; the first ``fail_first`` raise OSError as a full disk would."""
    writes: list[Path] = []

    def write(path: Path, data: bytes) -> None:
        writes.append(path)
        if len(writes) <= fail_first:
            raise OSError(28, "No space left on device")
        write_atomic(path, data)

    monkeypatch.setattr(persistence, "write_atomic", write)
    return writes


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_burst_of_changes_is_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = counting_writes(monkeypatch)
    table = Table(tmp_path / "t.json")
    writer = TableWriter([table.file], delay_s=0.05)
    writer.watch(table.file)
    for i in range(2000):
        table.set(f"k{i}", i)
    await eventually(lambda: not table.file.dirty)
    assert len(writes) == 1
    assert len(orjson.loads((tmp_path / "t.json").read_bytes())) == 2000
    await writer.close()


async def test_a_failed_write_is_logged_retried_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    writes = counting_writes(monkeypatch, fail_first=2)
    table = Table(tmp_path / "t.json")
    writer = TableWriter([table.file], delay_s=0.01)
    writer.watch(table.file)
    with caplog.at_level(logging.ERROR, logger="apogee.broker.persistence"):
        table.set("a", 1)
        await eventually(lambda: len(writes) >= 1)
        table.set("b", 2)  # made while the file is failing: still written later
        await eventually(lambda: not table.file.dirty)
    assert orjson.loads((tmp_path / "t.json").read_bytes()) == {"a": 1, "b": 2}
    assert writer.failures == 2 and table.file.failures == 2
    assert sum("t.json" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records) == 2
    await writer.close()


async def test_flush_answers_with_the_failure_and_keeps_retrying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting_writes(monkeypatch, fail_first=1)
    table = Table(tmp_path / "t.json")
    writer = TableWriter([table.file], delay_s=0.01)
    table.rows["a"] = 1
    table.file.version += 1
    with pytest.raises(OSError):
        await writer.flush(table.file)
    assert table.file.dirty
    await eventually(lambda: not table.file.dirty)  # the background retry
    assert orjson.loads((tmp_path / "t.json").read_bytes()) == {"a": 1}
    await writer.close()


async def test_saved_waits_for_the_version_and_close_writes_the_rest(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.json")
    writer = TableWriter([table.file], delay_s=0.05)
    writer.watch(table.file)
    table.set("a", 1)
    assert await writer.saved(table.file, table.file.version, 5.0)
    assert orjson.loads((tmp_path / "t.json").read_bytes()) == {"a": 1}
    table.rows["b"] = 2
    table.file.version += 1  # a change only the periodic save or shutdown writes
    assert not await writer.saved(table.file, table.file.version, 0.05)
    await writer.close()
    assert orjson.loads((tmp_path / "t.json").read_bytes()) == {"a": 1, "b": 2}


def test_a_failed_offset_write_keeps_the_commits_for_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the dirty flag was cleared before writing, so after one failure nothing was
    written again until a new commit came."""
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsetManager(path)
    offsets.commit("G", "T", 0, 5)

    def full_disk(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(persistence, "write_atomic", full_disk)
    with pytest.raises(OSError):
        offsets.persist()
    monkeypatch.setattr(persistence, "write_atomic", write_atomic)
    offsets.persist()
    assert ConsumerOffsetManager(path).query("G", "T", 0) == 5


def test_topics_refuse_what_they_could_not_write_back(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    topics = TopicConfigManager(path, cluster_name="C", broker_name="b", auto_create_topic_enable=True,
                                default_topic_queue_nums=8, delay_level_count=18)
    before = dict(topics.table)
    for bad in (TopicConfigData("T", perm=10**20), TopicConfigData("T", perm=16), TopicConfigData("Bad Topic"),
                TopicConfigData("T", read_queue_nums=1 << 31), TopicConfigData("T" * 128)):
        with pytest.raises(ValueError):
            topics.put(bad)
    assert topics.table == before
    topics.put(TopicConfigData("T", perm=6))  # and later changes still write
    saved = orjson.loads(path.read_bytes())["topicConfigTable"]
    assert saved["T"]["perm"] == 6


def test_groups_with_names_rocketmq_refuses_are_never_created(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json", auto_create=True)
    assert groups.find("") is None
    assert groups.find("G" * 300) is None
    assert groups.find("my.group") is None
    assert groups.find("G" * 255) is not None
    with pytest.raises(ValueError):
        groups.put(SubscriptionGroupConfig("", retry_queue_nums=1))
    with pytest.raises(ValueError):
        groups.put(SubscriptionGroupConfig("G", retry_max_times=1 << 31))
    assert set(groups.table) == {"G" * 255}


async def test_one_failing_file_does_not_keep_the_others_from_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: consumerOffset.json failing made the periodic save skip delayOffset.json too."""
    offsets, delays = Table(tmp_path / "consumerOffset.json"), Table(tmp_path / "delayOffset.json")

    def write(path: Path, data: bytes) -> None:
        if path.name == "consumerOffset.json":
            raise TypeError("Integer exceeds 64-bit range")
        write_atomic(path, data)

    monkeypatch.setattr(persistence, "write_atomic", write)
    writer = TableWriter([offsets.file, delays.file])
    offsets.set("a", 1)
    delays.set("b", 2)
    await writer.save_all()
    assert offsets.file.dirty and not delays.file.dirty
    assert orjson.loads((tmp_path / "delayOffset.json").read_bytes()) == {"b": 2}
    await writer.close()
