"""``apogee demo``: the main job behind ``make demo``.

1. starts an embedded NameServer + Broker (``apogee dev`` in a child process, stopped by PID
   at the end);
2. starts a local Spark session (local[2]) with the ``apogee`` connector;
3. starts a Structured Streaming pipeline that reads the order events through the connector
   and writes
   * per-minute counts and revenue by status (event time) to Parquet, and
   * the cleaned event stream (valid events, normalised JSON) to a second topic, exactly once;
4. produces a realistic stream of order events while the pipeline runs: create / pay /
   complete per order id, in order per order (one queue per order id), tags = status,
   keys = order id, a few malformed events among them; a progress bar meanwhile;
5. waits until the pipeline has processed everything, prints a summary table and where the
   output is, and stops Spark and the servers: nothing is left running.
"""

from __future__ import annotations

import importlib.util
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from apogee.cli.status import ExitStatus

TOPIC = "OrderEvents"
CLEAN_TOPIC = "OrderEventsClean"
QUEUES = 4
STATUSES = ("CREATED", "PAID", "COMPLETED")
GROUP = "demo-pipeline"
READY = re.compile(r"ready on (\S+) broker (\S+)")


class DemoError(Exception):
    """A failure the demo explains in one line."""


@dataclass
class DevServer:
    """``apogee dev`` (NameServer + Broker in one process) as a child process."""

    proc: subprocess.Popen[bytes]
    namesrv: str
    broker: str

    @classmethod
    def start(cls, root: Path, timeout_s: float = 30) -> DevServer:
        log = open(root / "apogee-dev.log", "wb")  # noqa: SIM115 - the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "apogee",
                "dev",
                "--dir",
                str(root / "store"),
                "--namesrv-listen",
                "127.0.0.1:0",
                "--broker-listen",
                "127.0.0.1:0",
                "--dashboard-listen",
                "",
                "--log-level",
                "WARNING",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            match = READY.search(line.decode(errors="replace"))
            if match:
                return cls(proc, match.group(1), match.group(2))
        cls(proc, "", "").stop()
        raise DemoError(
            f"apogee dev did not start: {line.decode(errors='replace').strip()} (see {root}/apogee-dev.log)"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --- the events ---------------------------------------------------------------------------------


def order_events(orders: int, seed: int = 42, start_ms: int | None = None) -> list[tuple[int, dict[str, Any] | bytes]]:
    """``(event time ms, event)`` in event-time order: every order is created, most are paid a
    little later and most paid orders completed later still; about 1 % of the events are
    malformed (bad JSON, a negative amount, an unknown status), as real feeds have."""
    rng = random.Random(seed)
    start = start_ms if start_ms is not None else int(time.time() * 1000) - 20 * 60_000
    span = max(60_000, min(15 * 60_000, orders * 600))
    events: list[tuple[int, dict[str, Any] | bytes]] = []
    for n in range(orders):
        order_id = f"order-{n:06d}"
        customer = f"customer-{rng.randrange(max(1, orders // 3)):05d}"
        amount = rng.randrange(500, 25_000)
        items = rng.randrange(1, 6)
        t = start + rng.randrange(span)
        timeline = [("CREATED", t)]
        if rng.random() < 0.92:
            t += rng.randrange(5_000, 120_000)
            timeline.append(("PAID", t))
            if rng.random() < 0.9:
                t += rng.randrange(30_000, 240_000)
                timeline.append(("COMPLETED", t))
        for status, when in timeline:
            event: dict[str, Any] | bytes = {
                "order_id": order_id,
                "customer": customer,
                "status": status,
                "amount_cents": amount,
                "items": items,
                "event_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when / 1000)) + f".{when % 1000:03d}Z",
            }
            roll = rng.random()
            if roll < 0.004:
                event = b"{not json"
            elif roll < 0.008:
                event = {**event, "amount_cents": -amount}  # type: ignore[dict-item]
            elif roll < 0.012:
                event = {**event, "status": "UNKNOWN"}  # type: ignore[dict-item]
            events.append((when, event))
    events.sort(key=lambda e: e[0])
    return events


def produce(console: Console, namesrv: str, events: list[tuple[int, dict[str, Any] | bytes]], rate: int) -> float:
    """Send the events (ordered per order id: one queue per order) at about ``rate`` events
    per second, with a progress bar."""
    from apogee.client import Message, SelectByHash
    from apogee.client.sync import SyncProducer

    selector = SelectByHash()
    started = time.perf_counter()
    futures = []
    with (
        SyncProducer("demo-producer", namesrv) as producer,
        Progress(
            TextColumn("[bold]producing order events"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress,
    ):
        task = progress.add_task("produce", total=len(events))
        for i, (_, event) in enumerate(events):
            if isinstance(event, dict):
                body = orjson.dumps(event)
                order_id, status = str(event["order_id"]), str(event["status"])
            else:
                body, order_id, status = event, f"bad-{i}", "MALFORMED"
            msg = Message(TOPIC, body)
            msg.tags = status
            msg.keys = order_id
            futures.append(producer.send_async(msg, selector=selector, arg=order_id))
            if i % 50 == 49:
                progress.update(task, completed=i + 1)
                ahead = (i + 1) / rate - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)  # a stream, not one burst
        for fut in futures:
            fut.result(60)
        progress.update(task, completed=len(events))
    return time.perf_counter() - started


# --- the pipeline ---------------------------------------------------------------------------------


def wait_readable(namesrv: str, broker: str, timeout_s: float = 30) -> None:
    """Wait until the broker has dispatched everything it acknowledged (its runtime info's
    ``dispatchBehindBytes`` is 0).  A send is answered once it is in the CommitLog and becomes
    readable just after, as in RocketMQ: a read that must see every message acknowledged so far
    (the pipeline's last pass, the summary's count) waits for this first."""
    import asyncio

    from apogee.admin.client import AdminClient
    from apogee.spark import runtime

    async def caught_up() -> None:
        async with AdminClient(namesrv) as admin:
            while (await admin.broker_runtime_info(broker)).get("dispatchBehindBytes") != "0":
                await asyncio.sleep(0.01)

    try:
        runtime.run(caught_up(), timeout_s)  # cancelled when it times out
    except TimeoutError as exc:
        raise DemoError(f"the broker did not make the acknowledged messages readable within {timeout_s:.0f} s") from exc


def create_topics(namesrv: str, broker: str) -> None:
    from apogee.spark import runtime

    api = runtime.runtime().api
    for topic in (TOPIC, CLEAN_TOPIC):
        runtime.run(api.create_topic(broker, topic, QUEUES), 10)
    from apogee.spark.broker import Cluster

    cluster = Cluster(api, namesrv)
    deadline = time.monotonic() + 15
    while True:
        try:
            if len(runtime.run(cluster.queues([TOPIC, CLEAN_TOPIC]), 10)) == 2 * QUEUES:
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise DemoError("the broker did not register the demo topics with the NameServer")
        time.sleep(0.1)


def summary(
    console: Console, spark: Any, namesrv: str, out: Path, sent: int, queries: list[Any], elapsed: dict[str, float]
) -> bool:
    from apogee.spark.pipeline import summarize

    result = summarize(spark, namesrv, out, CLEAN_TOPIC, queries[0])
    console.print(
        f"[bold]{TOPIC}[/]: {sent} events sent, {result.read_back} read back through Spark "
        f"({result.read_back - result.valid} rejected as malformed), {result.clean_count} cleaned events "
        f"written to {CLEAN_TOPIC}"
    )
    table = Table(title="Events by status")
    table.add_column("status")
    table.add_column("events", justify="right")
    table.add_column("revenue", justify="right")
    for status in STATUSES:
        events, revenue = result.by_status.get(status, (0, 0.0))
        table.add_row(status, f"{events:,}", f"{revenue:,.2f}")
    table.add_row("[bold]total", f"[bold]{result.valid:,}", "")
    console.print(table)
    span = f", {result.first_minute:%H:%M} to {result.last_minute:%H:%M} UTC" if result.first_minute else ""
    console.print(
        f"Per-minute counts and revenue by status: [bold]{out / 'minute_stats'}[/] "
        f"(Parquet, {result.minutes} minutes{span})"
    )
    console.print(f"Cleaned events: topic [bold]{CLEAN_TOPIC}[/] (JSON bodies, keys = order id, tags = status)")
    console.print(
        f"Spark start {elapsed['spark']:.1f} s, producing {elapsed['produce']:.1f} s, "
        f"pipeline caught up {elapsed['drain']:.1f} s after the last event"
    )
    return result.read_back == sent and result.clean_count == result.valid


def run_demo(console: Console, workdir: Path, out: Path, orders: int, rate: int) -> int:
    from apogee.spark import check_java, local_session

    check_java()
    started = time.perf_counter()
    server = DevServer.start(workdir)
    spark = None
    try:
        console.print(
            f"[bold]NameServer[/] {server.namesrv}   [bold]Broker[/] {server.broker}   store {workdir / 'store'}"
        )
        create_topics(server.namesrv, server.broker)
        with console.status("starting Spark (local[2]) ..."):
            t = time.perf_counter()
            spark = local_session(
                "apogee-demo",
                memory="1g",
                log_file=str(workdir / "spark.log"),
                **{"spark.sql.streaming.numRecentProgressUpdates": "10000"},
            )
            elapsed = {"spark": time.perf_counter() - t}
        console.print(f"Spark {spark.version} ready in {elapsed['spark']:.1f} s (log {workdir / 'spark.log'})")
        from apogee.spark.pipeline import start_order_pipeline

        queries = start_order_pipeline(
            spark, server.namesrv, TOPIC, CLEAN_TOPIC, out, workdir / "checkpoints", group=GROUP
        )
        events = order_events(orders)
        elapsed["produce"] = produce(console, server.namesrv, events, rate)
        t = time.perf_counter()
        with console.status("waiting for the pipeline to process every event ..."):
            wait_readable(server.namesrv, server.broker)
            for query in queries:
                query.processAllAvailable()
            for query in queries:
                query.stop()
        elapsed["drain"] = time.perf_counter() - t
        for query in queries:
            if query.exception() is not None:
                raise DemoError(str(query.exception()))
        wait_readable(server.namesrv, server.broker)  # the cleaned events the sink wrote, counted next
        ok = summary(console, spark, server.namesrv, out, len(events), queries, elapsed)
        console.print(f"Finished in {time.perf_counter() - started:.0f} s; Spark and the servers are stopped.")
        return ExitStatus.SUCCESS if ok else ExitStatus.ERROR
    except (DemoError, KeyboardInterrupt):
        raise
    except Exception as exc:  # Spark's errors print only while the JVM lives: one line now
        from apogee.spark.errors import one_line

        raise DemoError(f"{one_line(exc)} (logs in {workdir})") from exc
    finally:
        if spark is not None:
            from apogee.spark.pipeline import stop_spark

            stop_spark(spark)
        server.stop()


@click.command("demo")
@click.option("--orders", default=2000, show_default=True, help="How many orders to simulate (3 events each at most).")
@click.option("--rate", default=500, show_default=True, help="Events produced per second.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Where the Parquet output goes (default: a new temp directory).",
)
@click.option("--keep", is_flag=True, help="Keep the broker store, checkpoints and logs after the demo.")
@click.option("--log-level", default="WARNING", show_default=True)
def demo_command(orders: int, rate: int, out_dir: str | None, keep: bool, log_level: str) -> None:
    """Order events through Apogee and a Spark Structured Streaming pipeline, then stop.

    Starts an embedded NameServer + Broker, runs the pipeline on local Spark while producing
    order events, prints a summary and where the output is.  Needs Java 17+ and pyspark
    (pip install 'apogee[spark]').
    """
    from apogee.cli.serve import setup_logging
    from apogee.spark.errors import ApogeeSparkError, one_line

    setup_logging(log_level)
    console = Console(soft_wrap=True)
    workdir = Path(tempfile.mkdtemp(prefix="apogee-demo-"))
    out = Path(out_dir).resolve() if out_dir else workdir / "output"
    out.mkdir(parents=True, exist_ok=True)
    status: int = ExitStatus.ERROR
    try:
        if importlib.util.find_spec("pyspark") is None:
            raise DemoError("the demo needs PySpark: pip install 'apogee[spark]' (make demo does it)")
        status = run_demo(console, workdir, out, orders, rate)
    except (DemoError, ApogeeSparkError) as exc:
        message = one_line(exc) if isinstance(exc, ApogeeSparkError) else str(exc)
        console.print(f"[red]apogee demo:[/] {message.removeprefix('apogee: ')}", soft_wrap=True)
        status = ExitStatus.UNAVAILABLE
        keep = keep or "logs in" in str(exc)
    except KeyboardInterrupt:
        status = ExitStatus.CTRL_C
    except Exception as exc:  # Spark's own errors: one line here, the rest in the log
        console.print(f"[red]apogee demo failed:[/] {one_line(exc)} (logs in {workdir})", soft_wrap=True)
        keep = True
    finally:
        if not keep:  # the store, checkpoints and logs go; the output stays (unless empty)
            for child in workdir.iterdir():
                if child != out:
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
            if out.parent != workdir or not any(out.iterdir()):
                shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(int(status))
