"""What the broker's statistics and its /metrics endpoint cost (issue 20 items 3 and 5).

Two brokers (each with its own NameServer, on loopback) run side by side, identical but for
one setting, and W1 and W2 of client_bench.py (same functions) run against them alternately,
the order flipped every round, so machine noise falls on both; the medians are compared.

  stats    brokerStatsEnable=true vs false (RocketMQ's statistics on and off)
  scrape   the same broker with /metrics scraped every second during the run vs not scraped
  cost     one broker holding --topics topics x 8 queues and --groups groups with offsets on
           --topics-per-group topics each: what a scrape costs (HTTP round trip, and the loop's share as the
           broker reports it in apogee_metrics_snapshot_seconds), and W1's p99 and max send
           latency with a scrape every second vs none (a scrape that stalled the loop would
           show in the max)

Run:  .venv/bin/python benchmarks/stats_overhead.py [--mode stats,scrape,cost] [--runs 5]
          [--sync-messages 20000] [--messages 200000] [--topics 1000] [--groups 50] [--topics-per-group 20]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_bench import BROKER_CONF, produce_async, w1  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from apogee.admin.client import AdminClient  # noqa: E402
from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codes import RequestCode  # noqa: E402
from apogee.remoting.command import RemotingCommand  # noqa: E402
from apogee.remoting.headers.consumer import UpdateConsumerOffsetRequestHeader  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

METRICS_URL = re.compile(r"metrics (http://\S+/metrics)")


@contextmanager
def cluster(tmp: Path, name: str, conf: str) -> Iterator[tuple[ServerProcess, ServerProcess, str | None]]:
    """A NameServer and a broker (``conf`` added to client_bench's broker.conf), /metrics on a
    free loopback port; yields (namesrv, broker, metrics URL)."""
    (tmp / f"{name}.conf").write_text(BROKER_CONF + conf + "metricsListen=127.0.0.1:0\n")
    namesrv = start_namesrv(tmp / f"{name}-ns")
    broker = ServerProcess([
        "broker", "-n", namesrv.addr, "-c", str(tmp / f"{name}.conf"), "--listen", "127.0.0.1:0",
        "--store-dir", str(tmp / f"{name}-store"), "--broker-ip", "127.0.0.1", "--log-level", "WARNING",
    ]).start()
    match = METRICS_URL.search(broker.ready_line)
    try:
        yield namesrv, broker, match.group(1) if match else None
    finally:
        broker.close()
        namesrv.close()


def scrape(url: str) -> tuple[float, float, float, int]:
    """One scrape: round trip, the broker's snapshot loop time and longest step (ms), samples."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    rtt = (time.perf_counter() - t0) * 1000
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return (rtt, values["apogee_metrics_snapshot_seconds"] * 1000,
            values["apogee_metrics_snapshot_max_step_seconds"] * 1000, samples)


class Scraper:
    """Scrapes ``url`` every second from a thread of its own (as Prometheus would) while active."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.samples: list[tuple[float, float, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Scraper:
        if self.url is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        assert self.url is not None
        while not self._stop.wait(1.0):
            self.samples.append(scrape(self.url))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


async def alternate(
    label: str, variants: dict[str, Callable[[int], Awaitable[tuple[float, dict[str, float]]]]], runs: int
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """Each variant once per round, the order reversed every other round."""
    results: dict[str, list[tuple[float, dict[str, float]]]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(runs):
        for name in names if r % 2 == 0 else reversed(names):
            out = await variants[name](r)
            results[name].append(out)
            print(f"  {label} {name} run {r + 1}: {out[0]:,.0f} msgs/s {out[1] or ''}", flush=True)
    return results


def report(label: str, results: dict[str, list[tuple[float, dict[str, float]]]], base: str, other: str) -> None:
    med = {k: statistics.median(v[0] for v in vs) for k, vs in results.items()}
    cost = (med[base] - med[other]) / med[base] * 100
    extras = ""
    for key in ("p50_ms", "p99_ms", "max_ms"):
        if all(key in v[1] for vs in results.values() for v in vs):
            extras += " " + ", ".join(f"{k} {key} {statistics.median(v[1][key] for v in vs):.3f}"
                                      for k, vs in results.items())
    print(f"{label}: median {base} {med[base]:,.0f} msgs/s, {other} {med[other]:,.0f} msgs/s: "
          f"{other} costs {cost:+.1f} %{extras}", flush=True)


async def w2(ns: str, topic: str, n: int) -> tuple[float, dict[str, float]]:
    return await produce_async(ns, topic, n, 1024, "bench_w2"), {}


async def stats_mode(tmp: Path, args: argparse.Namespace) -> None:
    with cluster(tmp, "on", "") as (ns_on, _, _), cluster(tmp, "off", "brokerStatsEnable=false\n") as (ns_off, _, _):
        def variant(wl: str, addr: str, tag: str) -> Callable[[int], Awaitable[tuple[float, dict[str, float]]]]:
            if wl == "W1":
                return lambda r: w1(addr, f"SW1{tag}{r}", args.sync_messages)
            return lambda r: w2(addr, f"SW2{tag}{r}", args.messages)

        for wl in ("W1", "W2"):
            res = await alternate(wl, {"stats on": variant(wl, ns_on.addr, "on"),
                                       "stats off": variant(wl, ns_off.addr, "off")}, args.runs)
            report(f"{wl} statistics", res, "stats off", "stats on")


async def scrape_mode(tmp: Path, args: argparse.Namespace) -> None:
    with cluster(tmp, "scraped", "") as (ns, _, url):
        async def variant(r: int, scraped: bool, wl: str, n: int) -> tuple[float, dict[str, float]]:
            with Scraper(url if scraped else None) as s:
                fn = w1 if wl == "W1" else w2
                rate, extra = await fn(ns.addr, f"M{wl}{int(scraped)}{r}", n)
            if s.samples:
                extra = {**extra, "scrapes": len(s.samples), "scrape_ms": statistics.median(x[0] for x in s.samples)}
            return rate, extra

        for wl, n in (("W2", args.messages), ("W1", args.sync_messages)):
            res = await alternate(wl, {
                "not scraped": lambda r, wl=wl, n=n: variant(r, False, wl, n),
                "scraped 1/s": lambda r, wl=wl, n=n: variant(r, True, wl, n),
            }, args.runs)
            report(f"{wl} /metrics", res, "not scraped", "scraped 1/s")


async def cost_mode(tmp: Path, args: argparse.Namespace) -> None:
    with cluster(tmp, "big", "") as (ns, broker, url):
        assert url is not None
        print(f"creating {args.topics} topics, {args.groups} groups with offsets on {args.topics_per_group} "
              "topics each ...", flush=True)
        client = RemotingClient()
        try:
            async with AdminClient(ns.addr) as admin:
                for i in range(0, args.topics, 50):
                    await asyncio.gather(*(admin.update_topic(f"CostTopic{j}", broker.addr, queues=8)
                                           for j in range(i, min(i + 50, args.topics))))
            requests = [
                UpdateConsumerOffsetRequestHeader(
                    f"CostGroup{g}", f"CostTopic{(g * 7 + t) % args.topics}", q, 0).encode()
                for g in range(args.groups) for t in range(args.topics_per_group) for q in range(8)
            ]
            for i in range(0, len(requests), 500):
                await asyncio.gather(*(client.invoke(broker.addr, RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, h), 30000) for h in requests[i:i + 500]))
        finally:
            await client.close()
        samples = [await asyncio.to_thread(scrape, url) for _ in range(10)]
        rtt, snap, step = (sorted(s[i] for s in samples) for i in range(3))
        print(f"scrape of {args.topics} topics x 8 queues, {args.groups} groups x {args.topics_per_group} topics "
              f"({args.groups * args.topics_per_group * 8} group-queues, {samples[0][3]} samples): round trip "
              f"median {rtt[5]:.1f} ms (max {rtt[-1]:.1f}), loop time median {snap[5]:.1f} ms (max {snap[-1]:.1f}), "
              f"longest step median {step[5]:.1f} ms (max {step[-1]:.1f})", flush=True)

        async def variant(r: int, scraped: bool) -> tuple[float, dict[str, float]]:
            with Scraper(url if scraped else None):
                rate, extra = await w1(ns.addr, f"CostW1{int(scraped)}{r}", args.sync_messages)
            return rate, extra

        res = await alternate("W1", {"not scraped": lambda r: variant(r, False),
                                     "scraped 1/s": lambda r: variant(r, True)}, args.runs)
        report("W1 on the big broker", res, "not scraped", "scraped 1/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="stats,scrape,cost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sync-messages", type=int, default=20_000)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--topics-per-group", type=int, default=20)
    args = parser.parse_args()
    modes = {"stats": stats_mode, "scrape": scrape_mode, "cost": cost_mode}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.mode.split(","):
            print(f"== {mode}", flush=True)
            run(modes[mode](Path(tmp), args))


if __name__ == "__main__":
    main()
