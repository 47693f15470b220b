"""Consumer group configs (RocketMQ's SubscriptionGroupManager), in config/subscriptionGroup.json."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from apogee.common.atomic_file import load_json_table, write_atomic
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


class SubscriptionGroupManager:
    def __init__(self, path: Path | None, *, auto_create: bool, max_reconsume_times: int = 16) -> None:
        self._path = path
        self.auto_create = auto_create
        self.max_reconsume_times = max_reconsume_times
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._load()

    def _load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            self.data_version = DataVersion.from_json(obj.get("dataVersion"))
            for name, cfg in (obj.get("subscriptionGroupTable") or {}).items():
                self.table[name] = SubscriptionGroupConfig.from_json({"groupName": name, **cfg})

        load_json_table(self._path, parse, log)

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
        if self._path is not None:
            write_atomic(self._path, self.encode())

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when allowed (None otherwise)."""
        config = self.table.get(group)
        if config is None and self.auto_create:
            config = SubscriptionGroupConfig(group, retry_max_times=self.max_reconsume_times)
            self.table[group] = config
            self._persist()
        return config

    def put(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.group_name] = config
        self._persist()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._persist()
        return True
