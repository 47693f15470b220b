"""``apogee admin update-topic``: create or change a topic (mqadmin's updateTopic).

RocketMQ's quick start creates topics by hand rather than letting the first send create them; this is how,
without the Java tools.  Brokers: ``-b ADDR`` (one), ``-c CLUSTER`` (its masters), or neither
(every master the NameServer knows).  The command returns once the NameServer serves the
topic's route, so a consumer or ``apogee run`` started next finds it.
"""

from __future__ import annotations

import asyncio
import time

import click
from rich.console import Console

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import admin_command, admin_group
from apogee.common import constants as c
from apogee.errors import ApogeeError, NoRouteError

ROUTE_WAIT_S = 10.0


async def master_addrs(admin: AdminClient, cluster: str | None) -> dict[str, str]:
    """broker name -> master address, of ``cluster`` (or of every cluster)."""
    brokers, clusters = await admin.cluster_info()
    if cluster is not None and cluster not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise NoRouteError(f"the NameServer knows no cluster {cluster!r} (clusters: {known})")
    names = clusters[cluster] if cluster is not None else [n for ns in clusters.values() for n in ns]
    out = {}
    for name in names:
        addr = getattr(brokers.get(name), "broker_addrs", {}).get(c.MASTER_ID)
        if addr:
            out[name] = addr
    if not out:
        raise NoRouteError("no master broker is registered with the NameServer")
    return out


@admin_group.command("update-topic")
@click.option("--topic", "-t", required=True)
@click.option("--broker-addr", "-b", help="Create on this broker only (host:port).")
@click.option("--cluster", "-c", help="Create on every master of this cluster.")
@click.option(
    "--queue-nums", "-q", default=8, show_default=True, type=click.IntRange(1, 1024), help="Read and write queues."
)
@click.option("--perm", "-p", default=6, show_default=True, type=click.IntRange(0, 7), help="2 write, 4 read, 6 both.")
@click.option("--order", "-o", is_flag=True, help="Mark the topic as ordered.")
@admin_command
async def update_topic(
    admin: AdminClient,
    console: Console,
    topic: str,
    broker_addr: str | None,
    cluster: str | None,
    queue_nums: int,
    perm: int,
    order: bool,
) -> None:
    """Create or update a topic on brokers."""
    if broker_addr and cluster:
        raise click.UsageError("give --broker-addr or --cluster, not both")
    targets = {broker_addr: broker_addr} if broker_addr else await master_addrs(admin, cluster)
    for name, addr in sorted(targets.items()):
        await admin.update_topic(topic, addr, queue_nums, perm, order)
        console.print(f"create topic {topic} on {name} ({addr}): {queue_nums} queues, perm {perm}")
    await wait_for_route(admin, topic)
    console.print(f"topic {topic} is served by the NameServer")


async def wait_for_route(admin: AdminClient, topic: str, timeout_s: float = ROUTE_WAIT_S) -> None:
    """Return once the NameServer serves ``topic``: a broker registers a new topic a moment later."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await admin.route(topic)
            return
        except ApogeeError:
            if time.monotonic() > deadline:
                raise NoRouteError(f"the NameServer does not serve {topic!r} after {timeout_s:.0f} s") from None
            await asyncio.sleep(0.1)
