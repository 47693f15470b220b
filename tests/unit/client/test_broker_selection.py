"""Which broker of a group a client pulls from and reads state from (RocketMQ
findBrokerAddressInSubscribe / findBrokerAddressInAdmin): the suggested id, for a slave the
next id, else any address (the lowest id); reads go to the master, else a slave."""

from __future__ import annotations

from apogee.client.routes import read_addr, subscribe_addr

GROUP = {0: "m:1", 1: "s1:1", 2: "s2:1"}


def test_the_suggested_broker_is_used_when_the_route_names_it() -> None:
    assert subscribe_addr(GROUP, 0) == ("m:1", False)
    assert subscribe_addr(GROUP, 1) == ("s1:1", True)
    assert subscribe_addr(GROUP, 2) == ("s2:1", True)


def test_a_missing_slave_falls_to_the_next_id_then_to_any_address() -> None:
    assert subscribe_addr({0: "m:1", 2: "s2:1"}, 1) == ("s2:1", True)
    assert subscribe_addr({0: "m:1"}, 1) == ("m:1", False)  # back to the master: a commit may ride along
    assert subscribe_addr({0: "m:1", 1: "s1:1"}, 5) == ("m:1", False)


def test_with_the_master_gone_the_consumer_reads_from_a_slave_and_returns_when_it_is_back() -> None:
    outage = {1: "s1:1", 2: "s2:1"}
    assert subscribe_addr(outage, 0) == ("s1:1", True)  # the slave's answers suggest 0 again and again
    assert subscribe_addr(GROUP, 0) == ("m:1", False)  # the route names the master again


def test_reads_go_to_the_master_else_a_slave() -> None:
    assert read_addr(GROUP) == "m:1"
    assert read_addr({2: "s2:1", 1: "s1:1"}) == "s1:1"
    assert read_addr({}) is None
    assert subscribe_addr({}, 0) is None
