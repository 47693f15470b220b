"""A broker's memory and a well-behaved client's throughput under the attacks of issue 16 §4.

Starts `apogee namesrv` and `apogee broker` on loopback (fresh store, default limits unless
--conf adds broker.conf lines), stores one message of --message-size bytes, then for each run:

  base    a well-behaved client sends 1 KiB messages one at a time (sync) for --seconds
  attack  the same client, while
            --frames connections each send the first half of a --frame-size frame and stall
            --pulls PULL_MESSAGEs of the big message go out on --pull-connections connections
            that never read their answers

and prints the broker's anonymous memory (RssAnon of /proc/PID/status: before, after the base
phase, and the peak sampled every 20 ms during the attack), the client's msgs/s in both phases
and their ratio, and how many attacking connections the broker closed.

Run:  .venv/bin/python benchmarks/limits_bench.py [--runs 3] [--seconds 5] [--conf 'key=value;...']
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.client import Message, Producer  # noqa: E402
from apogee.remoting.client import RemotingClient  # noqa: E402
from apogee.remoting.codec import encode_bytes  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from tests.support.attacks import closed_by_peer, connect, half_frame, rss_anon_kib, send_until_blocked  # noqa: E402
from tests.support.processes import ServerProcess, start_broker, start_namesrv  # noqa: E402
from tests.support.wire import pull_request, send_request, wait_dispatched  # noqa: E402

MiB = 1024 * 1024
BIG_TOPIC = "LimitsBig"


async def good_client(ns: str, seconds: float) -> float:
    """Sync sends of 1 KiB for ``seconds``: msgs/s."""
    body = b"x" * 1024
    async with Producer("limits_good", ns, default_topic_queue_nums=8) as p:
        for _ in range(200):
            await p.send(Message("LimitsGood", body))
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(50):
                await p.send(Message("LimitsGood", body))
            n += 50
        return n / (time.perf_counter() - start)


def start_attack(host: str, port: int, args: argparse.Namespace) -> tuple[list[socket.socket], list[socket.socket]]:
    """Half-sent frames and unread pulls; returns their sockets (kept open by the caller)."""
    frame_socks = [connect(host, port) for _ in range(args.frames)]
    half = half_frame(args.frame_size)
    for sock in frame_socks:
        send_until_blocked(sock, half)
    pull_socks = [connect(host, port) for _ in range(args.pull_connections)]
    per = args.pulls // args.pull_connections
    pulls = b"".join(encode_bytes(pull_request(BIG_TOPIC, 0, 0, max_msgs=1, group="limits_attacker"))
                     for _ in range(per))
    for sock in pull_socks:
        send_until_blocked(sock, pulls)
    return frame_socks, pull_socks


async def sample_peak(pid: int, stop: asyncio.Event) -> int:
    peak = 0
    while not stop.is_set():
        peak = max(peak, rss_anon_kib(pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)
    return max(peak, rss_anon_kib(pid))


async def one_run(ns: str, broker: ServerProcess, args: argparse.Namespace) -> dict[str, float]:
    before = rss_anon_kib(broker.pid)
    base = await good_client(ns, args.seconds)
    after_base = rss_anon_kib(broker.pid)
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(sample_peak(broker.pid, stop))
    frame_socks, pull_socks = await asyncio.to_thread(start_attack, broker.host, broker.port, args)
    try:
        attacked = await good_client(ns, args.seconds)
        stop.set()
        peak = await sampler
        closed = sum(closed_by_peer(s) for s in frame_socks + pull_socks)
    finally:
        for sock in frame_socks + pull_socks:
            sock.close()
    return {
        "rss_before_mib": before / 1024,
        "rss_base_mib": after_base / 1024,
        "rss_peak_mib": peak / 1024,
        "base_msgs_s": base,
        "attack_msgs_s": attacked,
        "ratio": attacked / base,
        "closed": closed,
    }


async def bench(ns: str, broker: ServerProcess, args: argparse.Namespace) -> None:
    client = RemotingClient()
    try:
        resp = await client.invoke(broker.addr, send_request(BIG_TOPIC, bytes(args.message_size)), 10_000)
        assert resp.code == 0, resp.remark
        await wait_dispatched(client, broker.addr, BIG_TOPIC, 0, 1)
    finally:
        await client.close()
    results = []
    for i in range(args.runs):
        r = await one_run(ns, broker, args)
        results.append(r)
        print(
            f"run {i + 1}: RssAnon before {r['rss_before_mib']:.0f} MiB, after base {r['rss_base_mib']:.0f} MiB, "
            f"peak under attack {r['rss_peak_mib']:.0f} MiB; good client {r['base_msgs_s']:,.0f} -> "
            f"{r['attack_msgs_s']:,.0f} msgs/s ({r['ratio']:.0%}); attackers closed by the broker: "
            f"{r['closed']:.0f} of {args.frames + args.pull_connections}",
            flush=True,
        )
    if len(results) > 1:
        print(
            f"median: peak RssAnon {statistics.median(r['rss_peak_mib'] for r in results):.0f} MiB, "
            f"throughput ratio {statistics.median(r['ratio'] for r in results):.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--frame-size", type=int, default=16 * MiB)
    parser.add_argument("--pulls", type=int, default=1000)
    parser.add_argument("--pull-connections", type=int, default=4)
    parser.add_argument("--message-size", type=int, default=1 * MiB)
    parser.add_argument("--conf", default="", help="extra broker.conf lines, separated by ';'")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conf = "brokerName=limits\n" + "".join(f"{line.strip()}\n" for line in args.conf.split(";") if line)
        namesrv = start_namesrv(Path(tmp) / "ns")
        broker = start_broker(namesrv.addr, Path(tmp) / "store", conf, "--log-level", "WARNING")
        try:
            print(f"broker {broker.addr} pid {broker.pid}; {args.frames} half-sent frames of {args.frame_size:,} B, "
                  f"{args.pulls} unread pulls of {args.message_size:,} B on {args.pull_connections} connections",
                  flush=True)
            run(bench(namesrv.addr, broker, args))
            warnings = [line for line in broker.stderr().splitlines() if "WARN" in line]
            print(f"broker warnings: {len(warnings)}")
            for line in warnings[:10]:
                print("  " + line[:200])
        finally:
            broker.close()
            namesrv.close()


if __name__ == "__main__":
    main()
