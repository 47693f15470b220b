from __future__ import annotations

from pathlib import Path

import orjson

from apogee.broker.topics import TopicConfigManager
from apogee.common.constants import PERM_INHERIT, SCHEDULE_TOPIC, TBW102
from apogee.common.validators import validate_topic


def manager(path: Path | None, auto: bool = True) -> TopicConfigManager:
    return TopicConfigManager(
        path, cluster_name="C", broker_name="b", auto_create_topic_enable=auto,
        default_topic_queue_nums=8, delay_level_count=18,
    )


def test_system_topics_exist_at_start(tmp_path: Path) -> None:
    m = manager(tmp_path / "topics.json")
    assert m.get(TBW102) is not None and m.get(TBW102).perm & PERM_INHERIT
    assert m.get(SCHEDULE_TOPIC).read_queue_nums == 18
    assert manager(None, auto=False).get(TBW102) is None


def test_auto_create_inherits_from_template_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    m = manager(path)
    version = m.data_version.counter
    config = m.create_in_send("Orders", TBW102, 4)
    assert config is not None and (config.read_queue_nums, config.perm) == (4, 6)
    assert m.data_version.counter == version + 1
    saved = orjson.loads(path.read_bytes())
    assert saved["topicConfigTable"]["Orders"]["writeQueueNums"] == 4
    assert manager(path).get("Orders") == config  # survives a restart


def test_auto_create_refused_without_inheritable_template() -> None:
    m = manager(None, auto=False)
    assert m.create_in_send("Orders", TBW102, 4) is None
    assert m.create_in_send("Orders", "b", 4) is not None  # the broker-name topic inherits


def test_topic_name_rules() -> None:
    assert validate_topic("Topic_A-1|%x") is None
    assert "empty" in (validate_topic("") or "")
    assert "127" in (validate_topic("a" * 128) or "")
    assert "characters" in (validate_topic("a b") or "")
