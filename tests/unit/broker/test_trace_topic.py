"""The broker's trace topic (traceTopicEnable / msgTraceTopicName, RocketMQ's
TopicConfigManager): created at start with one queue, read and write, only when enabled."""

from __future__ import annotations

from apogee.broker.config import BrokerConfig
from apogee.broker.topics import TopicConfigManager
from apogee.common.config import apply
from apogee.common.constants import PERM_READ, PERM_WRITE, RMQ_SYS_TRACE_TOPIC


def manager(trace_topic: str | None) -> TopicConfigManager:
    return TopicConfigManager(
        None, cluster_name="C", broker_name="b", auto_create_topic_enable=True,
        default_topic_queue_nums=8, delay_level_count=18, trace_topic=trace_topic,
    )


def test_trace_topic_created_with_one_queue_when_enabled() -> None:
    config = manager(RMQ_SYS_TRACE_TOPIC).get(RMQ_SYS_TRACE_TOPIC)
    assert config is not None
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, PERM_READ | PERM_WRITE)
    assert manager(None).get(RMQ_SYS_TRACE_TOPIC) is None


def test_broker_conf_keys() -> None:
    config = BrokerConfig()
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (False, RMQ_SYS_TRACE_TOPIC)
    apply(config, {"traceTopicEnable": "true", "msgTraceTopicName": "MyTraces"}, strict=True)
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (True, "MyTraces")
    assert manager(config.msg_trace_topic_name).get("MyTraces") is not None


def test_an_illegal_trace_topic_name_is_not_created() -> None:
    m = manager("bad name")
    assert m.get("bad name") is None
