"""``AdminClient.cluster_info``'s answer: named fields with helpers, and still the pair that
``brokers, clusters = await admin.cluster_info()`` unpacks (callers such as the peer
benchmark harness's adapter were written against the pair)."""

from __future__ import annotations

from apogee.admin.base import ClusterView
from apogee.remoting.bodies.route import BrokerData


def view() -> ClusterView:
    return ClusterView(
        {
            "a": BrokerData("c1", "a", {0: "127.0.0.1:1", 1: "127.0.0.1:2"}),
            "b": BrokerData("c2", "b", {1: "127.0.0.1:3"}),  # its master is down
        },
        {"c1": ["a"], "c2": ["b"]},
    )


def test_the_view_unpacks_as_brokers_and_clusters() -> None:
    brokers, clusters = view()
    assert set(brokers) == {"a", "b"} and clusters == {"c1": ["a"], "c2": ["b"]}
    assert brokers["a"].broker_addrs[0] == "127.0.0.1:1"


def test_masters_names_and_clusters() -> None:
    v = view()
    assert v.masters() == {"a": "127.0.0.1:1"}
    assert v.masters("c2") == {} and v.masters("nope") == {}
    assert v.name_of("127.0.0.1:2") == "a" and v.name_of("127.0.0.1:9") is None
    assert v.cluster_of("b") == "c2" and v.cluster_of("zz") is None
