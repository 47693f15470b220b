"""A push consumer draining a backlog, one message per listener call (the consume path's
per-call cost is largest there): msgs/s and the client's CPU microseconds per message.

Run:  .venv/bin/python benchmarks/push_consume_bench.py [messages]   (default 60000)
Compare two commits by alternating runs of each (medians), on a quiet machine.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def drain(ns: str, n: int) -> tuple[float, float]:
    topic = f"PushBench{int(time.time() * 1000)}"
    async with Producer("push_bench_p", ns) as producer:
        await asyncio.gather(*[await producer.send_async(Message(topic, b"x" * 100)) for _ in range(n)])
    got = 0
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        nonlocal got
        got += len(msgs)
        if got >= n:
            done.set()

    consumer = PushConsumer(f"push_bench_{topic}", ns, listener=listener)
    consumer.subscribe(topic)
    t0, c0 = time.perf_counter(), cpu_s()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 300)
    t1, c1 = time.perf_counter(), cpu_s()
    await consumer.shutdown()
    return n / (t1 - t0), 1e6 * (c1 - c0) / n


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60_000
    base = Path(tempfile.mkdtemp(prefix="push_bench"))
    namesrv = start_namesrv(base / "ns")
    broker = ServerProcess(["broker", "-n", namesrv.addr, "--listen", "127.0.0.1:0", "--store-dir", str(base / "store"),
                            "--broker-ip", "127.0.0.1", "--log-level", "WARNING"]).start()
    try:
        rate, cpu = asyncio.run(drain(namesrv.addr, n))
        print(f"push backlog: {rate:,.0f} msgs/s, {cpu:.2f} client CPU us/msg")
    finally:
        broker.close()
        namesrv.close()


if __name__ == "__main__":
    main()
