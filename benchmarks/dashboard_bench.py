"""The dashboard's own page load time with a large cluster (issue 21: under 300 ms with 1,000
topics and 200 groups).

A NameServer and a broker (real processes, loopback) get ``--topics`` topics (4 queues each)
and ``--groups`` subscription groups; then two ``apogee dashboard`` processes serve them: one
as shipped (reads cached for 5 s: what a person clicking around gets) and one with
``cacheTtlSeconds=0`` (every load asks the NameServer and brokers again: the worst case, and
the proof that a page does not make a request per topic).  Each page of ``PATHS`` is fetched
``--runs`` times from each, one at a time, over HTTP (the whole response read): the median,
90th percentile and max of the wall time, and the dashboard process's CPU per load (from
/proc, user + system).

Run:  .venv/bin/python benchmarks/dashboard_bench.py [--topics 1000] [--groups 200] [--runs 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.admin.client import AdminClient  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from tests.support.processes import ServerProcess, start_broker, start_namesrv  # noqa: E402

TARGET_MS = 300.0
# The pages measured ({topic} is one of the created topics).  A page added to the dashboard
# is one more line here.
PATHS = [
    "/cluster",
    "/topics",
    "/topics?kind=all&q=bench",
    "/topics/{topic}",
    "/producers",
    "/groups",  # the sampler's snapshot: no request while the page is built
    "/groups/{group}",
    "/messages",
    "/charts",
    "/api/charts",
]


async def populate(namesrv: str, broker: str, topics: int, groups: int) -> str:
    """Create the topics and groups (in parallel batches); return one topic's name."""
    async with AdminClient(namesrv) as admin:
        names = [f"bench-topic-{i:04d}" for i in range(topics)]
        for start in range(0, len(names), 50):
            await asyncio.gather(*(admin.update_topic(t, broker, queues=4) for t in names[start:start + 50]))
        for start in range(0, groups, 50):
            await asyncio.gather(*(admin.update_group(broker, f"bench-group-{i:03d}")
                                   for i in range(start, min(groups, start + 50))))
        # each group has offsets on one topic, as a consuming group would (317 reports them all)
        await asyncio.gather(*(admin.instance.api.update_consumer_offset(broker, f"bench-group-{i:03d}",
                                                                         names[i % topics], q, 0)
                               for i in range(groups) for q in range(4)))
        deadline = time.monotonic() + 120
        while len([t for t in await admin.topic_list() if t.startswith("bench-topic-")]) < topics:
            if time.monotonic() > deadline:
                raise RuntimeError("the NameServer did not list every topic within 120 s")
            await asyncio.sleep(0.5)
        return names[len(names) // 2]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return len(resp.read())


def measure(dashboard: ServerProcess, path: str, runs: int) -> tuple[list[float], float, int]:
    url = f"http://{dashboard.addr}{path}"
    size = get(url)  # first load (fills the cache of the cached dashboard; not counted)
    times = []
    cpu0 = cpu_s(dashboard.pid)
    for _ in range(runs):
        t0 = time.perf_counter()
        get(url)
        times.append((time.perf_counter() - t0) * 1000)
    return times, (cpu_s(dashboard.pid) - cpu0) * 1000 / runs, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated pages to load")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as tmp:
        root = Path(tmp)
        namesrv = start_namesrv(root / "ns")
        broker = start_broker(namesrv.addr, root / "store", "brokerName=broker-a\n", "--log-level", "WARNING")
        (root / "uncached.conf").write_text("cacheTtlSeconds=0\n")
        dashboards: list[ServerProcess] = []
        try:
            t0 = time.monotonic()
            topic = run(populate(namesrv.addr, broker.addr, args.topics, args.groups))
            print(f"{args.topics} topics and {args.groups} groups created in {time.monotonic() - t0:.1f} s")
            for extra in ([], ["--config", str(root / "uncached.conf")]):
                dashboards.append(ServerProcess([
                    "dashboard", "-n", namesrv.addr, "--listen", "127.0.0.1:0", "--log-level", "WARNING", *extra,
                ]).start())
            print(f"{'page':34} {'dashboard':9} {'median':>8} {'p90':>8} {'max':>8} {'CPU/load':>9} {'bytes':>9}")
            worst = 0.0
            for path in args.paths.split(","):
                path = path.format(topic=topic, group="bench-group-000")
                for name, dashboard in zip(("cached", "uncached"), dashboards, strict=True):
                    times, cpu_ms, size = measure(dashboard, path, args.runs)
                    median = statistics.median(times)
                    worst = max(worst, median)
                    p90 = statistics.quantiles(times, n=10)[-1] if len(times) >= 2 else times[0]
                    print(f"{path:34} {name:9} {median:7.1f}ms {p90:7.1f}ms {max(times):7.1f}ms "
                          f"{cpu_ms:7.1f}ms {size:9d}")
            verdict = "within" if worst < TARGET_MS else "OVER"
            print(f"slowest median {worst:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")
        finally:
            for server in (*dashboards, broker, namesrv):
                server.close()


if __name__ == "__main__":
    main()
