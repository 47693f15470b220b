"""``apogee admin broker-status`` and ``topic-status`` (mqadmin's brokerStatus and topicStatus):
what GET_BROKER_RUNTIME_INFO and GET_TOPIC_STATS_INFO answer, as tables."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import _fmt_ms, admin_command, admin_group


@admin_group.command("broker-status")
@click.option("--broker-addr", "-b", required=True, help="The broker (host:port).")
@admin_command
async def broker_status(admin: AdminClient, console: Console, broker_addr: str) -> None:
    """Every runtime figure a broker reports (RocketMQ's keys and Apogee's own)."""
    table = Table("key", "value")
    for key, value in sorted((await admin.broker_runtime_info(broker_addr)).items()):
        table.add_row(key, value)
    console.print(table)


@admin_group.command("topic-status")
@click.option("--topic", "-t", required=True)
@admin_command
async def topic_status(admin: AdminClient, console: Console, topic: str) -> None:
    """Min and max offset and last update time of each queue of a topic."""
    table = Table("broker", "queue", "min offset", "max offset", "last updated")
    for queue, offsets in sorted(
        (await admin.topic_stats(topic)).items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id)
    ):
        table.add_row(queue.broker_name, str(queue.queue_id), str(offsets.min_offset), str(offsets.max_offset),
                      _fmt_ms(offsets.last_update_timestamp))
    console.print(table)
