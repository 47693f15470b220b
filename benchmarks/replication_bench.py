"""Master/slave replication on loopback (issue 19): what a slave costs the sends, how far
behind it runs, how fast it catches up.  Not a test.

Starts `apogee namesrv`, a master and (per workload) one slave as separate processes on
free loopback ports, 1 KiB bodies, each figure the median of --runs runs, with the CPU
seconds of each broker process, beside the single-broker (no slave) figures of the same run:

* sync sends one at a time (rate, p50/p99): single broker, ASYNC_MASTER + slave,
  SYNC_MASTER + slave (target: >= 70 % of ASYNC_MASTER's rate, p99 <= 1.5 ms);
* pipelined sends (--inflight in flight): the same three (target: SYNC >= 70 % of ASYNC);
  single SEND_MESSAGE_V2 frames, as the Java, C++ and Go clients send them;
* batched sends: Apogee's own client at its best pipelined rate (``Producer.send_async`` with
  auto-batching, up to 512 messages / 1 MiB per SEND_BATCH_MESSAGE, every result checked):
  the same three;
* replication lag under the pipelined ASYNC_MASTER load: for every 50th send, the time from
  its answer until the slave's CommitLog holds it (polled every 2 ms; target p99 <= 100 ms);
* catch-up: a slave started behind a --backlog-mb backlog, MB/s until it holds it all
  (target >= 150 MB/s).

With several --src trees (e.g. a worktree of an older commit) every configuration runs from
each in turn, interleaved in an order rotated every run, and the table is printed per tree;
--configs picks configurations (single, async, sync) and --backlog-mb 0 skips the catch-up.

Run: .venv/bin/python benchmarks/replication_bench.py [--runs 3] [--sync-messages 3000]
     [--messages 30000] [--inflight 64] [--batched-messages 100000] [--backlog-mb 200]
     [--configs single,async,sync] [--src ../old/src --src src]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.client import Message, Producer, SendStatus  # noqa: E402
from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from apogee.remoting.command import RemotingCommand  # noqa: E402
from apogee.remoting.config import RemotingConfig  # noqa: E402
from apogee.remoting.headers.consumer import TopicQueueRequestHeader  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from benchmarks.broker_bench import BODY, cpu_seconds, pct, pipelined_sends, sync_sends  # noqa: E402
from benchmarks.broker_cpu_bench import label  # noqa: E402
from benchmarks.figures import save_table  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

T = 10_000


# busyPollUs of every broker and of the benchmark's client (--busy-poll-us; 0: off).
BUSY_POLL_US = 0


def bench_client() -> RemotingClient:
    return RemotingClient(RemotingConfig(busy_poll_us=BUSY_POLL_US))


def start(namesrv: str, store: Path, conf: str, src: str | None = None) -> ServerProcess:
    """A broker on a fresh ``store``; from the source tree ``src`` when given."""
    store.parent.mkdir(parents=True, exist_ok=True)
    path = store.parent / f"{store.name}.conf"
    polling = f"busyPollUs={BUSY_POLL_US}\n" if BUSY_POLL_US else ""  # a tree before it knows no such key
    path.write_text("brokerName=bench-ha\n" + polling + conf)
    return ServerProcess(
        ["broker", "-n", namesrv, "-c", str(path), "--listen", "127.0.0.1:0", "--store-dir", str(store),
         "--broker-ip", "127.0.0.1", "--log-level", "WARNING"],
        env={"PYTHONPATH": src} if src else None,
    ).start()


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), T)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    table: dict[str, str] = orjson.loads(resp.body_bytes())["table"]
    return table


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.01) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        await asyncio.sleep(interval_s)


class Group:
    """A master (``role``) and, unless ``slave`` is False, one slave, on fresh stores."""

    def __init__(self, namesrv: str, root: Path, role: str | None, slave: bool = True, src: str | None = None) -> None:
        self.root = root
        self.src = src
        self.master = start(namesrv, root / "master", f"brokerRole={role}\n" if role else "", src)
        self.slave: ServerProcess | None = None
        if slave:
            self.slave = start(namesrv, root / "slave", "brokerRole=SLAVE\nbrokerId=1\n", src)

    async def linked(self, client: RemotingClient) -> None:
        if self.slave is None:
            return

        async def one() -> bool:
            return (await runtime(client, self.master.addr)).get("haConnectionCount") == "1"

        await until(one, 30)

    def cpu(self) -> tuple[float, float]:
        return cpu_seconds(self.master.pid), cpu_seconds(self.slave.pid) if self.slave else 0.0

    def close(self) -> None:
        if self.slave is not None:
            self.slave.close()
        self.master.close()


async def measured(group: Group, body: Callable[[], Awaitable[Any]]) -> tuple[Any, float, float]:
    m0, s0 = group.cpu()
    began = time.perf_counter()
    result = await body()
    wall = time.perf_counter() - began
    m1, s1 = group.cpu()
    return result, (m1 - m0) / wall, (s1 - s0) / wall


async def send_workloads(
    namesrv: str, root: Path, role: str | None, slave: bool, args: argparse.Namespace, src: str | None
) -> dict[str, Any]:
    group = Group(namesrv, root, role, slave, src)
    client = bench_client()
    try:
        await group.linked(client)
        topic = f"Bench{int(time.time() * 1000)}"
        await sync_sends(client, group.master.addr, topic, 200)  # warm: topic created, routes, caches
        (rate, lat), m_cpu, s_cpu = await measured(
            group, lambda: sync_sends(client, group.master.addr, topic, args.sync_messages)
        )
        out: dict[str, Any] = {"sync_rate": rate, "sync_p50_ms": pct(lat, 0.5), "sync_p99_ms": pct(lat, 0.99),
                               "sync_cpu": (m_cpu, s_cpu)}
        lag = LagProbe(client, group, topic) if slave else None
        if lag is not None:
            lag.start()
        prate, m_cpu, s_cpu = await measured(
            group, lambda: pipelined_sends(client, group.master.addr, topic, args.messages, args.inflight)
        )
        out.update(pipe_rate=prate, pipe_cpu=(m_cpu, s_cpu))
        if lag is not None:
            out["lag_p99_ms"], out["lag_p50_ms"] = await lag.stop()
        brate, m_cpu, s_cpu = await measured(group, lambda: batched_sends(namesrv, topic, args.batched_messages))
        out.update(batch_rate=brate, batch_cpu=(m_cpu, s_cpu))
        return out
    finally:
        await client.close()
        group.close()


async def batched_sends(namesrv: str, topic: str, n: int) -> float:
    """Apogee's producer at its best pipelined rate: ``send_async`` with auto-batching, the
    results outstanding up to its ``max_inflight_messages``; every result must be SEND_OK."""
    remoting = RemotingConfig(busy_poll_us=BUSY_POLL_US)
    async with Producer("bench-batched", namesrv, client_ip="127.0.0.1", remoting=remoting) as producer:
        await producer.send(Message(topic, BODY))  # the route and the connection, before the clock
        start = time.perf_counter()
        futures = [await producer.send_async(Message(topic, BODY)) for _ in range(n)]
        await producer.flush()
        rate = n / (time.perf_counter() - start)
    statuses = collections.Counter(f.result().status for f in futures)
    if statuses[SendStatus.SEND_OK] != n:
        raise RuntimeError(f"batched sends not all SEND_OK: {dict(statuses)}")
    return rate


async def queue_max(client: RemotingClient, addr: str, topic: str) -> int:
    header = TopicQueueRequestHeader(topic, 0).encode()
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header), T)
    return int(resp.ext_fields["offset"])


class LagProbe:
    """Replication lag: queue 0's max offset on the master sampled every 2 ms (a small
    request: the probe must not load the brokers); the lag of a sample is how long until the
    slave's queue 0 reaches it (replicated and dispatched: a consumer could read it there)."""

    def __init__(self, client: RemotingClient, group: Group, topic: str) -> None:
        self._client = client
        self._group = group
        self._topic = topic
        self._task: asyncio.Task[list[float]] | None = None
        self._stop = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> list[float]:
        assert self._group.slave is not None
        master, slave = self._group.master.addr, self._group.slave.addr
        pending: collections.deque[tuple[float, int]] = collections.deque()
        lags: list[float] = []
        while not self._stop or pending:
            if not self._stop:
                pending.append((time.perf_counter(), await queue_max(self._client, master, self._topic)))
            held = await queue_max(self._client, slave, self._topic)
            seen = time.perf_counter()
            while pending and pending[0][1] <= held:
                lags.append(seen - pending.popleft()[0])
            await asyncio.sleep(0.002)
        return lags

    async def stop(self) -> tuple[float, float]:
        self._stop = True
        assert self._task is not None
        lags = await self._task
        return pct(lags, 0.99), pct(lags, 0.5)


async def catch_up(namesrv: str, root: Path, args: argparse.Namespace, src: str | None) -> dict[str, Any]:
    group = Group(namesrv, root, None, slave=False, src=src)
    client = bench_client()
    try:
        topic = f"Backlog{int(time.time() * 1000)}"
        n = args.backlog_mb * 1024 * 1024 // 1200
        await pipelined_sends(client, group.master.addr, topic, n, args.inflight)
        target = int((await runtime(client, group.master.addr))["commitLogMaxOffset"])
        group.slave = start(namesrv, root / "slave", "brokerRole=SLAVE\nbrokerId=1\n", src)
        # From the slave's ready line (its HA client starts then): process start-up excluded.
        m0, s0 = group.cpu()
        began = time.perf_counter()
        slave = group.slave

        async def held() -> bool:
            return int((await runtime(client, slave.addr))["commitLogMaxOffset"]) >= target

        await until(held, 300, 0.005)
        wall = time.perf_counter() - began
        return {"catchup_mb_s": target / wall / 1e6, "catchup_cpu": ((cpu_seconds(group.master.pid) - m0) / wall,
                                                                    (cpu_seconds(slave.pid) - s0) / wall)}
    finally:
        await client.close()
        group.close()


def med(runs: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in runs]
    if isinstance(values[0], tuple):
        return tuple(statistics.median(v[i] for v in values) for i in range(len(values[0])))
    return statistics.median(values)


CONFIGS = {"single": ("single broker", None, False), "async": ("ASYNC_MASTER+slave", "ASYNC_MASTER", True),
           "sync": ("SYNC_MASTER+slave", "SYNC_MASTER", True)}


async def bench(namesrv: str, root: Path, args: argparse.Namespace) -> None:
    srcs: list[str | None] = [str(Path(s).resolve()) for s in args.src] if args.src else [None]
    chosen = [CONFIGS[c] for c in args.configs.split(",") if c]
    results: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    catchups: dict[str | None, list[dict[str, Any]]] = {src: [] for src in srcs}
    loads = [os.getloadavg()[0]]
    plan = [(n, src, config) for n, src in enumerate(srcs) for config in chosen]
    for i in range(args.runs):
        # Interleaved, and the order rotated every run: noise, and whatever the first or the
        # last place in a run costs (a warm page cache, a busy neighbour), hits every config
        # and every tree alike instead of always the same one.
        shift = i % len(plan)
        for n, src, (name, role, slave) in plan[shift:] + plan[:shift]:
            results.setdefault((src, name), []).append(
                await send_workloads(namesrv, root / f"{i}-{n}-{name[:5]}", role, slave, args, src))
        trees = list(enumerate(srcs))
        for n, src in trees[i % len(trees):] + trees[:i % len(trees)]:
            if args.backlog_mb:
                catchups[src].append(await catch_up(namesrv, root / f"{i}-{n}-catchup", args, src))
        loads.append(os.getloadavg()[0])
    polling = f"; busy polling {BUSY_POLL_US} us on brokers and client" if BUSY_POLL_US else ""
    print(f"1 KiB bodies, medians of {args.runs}; cpu = CPU seconds per wall second (master, slave);"
          f" load average (1 min) {min(loads):.2f}..{max(loads):.2f}{polling}")
    for src in srcs:
        if src is not None:
            print(f"source tree {src} ({label(src)})")
        rows, summary = report(src, {name: results[(src, name)] for name, _, _ in chosen}, catchups[src], args)
        if args.record:
            title = "Replication (`benchmarks/replication_bench.py`, 1 KiB bodies" + (
                f", busy polling {BUSY_POLL_US} us)" if BUSY_POLL_US else ")")
            path = save_table(args.record, title=title,
                              columns=COLUMNS, rows=rows, runs=args.runs, loads=loads, notes=summary)
            print(f"recorded {path}")


COLUMNS = ("", "sync/s", "p50 ms", "p99 ms", "cpu master, slave", "pipelined/s", "cpu master, slave",
           "lag p50/p99 ms", "batched/s", "cpu master, slave")


def report(src: str | None, results: dict[str, list[dict[str, Any]]], catchups: list[dict[str, Any]],
           args: argparse.Namespace) -> tuple[list[list[str]], str]:
    """Print the medians of one source tree; return them as table rows and the summary lines
    (what ``--record`` keeps)."""
    rows = []
    for name, runs in results.items():
        sc, pc, bc = med(runs, "sync_cpu"), med(runs, "pipe_cpu"), med(runs, "batch_cpu")
        lag = f"{med(runs, 'lag_p50_ms'):.1f}/{med(runs, 'lag_p99_ms'):.1f}" if "lag_p99_ms" in runs[0] else "-"
        rows.append([name, f"{med(runs, 'sync_rate'):.0f}", f"{med(runs, 'sync_p50_ms'):.3f}",
                     f"{med(runs, 'sync_p99_ms'):.3f}", f"{sc[0]:.2f}, {sc[1]:.2f}", f"{med(runs, 'pipe_rate'):.0f}",
                     f"{pc[0]:.2f}, {pc[1]:.2f}", lag, f"{med(runs, 'batch_rate'):.0f}", f"{bc[0]:.2f}, {bc[1]:.2f}"])
    widths = [22, 8, 7, 7, 17, 12, 17, 15, 10, 17]
    print(" ".join(f"{c:>{w}}" if i else f"{c:{w}}" for i, (c, w) in enumerate(zip(COLUMNS, widths, strict=True))))
    for row in rows:
        print(" ".join(f"{c:>{w}}" if i else f"{c:{w}}" for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    summary = []
    sync, asyn = results.get("SYNC_MASTER+slave"), results.get("ASYNC_MASTER+slave")
    if sync and asyn:
        summary.append(
            f"SYNC_MASTER / ASYNC_MASTER: sync sends {med(sync, 'sync_rate') / med(asyn, 'sync_rate'):.0%}"
            f" (target >= 70 %, p99 {med(sync, 'sync_p99_ms'):.3f} ms, target <= 1.5), pipelined "
            f"{med(sync, 'pipe_rate') / med(asyn, 'pipe_rate'):.0%} (target >= 70 %), batched "
            f"{med(sync, 'batch_rate') / med(asyn, 'batch_rate'):.0%}")
    if catchups:
        cc = med(catchups, "catchup_cpu")
        summary.append(f"catch-up of a {args.backlog_mb} MB backlog: {med(catchups, 'catchup_mb_s'):.0f} MB/s"
                       f" (target >= 150), cpu {cc[0]:.2f}, {cc[1]:.2f}")
    for line in summary:
        print(line)
    return rows, ".\n".join(summary) + ("." if summary else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sync-messages", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--batched-messages", type=int, default=100_000)
    parser.add_argument("--backlog-mb", type=int, default=200, help="0: no catch-up run")
    parser.add_argument("--configs", default="single,async,sync", help="of single, async, sync")
    parser.add_argument("--src", action="append", help="run the brokers from this source tree (repeat to compare)")
    parser.add_argument("--record", metavar="NAME", help="save the medians as benchmarks/results/NAME.json "
                        "(the docs' figures: benchmarks/figures.py); only for the checkout's own tree")
    parser.add_argument("--busy-poll-us", type=int, default=0, metavar="US",
                        help="busyPollUs of every broker and of the client (docs/performance.md, Busy polling)")
    args = parser.parse_args()
    global BUSY_POLL_US
    BUSY_POLL_US = args.busy_poll_us
    if args.record and args.src:
        parser.error("--record keeps the figures of this checkout: run it without --src")
    with tempfile.TemporaryDirectory() as tmp:
        namesrv = start_namesrv(Path(tmp) / "ns")
        try:
            run(bench(namesrv.addr, Path(tmp), args))
        finally:
            namesrv.close()


if __name__ == "__main__":
    main()
