"""Consumer group configs (RocketMQ's SubscriptionGroupManager), in config/subscriptionGroup.json.

A group enters the table only with a name RocketMQ's ``Validators.checkGroup`` accepts and
numbers that fit their Java types (``group_config_problem``): an empty or 300-character name
is never auto-created, and an admin request carrying one is refused with the reason.  Changes
mark ``file`` dirty; the broker's ``TableWriter`` writes them (see ``persistence``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from apogee.broker.persistence import TableFile
from apogee.common.atomic_file import load_json_table
from apogee.common.validators import int32_problem, int64_problem, validate_group
from apogee.remoting.bodies.route import DataVersion

log = logging.getLogger("apogee.broker.subscriptions")


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        return cls(
            group_name=str(obj["groupName"]),
            consume_enable=bool(obj.get("consumeEnable", True)),
            consume_from_min_enable=bool(obj.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(obj.get("consumeBroadcastEnable", True)),
            retry_queue_nums=int(obj.get("retryQueueNums", 1)),
            retry_max_times=int(obj.get("retryMaxTimes", 16)),
            broker_id=int(obj.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(obj.get("whichBrokerWhenConsumeSlowly", 1)),
            notify_consumer_ids_changed_enable=bool(obj.get("notifyConsumerIdsChangedEnable", True)),
        )


MAX_RETRY_QUEUE_NUMS = 1024
"""A group's retry topic gets this many queues at most (the limit of any topic's queues)."""


def group_config_problem(config: SubscriptionGroupConfig) -> str | None:
    """Why ``config`` may not enter the table, or None."""
    if not 0 <= config.retry_queue_nums <= MAX_RETRY_QUEUE_NUMS:
        return f"retryQueueNums {config.retry_queue_nums} is not between 0 and {MAX_RETRY_QUEUE_NUMS}"
    return (
        validate_group(config.group_name)
        or int32_problem("retryMaxTimes", config.retry_max_times)
        or int64_problem("brokerId", config.broker_id)
        or int64_problem("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly)
    )


def _parse_table(obj: dict[str, Any]) -> dict[str, SubscriptionGroupConfig]:
    """The ``subscriptionGroupTable`` of a SubscriptionGroupWrapper (a file or a master's answer)."""
    return {
        name: SubscriptionGroupConfig.from_json({"groupName": name, **cfg})
        for name, cfg in (obj.get("subscriptionGroupTable") or {}).items()
    }


class SubscriptionGroupManager:
    def __init__(self, path: Path | None, *, auto_create: bool, max_reconsume_times: int = 16) -> None:
        self.file = TableFile(path, self.encode, write_at_once=True)
        self.auto_create = auto_create
        self.max_reconsume_times = max_reconsume_times
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._load()

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.data_version = DataVersion.from_json(obj.get("dataVersion"))
            self.table.update(_parse_table(obj))

        load_json_table(self.file.path, parse, log)

    def replace_from_master(self, obj: dict[str, Any]) -> bool:
        """A slave's copy of its master's GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer (RocketMQ
        SlaveSynchronize.syncSubscriptionGroupConfig): the whole table and its version
        replace ours when the versions differ.  True when they did."""
        version = DataVersion.from_json(obj.get("dataVersion"))
        if version == self.data_version:
            return False
        self.table = _parse_table(obj)
        self.data_version = version
        self.file.changed()
        return True

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "dataVersion": self.data_version.to_json(),
                "subscriptionGroupTable": {n: c.to_json() for n, c in sorted(self.table.items())},
            },
            option=orjson.OPT_INDENT_2,
        )

    def _persist(self) -> None:
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)
        self.file.changed()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config if it exists (nothing is created)."""
        return self.table.get(group)

    def creation_problem(self, group: str) -> str | None:
        """Why ``find`` would not auto-create ``group``, or None when it would."""
        if not self.auto_create:
            return "subscription groups are not auto-created on this broker (autoCreateSubscriptionGroup=false)"
        return validate_group(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when allowed and the name is legal (None otherwise)."""
        config = self.table.get(group)
        if config is None and self.auto_create and validate_group(group) is None:
            config = SubscriptionGroupConfig(group, retry_max_times=self.max_reconsume_times)
            self.table[group] = config
            self._persist()
        return config

    def put(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); ValueError when
        ``group_config_problem`` refuses it."""
        problem = group_config_problem(config)
        if problem is not None:
            raise ValueError(f"group {config.group_name!r} refused: {problem}")
        self.table[config.group_name] = config
        self._persist()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._persist()
        return True
