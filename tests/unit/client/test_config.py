from __future__ import annotations

import pytest

from apogee.client.config import ConsumerConfig, ProducerConfig
from apogee.client.types import ConsumeFromWhere, MessageModel
from apogee.common.host import local_ip
from apogee.errors import ConfigError


def test_client_id_and_namesrv_list() -> None:
    cfg = ProducerConfig(namesrv_addr=" 10.0.0.1:9876 ; 10.0.0.2:9876,", client_ip="10.0.0.9", instance_name="app")
    cfg.validate()
    assert cfg.namesrv_list() == ["10.0.0.1:9876", "10.0.0.2:9876"]
    cfg.resolve_identity(local_ip)
    assert cfg.client_id() == "10.0.0.9@app"
    cfg.unit_name = "u1"
    assert cfg.client_id() == "10.0.0.9@app@u1"


def test_default_instance_names_are_unique() -> None:
    a, b = ConsumerConfig(client_ip="1.1.1.1"), ConsumerConfig(client_ip="1.1.1.1")
    a.resolve_identity(local_ip)
    b.resolve_identity(local_ip)
    assert a.client_id() != b.client_id()


@pytest.mark.parametrize(
    "kwargs",
    [{"namesrv_addr": ""}, {"namesrv_addr": "nohostport"}, {"namesrv_addr": "h:1", "group": ""},
     {"namesrv_addr": "h:1", "pull_batch_size": 0}, {"namesrv_addr": "h:1", "message_model": "SOMETIMES"},
     {"namesrv_addr": "h:1", "consume_from_where": "YESTERDAY"}],
)
def test_invalid_consumer_configs(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ConsumerConfig(**kwargs).validate()  # type: ignore[arg-type]


def test_enum_options_accept_names() -> None:
    cfg = ConsumerConfig(namesrv_addr="h:1", message_model="broadcasting",  # type: ignore[arg-type]
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # type: ignore[arg-type]
    cfg.validate()
    assert cfg.message_model is MessageModel.BROADCASTING
    assert cfg.consume_from_where is ConsumeFromWhere.FIRST_OFFSET
    assert cfg.max_reconsume() == 16


def test_fault_tables_must_match() -> None:
    with pytest.raises(ConfigError):
        ProducerConfig(namesrv_addr="h:1", latency_max_ms=(1, 2), not_available_duration_ms=(1,)).validate()


def test_credentials_come_from_the_config_or_the_environment_and_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ProducerConfig(namesrv_addr="h:1", access_key="appKey01", secret_key="appSecret1")
    cfg.validate()
    creds = cfg.credentials()
    assert creds is not None and (creds.access_key, creds.secret_key, creds.security_token) == (
        "appKey01", "appSecret1", None
    )
    assert "appSecret1" not in repr(cfg) and "appSecret1" not in repr(creds)
    assert ProducerConfig(namesrv_addr="h:1").credentials() is None
    monkeypatch.setenv("APOGEE_ACCESS_KEY", "envKey001")
    monkeypatch.setenv("APOGEE_SECRET_KEY", "envSecret1")
    monkeypatch.setenv("APOGEE_SECURITY_TOKEN", "envToken1")
    from_env = ConsumerConfig(namesrv_addr="h:1").credentials()
    assert from_env is not None and (from_env.access_key, from_env.secret_key, from_env.security_token) == (
        "envKey001", "envSecret1", "envToken1"
    )


def test_an_access_key_without_a_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="access_key and secret_key go together"):
        ProducerConfig(namesrv_addr="h:1", access_key="appKey01", secret_key="").validate()
