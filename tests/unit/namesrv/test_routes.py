"""RouteTable rules, with the clock passed in (no sleeps, no sockets)."""

from __future__ import annotations

from apogee.namesrv.routes import RouteTable
from apogee.remoting.bodies.route import DataVersion, TopicConfigData, TopicRouteData


def register(
    table: RouteTable,
    name: str,
    addr: str,
    *,
    bid: int = 0,
    topics=("T",),
    now: int = 0,
    version: int = 1,
    cluster: str = "C",
):
    return table.register_broker(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=bid,
        ha_server_addr=addr + "-ha",
        data_version=DataVersion(timestamp=version, counter=version),
        topic_configs={t: TopicConfigData(t, 4, 4) for t in topics},
        filter_servers=[],
        now_ms=now,
    )


def test_route_lists_every_broker_serving_the_topic() -> None:
    table = RouteTable()
    register(table, "a", "h:1")
    register(table, "b", "h:2")
    route = table.route_of("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["a", "b"]
    assert [b.broker_addrs for b in route.broker_datas] == [{0: "h:1"}, {0: "h:2"}]
    assert TopicRouteData.decode(table.encoded_route("T") or b"") == route


def test_slave_registration_does_not_change_topics_but_learns_master() -> None:
    table = RouteTable()
    register(table, "a", "h:1", topics=("T",))
    result = register(table, "a", "h:3", bid=1, topics=("OnlyOnSlave",))
    assert table.route_of("OnlyOnSlave") is None
    assert result.master_addr == "h:1" and result.ha_server_addr == "h:1-ha"
    route = table.route_of("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "h:1", 1: "h:3"}


def test_same_address_under_a_new_id_replaces_the_old_id() -> None:
    table = RouteTable()
    register(table, "a", "h:1", bid=1)
    register(table, "a", "h:1", bid=0)
    assert table.broker_addr_table["a"].broker_addrs == {0: "h:1"}


def test_topic_configs_apply_only_when_the_data_version_changes() -> None:
    table = RouteTable()
    register(table, "a", "h:1", topics=("T",), version=1)
    table.topic_queue_table["T"]["a"].perm = 2  # a local edit, e.g. wipe write perm
    register(table, "a", "h:1", topics=("T",), version=1)
    assert table.topic_queue_table["T"]["a"].perm == 2
    register(table, "a", "h:1", topics=("T",), version=2)
    assert table.topic_queue_table["T"]["a"].perm == 6


def test_scan_drops_only_silent_brokers_and_their_topics() -> None:
    table = RouteTable()
    register(table, "a", "h:1", topics=("T", "OnlyA"), now=0)
    register(table, "b", "h:2", topics=("T",), now=100_000)
    assert table.scan_expired(now_ms=125_000, expiry_ms=120_000) == ["h:1"]
    assert table.route_of("OnlyA") is None
    route = table.route_of("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["b"]
    assert table.cluster_addr_table == {"C": {"b"}}


def test_unregister_last_broker_of_cluster_removes_the_cluster() -> None:
    table = RouteTable()
    register(table, "a", "h:1")
    table.unregister_broker("C", "h:1", "a", 0)
    assert table.cluster_addr_table == {} and table.broker_addr_table == {} and table.topics() == []


def test_cached_route_is_dropped_on_write() -> None:
    table = RouteTable()
    register(table, "a", "h:1")
    assert table.encoded_route("T") is not None
    table.delete_topic("T")
    assert table.encoded_route("T") is None and table.route_of("T") is None


def test_wipe_and_add_write_perm() -> None:
    table = RouteTable()
    register(table, "a", "h:1", topics=("T", "U"))
    assert table.set_write_perm("a", writable=False) == 2
    assert table.topic_queue_table["T"]["a"].perm == 4
    table.set_write_perm("a", writable=True)
    assert table.topic_queue_table["U"]["a"].perm == 6


def test_topics_of_cluster_and_system_topics() -> None:
    table = RouteTable()
    register(table, "a", "h:1", topics=("T",), cluster="C1")
    register(table, "b", "h:2", topics=("U",), cluster="C2")
    assert table.topics_of_cluster("C1") == ["T"]
    assert table.system_topics() == ["C1", "C2", "a", "b"]
