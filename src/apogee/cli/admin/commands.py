"""The ``apogee admin`` subcommands, with mqadmin's names (kebab-case) and short flags.

Each command prints a table or a message and exits 0, or prints one line on stderr and exits
non-zero (``--debug`` shows the traceback).
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from apogee.admin.client import AdminClient, FoundMessage
from apogee.cli.status import ExitStatus
from apogee.errors import ApogeeError
from apogee.remoting.loop import run

BODY_PREVIEW = 200


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from ms, ISO 8601, or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S"):
        try:
            return int(dt.datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            pass
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a timestamp (ms since epoch, ISO 8601, or yyyy-MM-dd#HH:mm:ss:SSS)"
        ) from None


def _fmt_ms(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds") if ms > 0 else "-"


def admin_command(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async command body with an AdminClient; errors become one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(namesrv: str, debug: bool, **kwargs: Any) -> None:
        console = Console()

        async def body() -> None:
            async with AdminClient(namesrv) as admin:
                await fn(admin, console, **kwargs)

        try:
            run(body())
        except ApogeeError as exc:
            if debug:
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(ExitStatus.ERROR)

    wrapper = click.option("--debug", is_flag=True, help="Show tracebacks.")(wrapper)
    wrapper = click.option("--namesrv", "-n", required=True, metavar="ADDRS", help="NameServer addresses.")(wrapper)
    return wrapper


def print_messages(console: Console, found: list[FoundMessage]) -> None:
    if not found:
        console.print("no message found")
        return
    for item in found:
        m = item.message
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column()
        rows = [
            ("Topic", m.topic),
            ("Tags", m.tags or ""),
            ("Keys", " ".join(m.keys)),
            ("Msg id", m.msg_id),
            ("Offset msg id", m.offset_msg_id),
            ("Queue", f"{item.broker_name or m.store_host[0]} / {m.queue_id} @ {m.queue_offset}"),
            ("CommitLog offset", str(m.commit_log_offset)),
            ("Born", f"{_fmt_ms(m.born_timestamp)} from {m.born_host[0]}:{m.born_host[1]}"),
            ("Stored", f"{_fmt_ms(m.store_timestamp)} on {m.store_host[0]}:{m.store_host[1]}"),
            ("Reconsume times", str(m.reconsume_times)),
            ("Properties", ", ".join(f"{k}={v}" for k, v in sorted(m.properties.items()))),
        ]
        body = m.body[:BODY_PREVIEW]
        try:
            preview = body.decode("utf-8")
        except UnicodeDecodeError:
            preview = body.hex()
        rows.append(("Body", f"{preview}{'…' if len(m.body) > BODY_PREVIEW else ''} ({len(m.body)} bytes)"))
        for k, v in rows:
            table.add_row(k, v)
        console.print(table)
        console.print()


@click.group("admin")
def admin_group() -> None:
    """Administer a cluster: messages, offsets, topics (mqadmin's commands)."""


@admin_group.command("query-msg-by-id")
@click.option("--msg-id", "-i", required=True, help="Offset message id, or a unique id (UNIQ_KEY) with -t.")
@click.option("--topic", "-t", help="Topic to search for a unique id.")
@admin_command
async def query_msg_by_id(admin: AdminClient, console: Console, msg_id: str, topic: str | None) -> None:
    """Show a message by its id."""
    print_messages(console, await admin.query_by_id(msg_id, topic))


@admin_group.command("query-msg-by-key")
@click.option("--topic", "-t", required=True)
@click.option("--key", "-k", "key", required=True)
@click.option(
    "--begin", "-b", "begin", default="0", help="Stored at or after (ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS)."
)
@click.option("--end", "-e", "end", default=str(2**62), help="Stored at or before.")
@click.option("--max", "max_num", default=32, show_default=True)
@admin_command
async def query_msg_by_key(
    admin: AdminClient, console: Console, topic: str, key: str, begin: str, end: str, max_num: int
) -> None:
    """Show the messages with a key, newest first."""
    found = await admin.query_by_key(
        topic, key, begin_ms=parse_timestamp(begin), end_ms=parse_timestamp(end), max_num=max_num
    )
    print_messages(console, found)


@admin_group.command("query-msg-by-offset")
@click.option("--topic", "-t", required=True)
@click.option("--broker-name", "-b", required=True)
@click.option("--queue-id", "-i", type=int, required=True)
@click.option("--offset", "-o", type=int, required=True)
@admin_command
async def query_msg_by_offset(
    admin: AdminClient, console: Console, topic: str, broker_name: str, queue_id: int, offset: int
) -> None:
    """Show the message at a queue offset."""
    msg = await admin.message_at(topic, broker_name, queue_id, offset)
    print_messages(console, [FoundMessage(msg, broker_name)] if msg else [])


@admin_group.command("reset-offset-by-time")
@click.option("--group", "-g", required=True)
@click.option("--topic", "-t", required=True)
@click.option("--timestamp", "-s", required=True, help="ms, ISO 8601, yyyy-MM-dd#HH:mm:ss:SSS, or 'now' for the end.")
@click.option("--force/--no-force", "-f", default=True, show_default=True, help="Also move offsets forward.")
@admin_command
async def reset_offset_by_time(
    admin: AdminClient, console: Console, group: str, topic: str, timestamp: str, force: bool
) -> None:
    """Rewind (or forward) a consumer group to a time; live consumers resume there at once."""
    ts = -1 if timestamp == "now" else parse_timestamp(timestamp)
    offsets = await admin.reset_offset_by_time(group, topic, ts, force=force)
    table = Table("broker", "queue", "new offset")
    for mq, offset in sorted(offsets.items()):
        table.add_row(mq.broker_name, str(mq.queue_id), str(offset))
    console.print(table)


@admin_group.command("consumer-progress")
@click.option("--group", "-g", required=True)
@click.option("--topic", "-t", required=True)
@admin_command
async def consumer_progress(admin: AdminClient, console: Console, group: str, topic: str) -> None:
    """Broker offset, committed offset and lag of each queue."""
    rows = await admin.consumer_progress(group, topic)
    table = Table("broker", "queue", "broker offset", "consumer offset", "lag")
    for r in rows:
        table.add_row(
            r.queue.broker_name, str(r.queue.queue_id), str(r.broker_offset), str(r.consumer_offset), str(r.lag)
        )
    console.print(table)
    console.print(f"total lag: {sum(r.lag for r in rows)}")


@admin_group.command("topic-list")
@admin_command
async def topic_list(admin: AdminClient, console: Console) -> None:
    """Every topic the NameServer knows."""
    for topic in await admin.topic_list():
        console.print(topic)


@admin_group.command("topic-route")
@click.option("--topic", "-t", required=True)
@admin_command
async def topic_route(admin: AdminClient, console: Console, topic: str) -> None:
    """Brokers and queues of a topic."""
    route = await admin.route(topic)
    table = Table("broker", "addresses", "read queues", "write queues", "perm")
    addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
    for q in route.queue_datas:
        table.add_row(q.broker_name, ", ".join(f"{k}:{v}" for k, v in sorted(addrs.get(q.broker_name, {}).items())),
                      str(q.read_queue_nums), str(q.write_queue_nums), str(q.perm))
    console.print(table)


@admin_group.command("cluster-list")
@admin_command
async def cluster_list(admin: AdminClient, console: Console) -> None:
    """Clusters and their brokers."""
    brokers, clusters = await admin.cluster_info()
    table = Table("cluster", "broker", "addresses")
    for cluster, names in sorted(clusters.items()):
        for name in names:
            data = brokers.get(name)
            addrs = getattr(data, "broker_addrs", {})
            table.add_row(cluster, name, ", ".join(f"{k}:{v}" for k, v in sorted(addrs.items())))
    console.print(table)
