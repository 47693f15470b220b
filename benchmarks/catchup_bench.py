"""A slave catching up a backlog (issue 19's catch-up target, >= 150 MB/s).  Not a test.

Starts `apogee namesrv` and a master on loopback, fills a --backlog-mb backlog of 1 KiB
single sends (4 queues, KEYS and TAGS as benchmarks/broker_bench.py sends them), then per run
starts a slave on a fresh store and measures, from its ready line:

* held: MB/s until its CommitLog holds the master's whole log;
* dispatched: MB/s until its ConsumeQueues also hold every message (what consumers need);
* the CPU seconds per wall second of master and slave over the dispatched interval.

With several --src trees (e.g. a worktree of an older commit, `make install` there) each run
starts one slave from each tree in turn against the same master, so old and new code
alternate under the same load; medians of --runs per tree.  The load average is printed.

Run: .venv/bin/python benchmarks/catchup_bench.py [--runs 3] [--backlog-mb 200]
     [--src ../catchup-old/src --src src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codes import RequestCode  # noqa: E402
from apogee.remoting.command import RemotingCommand  # noqa: E402
from apogee.remoting.headers.consumer import TopicQueueRequestHeader  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from benchmarks.broker_bench import cpu_seconds, pipelined_sends  # noqa: E402
from benchmarks.replication_bench import runtime  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

QUEUES = 4


def start(namesrv: str, store: Path, conf: str, src: str) -> ServerProcess:
    path = store.parent / f"{store.name}.conf"
    path.write_text("brokerName=bench-catchup\n" + conf)
    return ServerProcess(
        ["broker", "-n", namesrv, "-c", str(path), "--listen", "127.0.0.1:0", "--store-dir", str(store),
         "--broker-ip", "127.0.0.1", "--log-level", "WARNING"],
        env={"PYTHONPATH": src},
    ).start()


async def queues_max(client: RemotingClient, addr: str, topic: str) -> list[int]:
    out = []
    for q in range(QUEUES):
        header = TopicQueueRequestHeader(topic, q).encode()
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header), 10_000)
        out.append(int(resp.ext_fields["offset"]))
    return out


async def one_slave(namesrv: str, store: Path, src: str, master: ServerProcess, topic: str,
                    target: int, expected: list[int], client: RemotingClient) -> dict[str, float]:
    slave = start(namesrv, store, "brokerRole=SLAVE\nbrokerId=1\n", src)
    try:
        m0, s0 = cpu_seconds(master.pid), cpu_seconds(slave.pid)
        began = time.perf_counter()
        held_s = None
        deadline = began + 600
        while True:
            now = time.perf_counter()
            if now > deadline:
                raise TimeoutError("the slave did not catch up in 600 s")
            if held_s is None and int((await runtime(client, slave.addr))["commitLogMaxOffset"]) >= target:
                held_s = now - began
            if held_s is not None and await queues_max(client, slave.addr, topic) == expected:
                break
            await asyncio.sleep(0.02)
        wall = time.perf_counter() - began
        return {"held": target / held_s / 1e6, "dispatched": target / wall / 1e6,
                "cpu_master": (cpu_seconds(master.pid) - m0) / wall, "cpu_slave": (cpu_seconds(slave.pid) - s0) / wall}
    finally:
        slave.close()


def label(src: str) -> str:
    out = subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout
    return out.strip() or "?"


async def bench(tmp: Path, namesrv: str, args: argparse.Namespace, srcs: list[str]) -> None:
    master = start(namesrv, tmp / "master", "", srcs[-1])
    client = RemotingClient()
    try:
        topic = f"Backlog{int(time.time() * 1000)}"
        n = args.backlog_mb * 1024 * 1024 // 1200
        await pipelined_sends(client, master.addr, topic, n, 64)
        target = int((await runtime(client, master.addr))["commitLogMaxOffset"])
        expected = await queues_max(client, master.addr, topic)
        print(f"backlog: {n} messages, {target / 1e6:.0f} MB; master pid {master.pid}")
        results: dict[str, list[dict[str, float]]] = {s: [] for s in srcs}
        loads = [os.getloadavg()[0]]
        for i in range(args.runs):
            for k, src in enumerate(srcs):
                r = await one_slave(namesrv, tmp / f"slave-{i}-{k}", src, master, topic, target, expected, client)
                results[src].append(r)
                loads.append(os.getloadavg()[0])
                print(f"  run {i + 1} {label(src):9} held {r['held']:6.0f} MB/s  dispatched {r['dispatched']:6.0f} MB/s"
                      f"  cpu {r['cpu_master']:.2f},{r['cpu_slave']:.2f}  load {loads[-1]:.2f}", flush=True)
        print(f"medians of {args.runs}, {args.backlog_mb} MB backlog of 1 KiB messages (target >= 150 MB/s);"
              f" load average 1 min {min(loads):.2f}..{max(loads):.2f}")
        for src in srcs:
            rs = results[src]

            def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            print(f"{label(src):9} held {med('held'):6.0f} MB/s  dispatched {med('dispatched'):6.0f} MB/s"
                  f"  cpu master {med('cpu_master'):.2f} slave {med('cpu_slave'):.2f}  ({src})")
    finally:
        await client.close()
        master.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backlog-mb", type=int, default=200)
    parser.add_argument("--src", action="append", help="run a slave from this source tree (repeat to compare)")
    args = parser.parse_args()
    srcs = [str(Path(s).resolve()) for s in (args.src or [str(ROOT / "src")])]
    with tempfile.TemporaryDirectory() as tmp:
        namesrv = start_namesrv(Path(tmp) / "ns")
        try:
            run(bench(Path(tmp), namesrv.addr, args, srcs))
        finally:
            namesrv.close()


if __name__ == "__main__":
    main()
