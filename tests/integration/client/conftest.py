"""Real `apogee namesrv` + `apogee broker` processes for the client's integration tests.

One cluster per test module (starting processes costs about a second); every test uses its
own topics and groups.  ``FAST`` shrinks the client's timers so rebalance, route refresh and
offset persistence happen in about a second instead of 20-30 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.names import unique as unique  # re-exported: the tests import it from here
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import wait_until as wait_until  # re-exported, as unique

__all__ = ["FAST", "FAST_CONSUMER", "Cluster", "start_broker", "unique", "wait_until"]

FAST: dict[str, Any] = {
    "poll_name_server_interval_ms": 1000,
    "heartbeat_broker_interval_ms": 1000,
    "persist_consumer_offset_interval_ms": 500,
}
FAST_CONSUMER: dict[str, Any] = {
    **FAST,
    "rebalance_interval_ms": 1000,
    "pull_retry_delay_ms": 200,
    "lock_interval_ms": 1000,
    "lock_retry_delay_ms": 300,
    "suspend_current_queue_time_ms": 100,
    "local_retry_delay_ms": 500,
}


@dataclass
class Cluster:
    namesrv: ServerProcess
    brokers: list[ServerProcess]
    base: Path

    @property
    def ns(self) -> str:
        return self.namesrv.addr


def start_broker(namesrv_addr: str, store_dir: Path, *extra: str, name: str | None = None) -> ServerProcess:
    args = [
        "broker",
        "-n",
        namesrv_addr,
        "--listen",
        "127.0.0.1:0",
        "--store-dir",
        str(store_dir),
        "--broker-ip",
        "127.0.0.1",
        "--log-level",
        "WARNING",
        *extra,
    ]
    if name is not None:
        conf = store_dir.parent / f"{name}.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(f"brokerName={name}\n")
        args += ["-c", str(conf)]
    return ServerProcess(args).start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("client")
    namesrv = start_namesrv(base / "namesrv")
    broker = start_broker(namesrv.addr, base / "store")
    try:
        yield Cluster(namesrv, [broker], base)
    finally:
        broker.close()
        namesrv.close()


