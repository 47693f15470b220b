"""Drive a real broker over the network: send and consume messages/s, latency percentiles.

Starts `apogee namesrv` and `apogee broker` as separate processes on free loopback ports
(unless --broker is given), then, with 1 KiB bodies:

* sync sends, one at a time (latency p50/p99);
* pipelined sends with N requests in flight;
* consuming the whole backlog with pulls of 32 messages;
* the CPU time used by the broker process beside each figure (2 cores are shared).

With --topic-churn N it measures instead what keeping the topic table on disk costs: N sync
sends each to a topic that does not exist yet (the broker creates it from TBW102), then N
sends to one existing topic while a second client keeps creating topics (the latency the
churn costs everybody else).

Run: .venv/bin/python benchmarks/broker_bench.py [--messages 50000] [--runs 3] [--inflight 64]
     .venv/bin/python benchmarks/broker_bench.py --topic-churn 2000 [--flush SYNC_FLUSH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.common.message_codec import properties_to_string  # noqa: E402
from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from apogee.remoting.command import RemotingCommand  # noqa: E402
from apogee.remoting.headers.send import SendMessageRequestHeaderV2  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402
from tests.support.wire import pull_request  # noqa: E402
from tests.support.wire import send_request as small_send  # noqa: E402

BODY = b"x" * 1024


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send_request(topic: str, queue_id: int, i: int) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        producer_group="bench", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string({"KEYS": f"k{i}", "TAGS": "TagA", "WAIT": "true", "n": str(i % 100)}),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.encode(), BODY)


async def sync_sends(client: RemotingClient, addr: str, topic: str, n: int) -> tuple[float, list[float]]:
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        resp = await client.invoke(addr, send_request(topic, i % 4, i), 5000)
        latencies.append(time.perf_counter() - t0)
        assert resp.code == ResponseCode.SUCCESS, resp
    return n / (time.perf_counter() - start), latencies


async def pipelined_sends(client: RemotingClient, addr: str, topic: str, n: int, inflight: int) -> float:
    sem = asyncio.Semaphore(inflight)
    conn = await client.connection(addr)
    done = asyncio.get_running_loop().create_future()
    remaining = n

    def finished(resp: RemotingCommand | None, err: BaseException | None) -> None:
        nonlocal remaining
        sem.release()
        if err is not None or resp is None or resp.code != ResponseCode.SUCCESS:
            if not done.done():
                done.set_exception(RuntimeError(f"send failed: {err or resp}"))
            return
        remaining -= 1
        if remaining == 0 and not done.done():
            done.set_result(None)

    start = time.perf_counter()
    for i in range(n):
        await sem.acquire()
        conn.invoke_callback(send_request(topic, i % 4, i), 10_000, finished)
    await done
    return n / (time.perf_counter() - start)


async def consume_all(
    client: RemotingClient, addr: str, topic: str, expected: int, sql: str | None = None
) -> float:
    """Pull every queue to its end; the rate counts the messages scanned on the broker."""
    start = time.perf_counter()
    total = 0
    scanned = 0
    for queue_id in range(4):
        offset = 0
        end = int((await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}), 5000)).ext_fields["offset"])
        while offset < end:
            req = pull_request(topic, queue_id, offset, group="bench-consumer", max_msgs=32,
                               subscription=sql or "*", expression_type="SQL92" if sql else None)
            resp = await client.invoke(addr, req, 5000)
            if resp.code == ResponseCode.SUCCESS:
                total += _count_records(resp.body_bytes())
            elif resp.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
                break
            next_offset = int(resp.ext_fields["nextBeginOffset"])
            scanned += next_offset - offset
            offset = next_offset
    if sql is None:
        assert total == expected, (total, expected)
    return scanned / (time.perf_counter() - start)


def _count_records(body: bytes) -> int:
    count = pos = 0
    while pos < len(body):
        pos += int.from_bytes(body[pos : pos + 4], "big")
        count += 1
    return count


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def bench(addr: str, broker_pid: int | None, args: argparse.Namespace) -> None:
    results: dict[str, list[float]] = {"sync": [], "pipelined": [], "consume": [], "consume_sql": []}
    cpu: dict[str, list[float]] = {k: [] for k in results}
    p50s, p99s = [], []
    for run_no in range(args.runs):
        client = RemotingClient()
        topic = f"Bench{run_no}_{int(time.time())}"
        # Create the topic first (auto-creation through TBW102).
        await client.invoke(addr, send_request(topic, 0, -1), 5000)
        for name in results:
            c0 = cpu_seconds(broker_pid) if broker_pid else 0.0
            w0 = time.perf_counter()
            if name == "sync":
                rate, lat = await sync_sends(client, addr, topic, args.sync_messages)
                p50s.append(pct(lat, 0.5))
                p99s.append(pct(lat, 0.99))
            elif name == "pipelined":
                rate = await pipelined_sends(client, addr, topic, args.messages, args.inflight)
            elif name == "consume":
                rate = await consume_all(client, addr, topic, args.sync_messages + args.messages + 1)
            else:
                rate = await consume_all(client, addr, topic, 0, sql="n < 10")
            wall = time.perf_counter() - w0
            results[name].append(rate)
            if broker_pid:
                cpu[name].append((cpu_seconds(broker_pid) - c0) / wall * 100)
        await client.close()
    print(f"{'workload (1 KiB bodies)':<40}{'msgs/s (median)':>16}{'broker CPU %':>14}")
    labels = {
        "sync": f"sync send, one at a time ({args.sync_messages})",
        "pipelined": f"pipelined send, {args.inflight} in flight ({args.messages})",
        "consume": "consume backlog, pull 32",
        "consume_sql": "consume, SQL92 n < 10 (10 % match)",
    }
    for name, rates in results.items():
        c = f"{statistics.median(cpu[name]):.0f}" if cpu[name] else "-"
        print(f"{labels[name]:<40}{statistics.median(rates):>16,.0f}{c:>14}")
    print(f"sync send latency: p50 {statistics.median(p50s):.3f} ms, p99 {statistics.median(p99s):.3f} ms")


async def timed_sends(client: RemotingClient, addr: str, topics: list[str]) -> list[float]:
    latencies = []
    for topic in topics:
        t0 = time.perf_counter()
        resp = await client.invoke(addr, small_send(topic, BODY[:256]), 10_000)
        latencies.append(time.perf_counter() - t0)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return latencies


def describe(label: str, latencies: list[float]) -> None:
    print(f"{label:<46} mean {statistics.fmean(latencies) * 1000:7.3f} ms  p50 {pct(latencies, 0.5):7.3f}  "
          f"p99 {pct(latencies, 0.99):7.3f}  max {max(latencies) * 1000:7.3f}")


async def topic_churn(addr: str, broker_pid: int | None, args: argparse.Namespace) -> None:
    n, stamp = args.topic_churn, int(time.time())
    creator, bystander = RemotingClient(), RemotingClient()
    try:
        new_topics = [f"Churn{stamp}_{i}" for i in range(n)]
        describe(f"{n} sends, each to a new topic", await timed_sends(creator, addr, new_topics))
        steady = f"Steady{stamp}"
        await timed_sends(bystander, addr, [steady])
        churn = asyncio.ensure_future(timed_sends(creator, addr, [f"Churn{stamp}_b{i}" for i in range(n)]))
        latencies = await timed_sends(bystander, addr, [steady] * n)
        await churn
        describe(f"{n} sends to one topic beside that churn", latencies)
    finally:
        await creator.close()
        await bystander.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", help="use a running broker at host:port instead of starting one")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--sync-messages", type=int, default=5_000)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--topic-churn", type=int, default=0, metavar="N", help="the topic-creation workload instead")
    args = parser.parse_args()
    workload = topic_churn if args.topic_churn else bench
    if args.broker:
        run(workload(args.broker, None, args))
        return
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "broker.conf"
        conf.write_text(f"flushDiskType={args.flush}\nbrokerName=bench\nenablePropertyFilter=true\n")
        namesrv = start_namesrv(Path(tmp) / "ns")
        broker = ServerProcess(
            ["broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0",
             "--store-dir", str(Path(tmp) / "store"), "--broker-ip", "127.0.0.1", "--log-level", "WARNING"]
        ).start()
        try:
            print(f"broker {broker.addr} ({args.flush}), pid {broker.pid}")
            run(workload(broker.addr, broker.pid, args))
        finally:
            broker.close()
            namesrv.close()


if __name__ == "__main__":
    main()
