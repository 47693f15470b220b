"""The replication view of a cluster (``apogee admin ha-status``): for each broker group its
master and slaves, their CommitLog max offsets, each slave's lag in bytes and in time, and
whether its link is connected or diverged, with the reason.

Built from what the NameServer lists (GET_BROKER_CLUSTER_INFO) and what each broker says
of itself in GET_BROKER_RUNTIME_INFO: the HA keys of docs/replication.md (``haRole``,
``haSlaves`` on a master; ``haLinkState``, ``haDivergedReason`` on a slave).  A slave's lag
in time comes from its master's ``haSlaves`` entry, matched by host and the nearest offset
(the master sees a slave by its HA connection, not by its broker address).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from apogee.admin.client import AdminClient
from apogee.errors import ApogeeError


@dataclass
class BrokerHA:
    """One broker of a group as the view shows it."""

    broker_id: int
    addr: str
    role: str = ""
    max_offset: int = -1
    lag_bytes: int = 0
    lag_ms: int = 0
    state: str = ""  # master: "master"; slave: connected | connecting | diverged; "unreachable"
    reason: str = ""


@dataclass
class GroupHA:
    broker_name: str
    brokers: list[BrokerHA] = field(default_factory=list)
    # The master's own list of HA links and refused peers (its ``haSlaves``).
    links: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def group_view(broker_name: str, addrs: dict[int, str], infos: dict[str, dict[str, str] | str]) -> GroupHA:
    """The view of one group from each broker's runtime info (or the error text when a
    broker did not answer).  Pure: the I/O is ``replication_status``'s."""
    group = GroupHA(broker_name)
    master_max = -1
    master_info = infos.get(addrs.get(0, ""))
    if isinstance(master_info, dict):
        master_max = int(master_info.get("commitLogMaxOffset", "-1"))
        try:
            group.links = list(orjson.loads(master_info.get("haSlaves", "[]")))
        except orjson.JSONDecodeError:
            group.links = []
    for broker_id, addr in sorted(addrs.items()):
        row = BrokerHA(broker_id, addr)
        info = infos.get(addr)
        if not isinstance(info, dict):
            row.state, row.reason = "unreachable", str(info or "")
            group.brokers.append(row)
            continue
        row.role = info.get("haRole", "")
        row.max_offset = int(info.get("commitLogMaxOffset", "-1"))
        if broker_id == 0:
            row.state = "master"
        else:
            row.state = info.get("haLinkState", "")
            row.reason = info.get("haDivergedReason", "")
            if master_max >= 0:
                row.lag_bytes = max(0, master_max - row.max_offset)
                row.lag_ms = _lag_ms(group.links, addr, row.max_offset)
        group.brokers.append(row)
    return group


def _lag_ms(links: list[dict[str, Any]], addr: str, max_offset: int) -> int:
    host = addr.rpartition(":")[0]
    same_host = [
        link for link in links
        if link.get("state") == "connected" and str(link.get("addr", "")).rpartition(":")[0] == host
    ]
    if not same_host:
        return 0
    best = min(same_host, key=lambda link: abs(int(link.get("ackOffset", 0)) - max_offset))
    return int(best.get("lagMs", 0))


async def replication_status(admin: AdminClient) -> list[GroupHA]:
    """Every broker group the NameServer lists, with each broker's HA state."""
    view = await admin.cluster_info()
    groups: list[GroupHA] = []
    for name, data in sorted(view.brokers.items()):
        addrs: dict[int, str] = dict(data.broker_addrs)
        infos: dict[str, dict[str, str] | str] = {}
        for addr in addrs.values():
            try:
                infos[addr] = await admin.broker_runtime_info(addr)
            except ApogeeError as exc:
                infos[addr] = str(exc)
        groups.append(group_view(name, addrs, infos))
    return groups
