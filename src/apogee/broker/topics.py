"""The broker's topic table (RocketMQ's TopicConfigManager), persisted as config/topics.json.

Owns: which topics exist here, their read/write queue numbers and permissions, and the
data version the NameServers use to tell whether a registration carries news.  System
topics are created at start (TBW102 only while auto-creation is on).  Every change bumps the
data version and marks ``file`` dirty: the broker's ``TableWriter`` writes a burst of changes
once (an admin change before its answer), and on its own the table writes at once.  The
caller re-registers with the NameServers when ``create``/``update`` report a change.

Nothing enters the table that cannot be written back and registered: a name TopicValidator
refuses, a permission with bits PermName does not define, or a number outside a Java int
raises ValueError (``topic_config_problem``); processors check the same rules first so they
can answer with the reason.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson

from apogee.broker.persistence import TableFile
from apogee.common.atomic_file import load_json_table
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
    reply_topic,
)
from apogee.common.validators import (
    int32_problem,
    validate_perm,
    validate_topic,
)
from apogee.remoting.bodies.route import DataVersion, TopicConfigData

log = logging.getLogger("apogee.broker.topics")

PERM_RW = PERM_READ | PERM_WRITE


def topic_config_problem(config: TopicConfigData) -> str | None:
    """Why ``config`` may not enter the table (it could not be written back or registered)."""
    return validate_topic(config.topic_name) or _numbers_problem(config)


def _numbers_problem(config: TopicConfigData) -> str | None:
    return (
        validate_perm(config.perm)
        or int32_problem("readQueueNums", config.read_queue_nums)
        or int32_problem("writeQueueNums", config.write_queue_nums)
        or int32_problem("topicSysFlag", config.topic_sys_flag)
    )


def _parse_table(obj: dict[str, Any], source: str) -> dict[str, TopicConfigData]:
    """The ``topicConfigTable`` of a TopicConfigSerializeWrapper (a file or a master's answer);
    a topic whose numbers could never be written back is dropped, loudly (names are not
    checked: the broker's own topics may be any text)."""
    table: dict[str, TopicConfigData] = {}
    for name, tc in (obj.get("topicConfigTable") or {}).items():
        config = TopicConfigData.from_json({"topicName": name, **tc})
        problem = _numbers_problem(config)
        if problem is not None:
            log.error("topic %s in %s dropped: %s", name, source, problem)
            continue
        table[name] = config
    return table


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
        trace_topic: str | None = None,
    ) -> None:
        self.table: dict[str, TopicConfigData] = {}
        self.file = TableFile(path, self.encode, write_at_once=True)
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
        system.append(TopicConfigData(reply_topic(cluster_name), 1, 1))  # RIP-16 replies
        if trace_topic:  # traceTopicEnable: clients' message traces (msgTraceTopicName)
            problem = validate_topic(trace_topic)
            if problem is None:
                system.append(TopicConfigData(trace_topic, 1, 1))
            else:
                log.error("msgTraceTopicName %r not created: %s", trace_topic, problem)
        for config in system:
            self.table.setdefault(config.topic_name, config)
        self._bump()

    # --- persistence --------------------------------------------------------------------------

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.data_version = DataVersion.from_json(obj.get("dataVersion"))
            self.table.update(_parse_table(obj, str(self.file.path)))

        load_json_table(self.file.path, parse, log)

    def replace_from_master(self, obj: dict[str, Any], master: str) -> bool:
        """A slave's copy of its master's GET_ALL_TOPIC_CONFIG answer (RocketMQ
        SlaveSynchronize.syncTopicConfig): the whole table and its version replace ours when
        the versions differ.  True when they did (the file is then written soon)."""
        version = DataVersion.from_json(obj.get("dataVersion"))
        if version == self.data_version:
            return False
        self.table = _parse_table(obj, f"the topic table of master {master}")
        self.data_version = version
        self.file.changed()
        return True

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
        self.file.changed()

    def _add(self, config: TopicConfigData) -> None:
        problem = topic_config_problem(config)
        if problem is not None:
            raise ValueError(f"topic {config.topic_name!r} refused: {problem}")
        self.table[config.topic_name] = config
        self._bump()

    def add_if_absent(self, config: TopicConfigData) -> tuple[TopicConfigData, bool]:
        """The topic's config, ``config`` added when it has none; True when it was added."""
        existing = self.table.get(config.topic_name)
        if existing is not None:
            return existing, False
        self._add(config)
        return config, True

    # --- queries and changes ------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfigData | None:
        return self.table.get(topic)

    def put(self, config: TopicConfigData) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        self._add(config)

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._bump()
        return True

    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfigData | None:
        """Auto-create ``topic`` from the template ``default_topic`` (TBW102) on first send.

        Returns the (existing or new) config, or None when creation is refused
        (``plan_in_send``).
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = self.plan_in_send(topic, default_topic, queue_nums, topic_sys_flag)
        if config is not None:
            self._add(config)
            log.info("auto-created topic %s with %d queues", topic, config.write_queue_nums)
        return config

    def plan_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfigData | None:
        """The config ``create_in_send`` would add, without adding it (a send is judged whole
        before anything changes).  Only when the template exists here and carries the INHERIT
        permission: min(requested, template) queues and the template's permission without
        INHERIT; None otherwise."""
        template = self.table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        n = max(1, min(queue_nums, template.write_queue_nums))
        return TopicConfigData(topic, n, n, template.perm & ~PERM_INHERIT, topic_sys_flag=topic_sys_flag)

    def create_system_like(self, topic: str, queue_nums: int, perm: int = PERM_RW) -> tuple[TopicConfigData, bool]:
        """Get or create a topic the broker itself needs (%RETRY%group, %DLQ%group)."""
        return self.add_if_absent(TopicConfigData(topic, queue_nums, queue_nums, perm))

    def is_order_topic(self, topic: str) -> bool:
        config = self.table.get(topic)
        return bool(config and config.order)
