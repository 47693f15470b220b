"""``apogee demo``: the main job behind ``make demo``.

Today it starts an embedded NameServer + Broker on free loopback ports, sends a stream of
order events through the RocketMQ wire protocol, reads them back with a pull, prints what
happened, and stops everything.  The Spark pipeline of a later issue grows from here.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from apogee.cli.serve import setup_logging
from apogee.cli.status import ExitStatus
from apogee.common.message_codec import decode_records, properties_to_string
from apogee.remoting.bodies.route import TopicRouteData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, FLAG_SUSPEND, PullMessageRequestHeader
from apogee.remoting.headers.send import SendMessageRequestHeaderV2
from apogee.remoting.loop import run

TOPIC = "OrderEvents"
STATUSES = ("CREATED", "PAID", "COMPLETED")


async def _demo(console: Console, workdir: Path, orders: int) -> int:
    from apogee.dev import DevCluster

    cluster = DevCluster.from_options(workdir, "127.0.0.1:0", "127.0.0.1:0")
    ns, broker = await cluster.start()
    console.print(f"[bold]NameServer[/] {ns}   [bold]Broker[/] {broker}   store {workdir / 'store'}")
    client = RemotingClient()
    try:
        started = time.perf_counter()
        sent = 0
        for order in range(orders):
            for status in STATUSES:
                props = properties_to_string({"TAGS": status, "KEYS": f"order-{order}", "WAIT": "true"})
                header = SendMessageRequestHeaderV2(
                    producer_group="demo-producer", topic=TOPIC, default_topic="TBW102",
                    default_topic_queue_nums=4, queue_id=order % 4, sys_flag=0,
                    born_timestamp=int(time.time() * 1000), flag=0, properties=props,
                )
                body = f'{{"order":{order},"status":"{status}","amount":{(order * 37) % 500 + 1}}}'.encode()
                response = await client.invoke(
                    broker, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.encode(), body), 5000
                )
                if response.code != ResponseCode.SUCCESS:
                    console.print(f"[red]send failed:[/] {response.code} {response.remark}")
                    return ExitStatus.ERROR
                sent += 1
        send_s = time.perf_counter() - started
        route = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5000)
        queues = TopicRouteData.decode(route.body_bytes()).queue_datas[0].read_queue_nums
        counts = {s: 0 for s in STATUSES}
        received = 0
        for queue_id in range(queues):
            offset = 0
            while True:
                pull = PullMessageRequestHeader(
                    consumer_group="demo-consumer", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
                    max_msg_nums=32, sys_flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, commit_offset=0,
                    suspend_timeout_millis=200, sub_version=0, subscription="*",
                )
                response = await client.invoke(broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull.encode()), 5000)
                if response.code != ResponseCode.SUCCESS:
                    break
                for msg in decode_records(response.body_bytes()):
                    counts[msg.tags or ""] = counts.get(msg.tags or "", 0) + 1
                    received += 1
                offset = int((response.ext_fields or {})["nextBeginOffset"])
        console.print(f"{TOPIC}: {sent} events sent in {send_s:.2f} s, {received} read back")
        table = Table()
        table.add_column("status")
        table.add_column("events", justify="right")
        for status, count in counts.items():
            table.add_row(status, str(count))
        console.print(table)
        return ExitStatus.SUCCESS if received == sent else ExitStatus.ERROR
    finally:
        await client.close()
        await cluster.stop()


@click.command("demo")
@click.option("--orders", default=200, show_default=True, help="How many orders to simulate.")
@click.option("--keep", is_flag=True, help="Keep the store directory after the demo.")
@click.option("--log-level", default="WARNING", show_default=True)
def demo_command(orders: int, keep: bool, log_level: str) -> None:
    """Start an embedded NameServer + Broker, send and read back order events, then stop."""
    setup_logging(log_level)
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="apogee-demo-"))
    try:
        status = run(_demo(console, workdir, orders))
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(status)
