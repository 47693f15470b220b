"""``/cluster``: every broker the NameServer lists, by cluster and broker group, with its
role, version, address, put/get TPS, disk use and replication lag; ``/cluster/broker/{addr}``:
one broker's runtime figures (GET_BROKER_RUNTIME_INFO) and configuration (GET_BROKER_CONFIG).

One GET_BROKER_CLUSTER_INFO and one GET_BROKER_RUNTIME_INFO per broker, all at once, per
load (cached for ``cacheTtlSeconds``); a broker that does not answer is a row that says so,
not a failed page.  ``/api/cluster`` is the same as JSON, which the page polls to keep the
TPS figures live.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.admin.brokers import BrokerRow, broker_row
from apogee.admin.replication import BrokerHA, group_view
from apogee.dashboard.context import DashboardContext, context_of
from apogee.dashboard.errors import Problem, attempt
from apogee.dashboard.web import NavEntry, json_response, render

NAV: NavEntry | None = NavEntry("Cluster", "/cluster", 10)


@dataclass
class BrokerEntry:
    """One broker address as the cluster page shows it."""

    row: BrokerRow  # cluster, group, id, address, version, TPS, today's counts, error
    role: str  # master | slave
    ha_role: str  # ASYNC_MASTER, SYNC_MASTER, SLAVE (empty when it did not answer)
    disk_ratio: float  # used share of the store's disk
    disk_capacity: str
    ha: BrokerHA | None  # a slave's lag and link state; a master's own entry
    slaves_linked: int  # a master: slaves with a connected HA link

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _float(value: str | None) -> float:
    try:
        return float(value or 0.0)
    except ValueError:
        return 0.0


async def load_brokers(ctx: DashboardContext) -> list[BrokerEntry]:
    """Every registered broker address, masters before their slaves (cached)."""

    async def load() -> list[BrokerEntry]:
        admin = ctx.admin
        view = await admin.cluster_info()
        infos = await admin.runtime_infos(a for d in view.brokers.values() for a in d.broker_addrs.values())
        now_ms = time.time() * 1000
        out = []
        for cluster in sorted(view.clusters):
            for name in sorted(view.clusters[cluster]):
                data = view.brokers.get(name)
                if data is None:
                    continue
                addrs = dict(data.broker_addrs)
                ha = {b.addr: b for b in group_view(name, addrs, infos).brokers}
                for bid, addr in sorted(addrs.items()):
                    info = infos.get(addr, "no answer")
                    keys = info if isinstance(info, dict) else {}
                    links = sum(1 for b in ha.values() if b.broker_id != bid and b.state == "connected")
                    out.append(BrokerEntry(
                        broker_row(cluster, name, bid, addr, info, now_ms), "master" if bid == 0 else "slave",
                        keys.get("haRole", ""), _float(keys.get("commitLogDiskRatio")),
                        keys.get("commitLogDirCapacity", ""),
                        ha.get(addr), links if bid == 0 else 0,
                    ))
        return out

    return await ctx.cached("cluster:brokers", load)


async def index(request: Request) -> Response:
    problems: list[Problem] = []
    brokers = await attempt(problems, "cluster", load_brokers(context_of(request))) or []
    clusters: dict[str, list[BrokerEntry]] = {}
    for entry in brokers:
        clusters.setdefault(entry.row.cluster, []).append(entry)
    return render(request, "cluster/index.html", {"title": "Cluster", "clusters": clusters}, problems=problems)


async def api_brokers(request: Request) -> Response:
    brokers = await load_brokers(context_of(request))
    return json_response({"brokers": [b.to_json() for b in brokers]})


async def broker(request: Request) -> Response:
    """Only an address the NameServer lists: the dashboard does not connect wherever a URL says."""
    ctx = context_of(request)
    addr = request.path_params["addr"]
    view = await ctx.admin.cluster_info()
    name = view.name_of(addr)
    if name is None:
        raise HTTPException(404, f"{addr} is not a broker the NameServer lists (see the cluster page)")
    problems: list[Problem] = []
    info = await attempt(problems, "runtime info", ctx.admin.broker_runtime_info(addr))
    config = await attempt(problems, "configuration", ctx.admin.broker_config(addr))
    return render(request, "cluster/broker.html", {
        "title": f"Broker {name or addr}", "addr": addr, "name": name,
        "info": sorted((info or {}).items()), "config": sorted((config or {}).items()),
    }, problems=problems)


routes: list[BaseRoute] = [
    Route("/cluster", index, name="cluster"),
    Route("/cluster/broker/{addr}", broker, name="broker"),
    Route("/api/cluster", api_brokers, name="api_cluster"),
]
