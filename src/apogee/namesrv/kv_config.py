"""The NameServer's namespaced key/value table, persisted as kvConfig.json.

The file shape is RocketMQ's: ``{"configTable": {"<namespace>": {"<key>": "<value>"}}}``.
Every change is written atomically before the request is answered.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson

from apogee.common.atomic_file import load_json_table, write_atomic

log = logging.getLogger("apogee.namesrv.kv_config")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfig:
    def __init__(self, path: Path | None) -> None:
        self._path = path
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        def parse(obj: dict[str, Any]) -> None:
            table = obj.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}

        load_json_table(self._path, parse, log)

    def _persist(self) -> None:
        if self._path is not None:
            write_atomic(self._path, orjson.dumps({"configTable": self.table}, option=orjson.OPT_INDENT_2))

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        ns = self.table.get(namespace)
        if ns is not None and ns.pop(key, None) is not None:
            if not ns:
                del self.table[namespace]
            self._persist()

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))
