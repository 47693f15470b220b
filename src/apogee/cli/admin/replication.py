"""``apogee admin ha-status``: each broker group's master and slaves, max offsets, lag in
bytes and in time, and connected/diverged state with the reason (docs/replication.md)."""

from __future__ import annotations

import click
import orjson
from rich.console import Console
from rich.table import Table

from apogee.admin.client import AdminClient
from apogee.admin.replication import replication_status
from apogee.cli.admin.commands import admin_command, admin_group


@admin_group.command("ha-status")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of the groups instead of tables.")
@admin_command
async def ha_status(admin: AdminClient, console: Console, as_json: bool) -> None:
    """Master/slave replication of every broker group the NameServer knows."""
    groups = await replication_status(admin)
    if as_json:
        click.echo(orjson.dumps([g.to_json() for g in groups]).decode())
        return
    for group in groups:
        table = Table("id", "address", "role", "max offset", "lag bytes", "lag ms", "state", "reason",
                      title=f"broker group {group.broker_name}")
        for b in group.brokers:
            table.add_row(str(b.broker_id), b.addr, b.role, str(b.max_offset), str(b.lag_bytes), str(b.lag_ms),
                          b.state, b.reason)
        console.print(table)
        if group.links:
            links = Table("HA peer", "ack offset", "lag bytes", "lag ms", "state", "reason",
                          title=f"{group.broker_name}: the master's HA links")
            for link in group.links:
                links.add_row(str(link.get("addr")), str(link.get("ackOffset")), str(link.get("lagBytes")),
                              str(link.get("lagMs")), str(link.get("state")), str(link.get("reason")))
            console.print(links)
