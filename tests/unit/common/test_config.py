from __future__ import annotations

import enum
from dataclasses import dataclass, field

import pytest

from apogee.common.config import apply, describe, parse_properties, rmq_key
from apogee.errors import ConfigError


class Mode(enum.Enum):
    ASYNC_FLUSH = 1
    SYNC_FLUSH = 2


@dataclass
class Sample:
    broker_name: str = "broker-a"
    listen_port: int = 10911
    auto_create_topic_enable: bool = True
    flush_disk_type: Mode = Mode.ASYNC_FLUSH
    file_reserved_time_h: int = field(default=72, metadata=rmq_key("fileReservedTime"))


def test_properties_file_with_rocketmq_names() -> None:
    text = (
        "# comment\nbrokerName = broker-b\nlistenPort=10921\nflushDiskType=SYNC_FLUSH\n"
        "fileReservedTime: 48\nautoCreateTopicEnable=false\n"
    )
    config = Sample()
    assert apply(config, parse_properties(text)) == []
    assert config == Sample("broker-b", 10921, False, Mode.SYNC_FLUSH, 48)
    assert dict(describe(config))["fileReservedTime"] == 48


def test_unknown_keys_are_reported() -> None:
    with pytest.raises(ConfigError, match="brokerNmae"):
        apply(Sample(), {"brokerNmae": "x"})
    assert apply(Sample(), {"brokerNmae": "x"}, strict=False) == ["brokerNmae"]


def test_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match="listenPort"):
        apply(Sample(), {"listenPort": "ten"})
    with pytest.raises(ConfigError, match="ASYNC_FLUSH, SYNC_FLUSH"):
        apply(Sample(), {"flushDiskType": "SOMETIMES"})
