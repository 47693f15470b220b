"""The NameServer's ``/metrics``: what it knows (brokers, topics), its connections, and the
requests it answered by code.  ``NamesrvMetrics.parts`` runs on the NameServer's loop
(``common/metrics_http``).  rocketmq-exporter has no NameServer figures, so every name is
Apogee's own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from apogee.common.metrics_http import MetricSpec, Row, remoting_rows, remoting_specs
from apogee.namesrv.routes import RouteTable
from apogee.remoting.codes import RequestCode
from apogee.remoting.server import RemotingServer

SPECS: dict[str, MetricSpec] = {
    "apogee_namesrv_brokers": MetricSpec(
        "gauge", "Registered broker addresses (masters and slaves) of the broker group.",
        ("cluster", "broker", "role")),
    "apogee_namesrv_topics": MetricSpec("gauge", "Topics in the route table.", ()),
    "apogee_namesrv_requests_total": MetricSpec("counter", "Requests answered, by request code.", ("code", "name")),
    **remoting_specs(()),
}


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


class NamesrvMetrics:
    def __init__(self, routes: RouteTable, server: RemotingServer, requests: Counter[int]) -> None:
        self._routes = routes
        self._server = server
        self._requests = requests

    def parts(self) -> Iterator[list[Row]]:
        """The snapshot in one step (a NameServer's tables are small)."""
        yield self.rows()

    def rows(self) -> list[Row]:
        rows: list[Row] = [("apogee_namesrv_topics", (), len(self._routes.topic_queue_table))]
        for name, data in self._routes.broker_addr_table.items():
            live = [bid for bid, addr in data.broker_addrs.items() if addr in self._routes.broker_live_table]
            masters = sum(1 for bid in live if bid == 0)
            rows.append(("apogee_namesrv_brokers", (data.cluster, name, "master"), masters))
            rows.append(("apogee_namesrv_brokers", (data.cluster, name, "slave"), len(live) - masters))
        for code, count in sorted(self._requests.items()):
            rows.append(("apogee_namesrv_requests_total", (str(code), _code_name(code)), count))
        rows += remoting_rows((), len(self._server.connections), self._server.counters)
        return rows
