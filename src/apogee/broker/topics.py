"""The broker's topic table (RocketMQ's TopicConfigManager), persisted as config/topics.json.

Owns: which topics exist here, their read/write queue numbers and permissions, and the
data version the NameServers use to tell whether a registration carries news.  System
topics are created at start (TBW102 only while auto-creation is on).  Every change bumps the
data version and is written atomically at once; the caller re-registers with the
NameServers when ``create``/``update`` report a change.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson

from apogee.common.atomic_file import load_json_table, write_atomic
from apogee.common.constants import (
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TBW102,
    TRANS_CHECK_MAX_TIME_TOPIC,
)

# Re-exported: the rules live in common.names, shared with the client.
from apogee.common.names import NOT_ALLOWED_SEND_TOPICS as NOT_ALLOWED_SEND_TOPICS
from apogee.common.names import validate_topic as validate_topic
from apogee.remoting.bodies.route import DataVersion, TopicConfigData

log = logging.getLogger("apogee.broker.topics")

PERM_RW = PERM_READ | PERM_WRITE


class TopicConfigManager:
    def __init__(
        self,
        path: Path | None,
        *,
        cluster_name: str,
        broker_name: str,
        auto_create_topic_enable: bool,
        default_topic_queue_nums: int,
        delay_level_count: int,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
    ) -> None:
        self._path = path
        self.table: dict[str, TopicConfigData] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._load()
        system = [
            TopicConfigData(SELF_TEST_TOPIC, 1, 1),
            TopicConfigData(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfigData(SCHEDULE_TOPIC, delay_level_count, delay_level_count),
            TopicConfigData(RMQ_SYS_TRANS_HALF_TOPIC, 1, 1),
            TopicConfigData(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, 1),
            TopicConfigData(TRANS_CHECK_MAX_TIME_TOPIC, 1, 1),
        ]
        if auto_create_topic_enable:
            n = default_topic_queue_nums
            system.append(TopicConfigData(TBW102, n, n, PERM_INHERIT | PERM_RW))
        else:
            self.table.pop(TBW102, None)
        if cluster_topic_enable:
            system.append(TopicConfigData(cluster_name, 16, 16, PERM_INHERIT))
        if broker_topic_enable:
            system.append(TopicConfigData(broker_name, 1, 1, PERM_INHERIT | PERM_RW))
        for config in system:
            self.table.setdefault(config.topic_name, config)
        self._bump()

    # --- persistence --------------------------------------------------------------------------

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.data_version = DataVersion.from_json(obj.get("dataVersion"))
            for name, tc in (obj.get("topicConfigTable") or {}).items():
                self.table[name] = TopicConfigData.from_json({"topicName": name, **tc})

        load_json_table(self._path, parse, log)

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "dataVersion": self.data_version.to_json(),
                "topicConfigTable": {n: tc.to_json() for n, tc in sorted(self.table.items())},
            },
            option=orjson.OPT_INDENT_2,
        )

    def _bump(self) -> None:
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)
        if self._path is not None:
            write_atomic(self._path, self.encode())

    # --- queries and changes ------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfigData | None:
        return self.table.get(topic)

    def put(self, config: TopicConfigData) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        self.table[config.topic_name] = config
        self._bump()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._bump()
        return True

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfigData | None:
        """Auto-create ``topic`` from the template ``default_topic`` (TBW102) on first send.

        Only when the template exists here and carries the INHERIT permission; the new
        topic gets min(requested, template) queues and the template's permission without
        INHERIT.  Returns the (existing or new) config, or None when creation is refused.
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        n = max(1, min(queue_nums, template.write_queue_nums))
        config = TopicConfigData(
            topic, n, n, template.perm & ~PERM_INHERIT, topic_sys_flag=topic_sys_flag
        )
        self.table[topic] = config
        self._bump()
        log.info("auto-created topic %s with %d queues", topic, n)
        return config

    def create_system_like(self, topic: str, queue_nums: int, perm: int = PERM_RW) -> tuple[TopicConfigData, bool]:
        """Get or create a topic the broker itself needs (%RETRY%group, %DLQ%group)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing, False
        config = TopicConfigData(topic, queue_nums, queue_nums, perm)
        self.table[topic] = config
        self._bump()
        return config, True

    def is_order_topic(self, topic: str) -> bool:
        config = self.table.get(topic)
        return bool(config and config.order)
