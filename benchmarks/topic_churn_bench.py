"""Sends that auto-create a topic each: the cost of keeping the topic table on disk.

Starts `apogee namesrv` and `apogee broker` (unless --broker is given) and sends, one at a
time, N messages each to a topic that does not exist yet (the broker creates it from TBW102),
then N messages to one existing topic while a second client keeps creating topics.  Prints
the mean and percentiles of the send latency of both phases: the first shows what creating a
topic costs its sender, the second what it costs everybody else.

Run: .venv/bin/python benchmarks/topic_churn_bench.py [--topics 2000] [--flush SYNC_FLUSH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codes import ResponseCode  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402
from tests.support.wire import send_request  # noqa: E402

BODY = b"x" * 256


async def timed_sends(client: RemotingClient, addr: str, topics: list[str]) -> list[float]:
    latencies = []
    for topic in topics:
        t0 = time.perf_counter()
        resp = await client.invoke(addr, send_request(topic, BODY), 10_000)
        latencies.append(time.perf_counter() - t0)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return latencies


def describe(label: str, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    print(f"{label:<46} mean {statistics.fmean(latencies) * 1000:7.3f} ms  p50 {p(0.5):7.3f}  "
          f"p99 {p(0.99):7.3f}  max {ordered[-1] * 1000:7.3f}")


async def bench(addr: str, args: argparse.Namespace) -> None:
    stamp = int(time.time())
    creator, bystander = RemotingClient(), RemotingClient()
    try:
        new = [f"Churn{stamp}_{i}" for i in range(args.topics)]
        describe(f"{args.topics} sends, each to a new topic", await timed_sends(creator, addr, new))
        steady = f"Steady{stamp}"
        await timed_sends(bystander, addr, [steady])
        more = [f"Churn{stamp}_b{i}" for i in range(args.topics)]
        churn = asyncio.ensure_future(timed_sends(creator, addr, more))
        latencies = await timed_sends(bystander, addr, [steady] * args.topics)
        await churn
        describe(f"{args.topics} sends to one topic beside that churn", latencies)
    finally:
        await creator.close()
        await bystander.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", help="use a running broker at host:port instead of starting one")
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    args = parser.parse_args()
    if args.broker:
        run(bench(args.broker, args))
        return
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "broker.conf"
        conf.write_text(f"flushDiskType={args.flush}\nbrokerName=churn\n")
        namesrv = start_namesrv(Path(tmp) / "ns")
        broker = ServerProcess(
            ["broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0",
             "--store-dir", str(Path(tmp) / "store"), "--broker-ip", "127.0.0.1", "--log-level", "WARNING"]
        ).start()
        try:
            print(f"broker {broker.addr} ({args.flush}), pid {broker.pid}")
            run(bench(broker.addr, args))
        finally:
            broker.close()
            namesrv.close()


if __name__ == "__main__":
    main()
