"""Where an application's settings come from (apogee.client.app.settings): no sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.client.app import App
from apogee.client.app.settings import KEYS, env_name, resolve
from apogee.client.types import ConsumeFromWhere
from apogee.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(text)
    return path


def test_env_names_are_the_property_names_in_upper_snake_case() -> None:
    assert env_name("namesrvAddr") == "APOGEE_NAMESRV_ADDR"
    assert env_name("sendMsgTimeout") == "APOGEE_SEND_MSG_TIMEOUT"
    assert env_name("clientIP") == "APOGEE_CLIENT_IP"
    assert env_name("mqClientApiTimeout") == "APOGEE_MQ_CLIENT_API_TIMEOUT"
    assert {"namesrvAddr", "producerGroup", "sendMsgTimeout", "consumeThreadMax", "maxReconsumeTimes"} <= KEYS
    assert "consumerGroup" not in KEYS  # each listener names its group


def test_precedence_is_arguments_then_environment_then_file_then_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "namesrvAddr=file:9876\nproducerGroup=file_group\nsendMsgTimeout=1111\nconsumeThreadMax=7\n"
        "maxReconsumeTimes=5\n",
    )
    environ = {"NAMESRV_ADDR": "env:9876", "APOGEE_SEND_MSG_TIMEOUT": "2222", "APOGEE_MAX_RECONSUME_TIMES": "6"}
    s = resolve(environ=environ, config_file=path, explicit={"max_reconsume_times": 9})
    assert s.producer.namesrv_addr == s.consumer.namesrv_addr == "env:9876"  # env > file
    assert s.producer.group == "file_group"  # file > default
    assert s.producer.send_timeout_ms == 2222  # env > file
    assert s.consumer.consume_thread_max == 7  # file > default
    assert s.consumer.max_reconsume_times == 9  # argument > env > file
    assert s.producer.retry_times_when_send_failed == 2  # the default
    s = resolve(environ={}, config_file=path, explicit={"namesrv_addr": "arg:1", "producer_group": "g"})
    assert (s.producer.namesrv_addr, s.producer.group) == ("arg:1", "g")


def test_apogee_namesrv_addr_wins_over_rocketmqs_variable() -> None:
    s = resolve(environ={"NAMESRV_ADDR": "a:1", "APOGEE_NAMESRV_ADDR": "b:2"})
    assert s.producer.namesrv_addr == "b:2"


def test_the_file_can_come_from_apogee_config(tmp_path: Path) -> None:
    path = write(tmp_path, "namesrvAddr=file:9876\nconsumeFromWhere=CONSUME_FROM_FIRST_OFFSET\n")
    s = resolve(environ={"APOGEE_CONFIG": str(path)})
    assert s.producer.namesrv_addr == "file:9876"
    assert s.consumer.consume_from_where is ConsumeFromWhere.FIRST_OFFSET


def test_bad_settings_say_where_they_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no NameServer configured: set NAMESRV_ADDR"):
        resolve(environ={})
    with pytest.raises(ConfigError, match="APOGEE_SEND_MSG_TIMEOUT='soon': expected an integer"):
        resolve(environ={"NAMESRV_ADDR": "a:1", "APOGEE_SEND_MSG_TIMEOUT": "soon"})
    path = write(tmp_path, "namesrvAddr=a:1\nsendMsgTimeOut=3\nconsumerGroup=x\n")
    with pytest.raises(ConfigError, match="unknown keys consumerGroup, sendMsgTimeOut"):
        resolve(environ={}, config_file=path)
    with pytest.raises(ConfigError, match="cannot read config file"):
        resolve(environ={}, config_file=tmp_path / "missing.properties")
    with pytest.raises(ConfigError, match="unknown client option 'send_timeout'"):
        resolve(environ={"NAMESRV_ADDR": "a:1"}, explicit={"send_timeout": 1})
    with pytest.raises(ConfigError, match="not host:port"):
        resolve(environ={"NAMESRV_ADDR": "nowhere"})


def test_an_app_resolves_its_settings_at_start_and_cli_overrides_win(tmp_path: Path) -> None:
    path = write(tmp_path, "namesrvAddr=file:9876\n")
    app = App("svc", config_file=path, namesrv_addr="code:1", consume_thread_max=3)
    s = app.settings(environ={"NAMESRV_ADDR": "env:2"})
    assert s.producer.namesrv_addr == "code:1" and s.consumer.consume_thread_max == 3
    app.configure(namesrv_addr="cli:3")
    s = app.settings(environ={})
    assert s.producer.namesrv_addr == "cli:3"
    # One client instance for the producer and every consumer of the app.
    assert s.producer.instance_name == s.consumer.instance_name != ""
    assert App("svc").settings(environ={"NAMESRV_ADDR": "a:1"}).producer.instance_name != s.producer.instance_name


def test_the_quick_start_example_properties_file_is_valid() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "quickstart_app.properties"
    settings = App("x", config_file=example).settings(environ={})
    assert settings.producer.namesrv_addr == "127.0.0.1:9876"
    assert settings.producer.group == "Default_Server_Producer_Group"
