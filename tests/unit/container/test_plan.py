"""The container's pure parts: its settings, the brokers derived from one broker.conf, the
checks that refuse two brokers sharing a name, port or store, each child's command, and the
restart backoff."""

from __future__ import annotations

import pytest

from apogee.common.config import parse_properties
from apogee.container.backoff import RestartBackoff
from apogee.container.config import load_container_config
from apogee.container.plan import BaseBroker, BrokerSpec, child_args, conflicts, derive
from apogee.errors import ConfigError

BASE = BaseBroker(name="b", listen_host="127.0.0.1", listen_port=10911, ha_port=0, metrics=None,
                  store_root="/data/store", commitlog_dir="")


def spec(name: str, port: int, store: str, broker_id: int = 0, ha: int = 0) -> BrokerSpec:
    return BrokerSpec(name=name, broker_id=broker_id, config_path=f"/c/{name}.conf", listen_port=port, ha_port=ha,
                      metrics_port=0, store_root=store, commitlog_dir="")


# --- settings ------------------------------------------------------------------------------------


def test_rocketmqs_container_file_loads_unchanged() -> None:
    # distribution/conf/container/2container-2m-2s/broker-container1.conf of RocketMQ 5.3.3
    values = parse_properties(
        "listenPort=10811\nnamesrvAddr=172.22.144.49:9876\nfetchNamesrvAddrByAddressServer=false\n"
        "brokerConfigPaths=/root/2container-2m-2s/broker-a-in-container1.conf:"
        "/root/2container-2m-2s/broker-b-in-container1.conf\n"
    )
    config, base = load_container_config(values, {}, "container1.conf")
    assert not config.derived and base == {}
    assert config.namesrv_addr == "172.22.144.49:9876"
    assert config.config_paths() == ["/root/2container-2m-2s/broker-a-in-container1.conf",
                                     "/root/2container-2m-2s/broker-b-in-container1.conf"]


def test_deriving_splits_the_file_into_the_containers_keys_and_the_base_brokers() -> None:
    values = {"brokerCount": "4", "brokerPortStep": "100", "namesrvAddr": "127.0.0.1:9876",
              "brokerName": "b", "listenPort": "20911", "flushDiskType": "SYNC_FLUSH"}
    config, base = load_container_config(values, {}, "c.conf")
    assert (config.broker_count, config.broker_port_step, config.namesrv_addr) == (4, 100, "127.0.0.1:9876")
    assert base == {"namesrvAddr": "127.0.0.1:9876", "brokerName": "b", "listenPort": "20911",
                    "flushDiskType": "SYNC_FLUSH"}


def test_the_command_line_wins_and_chooses_deriving() -> None:
    config, base = load_container_config({"brokerName": "b"}, {"brokerCount": "2", "namesrvAddr": "ns:1"}, "c")
    assert config.broker_count == 2 and config.namesrv_addr == "ns:1" and base == {"brokerName": "b"}


@pytest.mark.parametrize(("values", "overrides", "error"), [
    ({}, {}, "no brokers to run"),
    ({"brokerConfigPaths": "a.conf"}, {"brokerCount": "2"}, "not both"),
    ({"brokerConfigPath": "a.conf"}, {}, "did you mean 'brokerConfigPaths'"),
    ({"brokerConfigPaths": "a.conf", "brokerName": "x"}, {}, "unknown key in c.conf: brokerName"),
    ({"brokerPortStep": "1"}, {"brokerCount": "2"}, "brokerPortStep=1"),
    ({"brokerConfigPaths": "a.conf", "fetchNamesrvAddrByAddressServer": "true"}, {}, "address server"),
    ({"brokerCount": "lots"}, {}, "expected an integer"),
])
def test_settings_a_container_cannot_start_with_are_named(
    values: dict[str, str], overrides: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError, match=error):
        load_container_config(values, overrides, "c.conf")


# --- derived brokers -------------------------------------------------------------------------------


def test_derived_brokers_get_their_own_name_ports_and_store() -> None:
    base_values = {"brokerName": "b", "flushDiskType": "SYNC_FLUSH", "listenPort": "10911"}
    specs = derive(base_values, BASE, 3, 10, "/data/store", "container.conf")
    assert [(s.name, s.listen_port, s.ports(), s.store_root, s.config_path) for s in specs] == [
        ("b-0", 10911, [10911, 10912], "/data/store/b-0", "/data/store/b-0.conf"),
        ("b-1", 10921, [10921, 10922], "/data/store/b-1", "/data/store/b-1.conf"),
        ("b-2", 10931, [10931, 10932], "/data/store/b-2", "/data/store/b-2.conf"),
    ]
    assert specs[2].config_text is not None
    written = parse_properties(specs[2].config_text)
    assert written == {"brokerName": "b-2", "flushDiskType": "SYNC_FLUSH", "listenHost": "127.0.0.1",
                       "listenPort": "10931", "storePathRootDir": "/data/store/b-2"}
    assert specs[2].config_text.startswith("# Written by `apogee broker-container` from container.conf")
    assert conflicts(specs) == []


def test_explicit_ha_metrics_and_commitlog_settings_move_with_each_broker() -> None:
    base = BaseBroker(name="b", listen_host="0.0.0.0", listen_port=10911, ha_port=30912,
                      metrics=("10.0.0.1", 5557), store_root="/s", commitlog_dir="/fast/commitlog")
    specs = derive({"brokerRole": "SLAVE", "brokerId": "2"}, base, 2, 100, "/s", "c")
    second = parse_properties(specs[1].config_text or "")
    assert second["haListenPort"] == "31012" and second["metricsListen"] == "10.0.0.1:5657"
    assert second["storePathCommitLog"] == "/fast/commitlog/b-1"
    assert [s.label for s in specs] == ["b-0/2", "b-1/2"]  # slaves of masters b-0 and b-1
    assert specs[1].ports() == [11011, 31012, 5657]


def test_port_zero_gives_every_broker_a_free_port() -> None:
    base = BaseBroker(name="b", listen_host="127.0.0.1", listen_port=0, ha_port=0, metrics=("127.0.0.1", 0),
                      store_root="/s", commitlog_dir="")
    specs = derive({}, base, 2, 10, "/s", "c")
    assert [s.listen_port for s in specs] == [0, 0] and [s.ports() for s in specs] == [[], []]
    assert parse_properties(specs[1].config_text or "")["metricsListen"] == "127.0.0.1:0"


# --- conflicts -----------------------------------------------------------------------------------------


def test_brokers_sharing_a_name_port_or_store_are_refused_naming_both() -> None:
    problems = conflicts([spec("a", 10911, "/s/a"), spec("a", 10912, "/s/a")])
    assert problems == ["a and a both use brokerName/brokerId a/0", "a and a both use port 10912",
                        "a and a both use store /s/a", "a and a both use CommitLog directory /s/a/commitlog"]
    assert conflicts([spec("a", 10911, "/s/a"), spec("b", 10912, "/s/b")]) == ["a and b both use port 10912"]
    assert conflicts([spec("a", 10911, "/s/a", ha=20000), spec("b", 19999, "/s/b")]) == [
        "a and b both use port 20000"]


def test_a_master_and_its_slave_may_share_a_container() -> None:
    # RocketMQ's 2container-2m-2s: broker-a's master and broker-b's slave in one container.
    assert conflicts([spec("broker-a", 10911, "/r/a"), spec("broker-b", 20911, "/r/b", broker_id=1)]) == []
    assert conflicts([spec("a", 10911, "/r/a"), spec("a", 20911, "/r/a-s", broker_id=1)]) == []


# --- the child's command --------------------------------------------------------------------------------


def test_each_child_is_apogee_broker_with_its_file() -> None:
    s = spec("a", 0, "/s/a")
    assert child_args(s, listen=None, namesrv="", broker_ip="", log_level="INFO") == [
        "broker", "-c", "/c/a.conf", "--log-level", "INFO"]
    assert child_args(s, listen="127.0.0.1:40000", namesrv="ns:9876", broker_ip="10.0.0.1", log_level="WARNING") == [
        "broker", "-c", "/c/a.conf", "--log-level", "WARNING", "-n", "ns:9876", "--broker-ip", "10.0.0.1",
        "--listen", "127.0.0.1:40000"]


# --- restarts ------------------------------------------------------------------------------------------------


def test_a_broker_that_keeps_dying_is_restarted_ever_more_slowly() -> None:
    backoff = RestartBackoff(first_s=0.5, max_s=30.0, stable_s=60.0)
    assert [backoff.delay_after(1.0) for _ in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff.delay_after(3600.0) == 0.5  # it ran long enough to count as healthy again
    assert backoff.delay_after(0.1) == 1.0
    for _ in range(100):
        backoff.delay_after(0.0)
    assert backoff.delay_after(0.0) == 30.0  # no overflow after many failures
