"""Replication settings: RocketMQ's names and 4.9.8 defaults, and the brokerId/role rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.broker.config import BrokerConfig, BrokerRole
from apogee.cli.broker import load_broker_conf
from apogee.errors import ConfigError
from apogee.store.config import StoreConfig


def test_defaults_are_rocketmq_498s() -> None:
    store, broker = StoreConfig(), BrokerConfig()
    assert broker.broker_role is BrokerRole.ASYNC_MASTER and broker.broker_id == 0
    assert store.ha_send_heartbeat_interval_ms == 5000
    assert store.ha_housekeeping_interval_ms == 20_000
    assert store.ha_transfer_batch_size == 32768
    assert store.ha_slave_fallbehind_max == 268435456
    assert store.slave_timeout_ms == 3000
    assert store.ha_master_address == ""
    assert store.offset_check_in_slave is False
    assert store.access_message_in_memory_max_ratio == 40
    assert broker.slave_read_enable is False and broker.broker_ip2 == ""


def test_broker_conf_keys_use_rocketmq_names(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerRole=SLAVE\nbrokerId=2\nbrokerIP2=127.0.0.2\nhaListenPort=20912\nhaMasterAddress=127.0.0.1:10912\n"
        "haSendHeartbeatInterval=1000\nhaHousekeepingInterval=4000\nhaTransferBatchSize=65536\n"
        "haSlaveFallbehindMax=1024\nslaveTimeout=500\nslaveReadEnable=true\noffsetCheckInSlave=true\n"
    )
    broker, store, _, unknown = load_broker_conf(str(conf))
    assert unknown == []
    assert broker.broker_role is BrokerRole.SLAVE and broker.broker_id == 2 and broker.is_slave
    assert broker.broker_ip2 == "127.0.0.2" and broker.slave_read_enable
    assert (store.ha_listen_port, store.ha_master_address) == (20912, "127.0.0.1:10912")
    assert (store.ha_send_heartbeat_interval_ms, store.ha_housekeeping_interval_ms) == (1000, 4000)
    assert (store.ha_transfer_batch_size, store.ha_slave_fallbehind_max, store.slave_timeout_ms) == (65536, 1024, 500)
    assert store.offset_check_in_slave
    broker.validate_role()


@pytest.mark.parametrize("broker_id", [0, -1])
def test_a_slave_needs_a_positive_broker_id(broker_id: int) -> None:
    with pytest.raises(ConfigError, match="Slave's brokerId must be > 0"):
        BrokerConfig(broker_role=BrokerRole.SLAVE, broker_id=broker_id).validate_role()


@pytest.mark.parametrize("role", [BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER])
def test_a_master_is_broker_id_zero(role: BrokerRole) -> None:
    BrokerConfig(broker_role=role, broker_id=0).validate_role()
    with pytest.raises(ConfigError, match="master's brokerId must be 0"):
        BrokerConfig(broker_role=role, broker_id=1).validate_role()


@pytest.mark.parametrize(
    ("field", "value"), [("ha_listen_port", 70000), ("ha_transfer_batch_size", 0), ("ha_housekeeping_interval_ms", 0)]
)
def test_bad_ha_values_are_refused(field: str, value: int) -> None:
    config = StoreConfig()
    setattr(config, field, value)
    with pytest.raises(ConfigError):
        config.validate()
