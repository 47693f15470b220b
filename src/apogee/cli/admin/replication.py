"""``apogee admin ha-status``: each broker group's master and slaves, max offsets, lag in
bytes and in time, and connected/diverged state with the reason (docs/replication.md)."""

from __future__ import annotations

from apogee.admin.client import AdminClient
from apogee.admin.replication import replication_status
from apogee.cli.admin.commands import Output, admin_command, admin_group


@admin_group.admin("ha-status", "haStatus")
@admin_command
async def ha_status(admin: AdminClient, out: Output) -> None:
    """Master/slave replication of every broker group the NameServer knows."""
    groups = await replication_status(admin)
    if out.json_mode:
        out.doc["groups"] = [g.to_json() for g in groups]
        return
    for group in groups:
        out.table(
            ["id", "address", "role", "max offset", "lag bytes", "lag ms", "state", "reason"],
            [[b.broker_id, b.addr, b.role, b.max_offset, b.lag_bytes, b.lag_ms, b.state, b.reason]
             for b in group.brokers],
            title=f"broker group {group.broker_name}",
        )
        if group.links:
            out.table(
                ["HA peer", "ack offset", "lag bytes", "lag ms", "state", "reason"],
                [[link.get(k) for k in ("addr", "ackOffset", "lagBytes", "lagMs", "state", "reason")]
                 for link in group.links],
                title=f"{group.broker_name}: the master's HA links",
            )
