"""Apogee's Python client against one real broker: workloads W1-W5 of issue 5.

Starts `apogee namesrv` and `apogee broker` (ASYNC_FLUSH, durable store) as separate processes
on loopback, unless --namesrv is given, then runs, with 1 KiB bodies unless stated:

  W1  sync send, one message at a time                     msgs/s, p50/p99 latency
      (after W1_WARMUP untimed sends, the C++ client's too)
  W2  send_async with auto-batching, 500,000 messages       msgs/s
  W3  consume a 500,000-message backlog, offsets committed  msgs/s (lite pull consumer)
  W4  end to end at a steady 2,000 msgs/s for 20 s          p50/p99 latency (push consumer;
      one send every 0.5 ms, paced by a timerfd: see SteadyPacer)
  W5  as W2 with 100-byte bodies                            msgs/s

Each workload runs --runs times (3); the median is printed with the CPU used by the broker
and by this client process during the run (2 cores are shared, so both matter).  W1 and W2
also show CPU µs per message (the run's CPU over its messages, producer start included) of
the broker and the client, whole and of the event-loop thread alone (the rest: the broker's
store threads, the ACL hasher thread): on a loaded machine these move far less than rates.

With --cpp the Apache RocketMQ C++ client (rocketmq==0.4.4 in .venv-interop, via
tests/interop/clients/cpp_client.py) runs W1, W2, W3 and W5 on the same broker for comparison
(smaller counts for its sends: it has no batching and its async send is slow).

With --keep-futures W2 and W5 keep every future and check each result once all are in, as
the peer harness's adapter does: the futures and results alive are then part of the cost (the
garbage collector walks what it tracks, docs/client.md).

With --trace the producers of W1, W2 and W5 write message traces (enable_msg_trace; W1 also
reports the trace records dropped because the dispatcher's queue was full).

With --acl W1 and W2 also run against a second NameServer + broker with aclEnable=true, the
producer signing every request (rows W1acl, W2acl); with --tls against a NameServer + broker in
TLS permissive mode (certificates made by openssl in the temporary directory), the producer
connecting with TLS (rows W1tls, W2tls); with --busy-poll-us N against a NameServer + broker
polling N us after traffic, the producer too (rows W1busypoll, W2busypoll; docs/performance.md,
"Busy polling").  Plain, ACL, TLS and busy-polling runs alternate, so all see the same machine
load.

Run:  .venv/bin/python benchmarks/client_bench.py [--only W1,W3] [--runs 3] [--messages 500000] [--cpp] [--trace]
      [--acl] [--tls] [--busy-poll-us 200]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.client import (  # noqa: E402
    ConsumeContext,
    LitePullConsumer,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
)
from apogee.client.consumer.offset_store import ReadOffsetType  # noqa: E402
from apogee.remoting.config import RemotingConfig  # noqa: E402
from apogee.remoting.loop import run  # noqa: E402
from apogee.remoting.tls_config import TlsClientConfig  # noqa: E402
from benchmarks.figures import save_table  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402
from tests.support.tls import make_certs  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")

# W3 pulls up to 256 messages at a time: the broker's maxTransferCountOnMessageInMemory is raised
# from Java's default of 32 (a standard broker.conf setting; the 256 KiB per-pull byte limit stays).
PULL_BATCH = 256
BROKER_CONF = f"flushDiskType=ASYNC_FLUSH\nbrokerName=bench\nmaxTransferCountOnMessageInMemory={PULL_BATCH}\n"


def cpu_of(pid: int, tid: int | None = None) -> float:
    """CPU seconds of process ``pid``, or of its thread ``tid`` (a process's first thread has
    its pid: the event loop's, in the broker and in this client)."""
    with open(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def _own_and_children_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Meter:
    """Wall time and the CPU of the broker and of this process over one run, and of their
    event-loop threads (the rest: the broker's store threads, the ACL hasher thread)."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.pid = os.getpid()

    def _loops(self) -> tuple[float, float]:
        broker = cpu_of(self.broker_pid, self.broker_pid) if self.broker_pid else 0.0
        return broker, cpu_of(self.pid, self.pid)

    def __enter__(self) -> Meter:
        self.w0 = time.perf_counter()
        self.c0 = _own_and_children_cpu()
        self.b0 = cpu_of(self.broker_pid) if self.broker_pid else 0.0
        self.loops0 = self._loops()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.w0
        self.client_cpu = (_own_and_children_cpu() - self.c0) / self.wall * 100
        self.broker_cpu = (cpu_of(self.broker_pid) - self.b0) / self.wall * 100 if self.broker_pid else float("nan")
        loops = self._loops()
        self.broker_loop_cpu = (loops[0] - self.loops0[0]) / self.wall * 100 if self.broker_pid else float("nan")
        self.client_loop_cpu = (loops[1] - self.loops0[1]) / self.wall * 100

    def per_message_us(self, rate: float) -> dict[str, float]:
        """CPU µs per message at ``rate`` msgs/s: steadier than rates on a shared machine."""
        return {
            "broker_us": self.broker_cpu / 100 / rate * 1e6, "broker_loop_us": self.broker_loop_cpu / 100 / rate * 1e6,
            "client_us": self.client_cpu / 100 / rate * 1e6, "client_loop_us": self.client_loop_cpu / 100 / rate * 1e6,
        }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# Sync sends before W1's clock starts, for the Python and the C++ client alike: the route, the
# connection, the topic's eight ConsumeQueue files (created on the broker's I/O thread on a
# queue's first message) and a fresh broker's first seconds are then behind it, and W1 measures
# sends in a steady state, not the creation of a topic.
W1_WARMUP = 1000


@dataclass
class Target:
    """A cluster W1 and W2 run against: the plain one, or (--acl) one with ACL on; ``options``
    are the producer's (credentials)."""

    suffix: str
    ns: str
    broker_pid: int | None
    options: dict[str, Any] = field(default_factory=dict)


# --acl: the bench account, allowed everything but admin codes, and the broker's ACL file.
ACL_OPTIONS = {"access_key": "benchKey01", "secret_key": "benchSecret1"}
ACL_YML = (
    "accounts:\n  - accessKey: benchKey01\n    secretKey: benchSecret1\n"
    "    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n"
)


async def w1(
    ns: str, topic: str, n: int, trace: bool = False, options: dict[str, Any] | None = None
) -> tuple[float, dict[str, float]]:
    body = b"x" * 1024
    async with Producer("bench_w1", ns, default_topic_queue_nums=8, enable_msg_trace=trace, **(options or {})) as p:
        for _ in range(W1_WARMUP):
            await p.send(Message(topic, body))
        lat = []
        start = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter()
            await p.send(Message(topic, body, properties={"KEYS": f"k{i}", "TAGS": "TagA"}))
            lat.append((time.perf_counter() - t0) * 1000)
        rate = n / (time.perf_counter() - start)
        extra = {"p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "max_ms": max(lat)}
        if trace:
            extra["trace_dropped"] = p.trace_dispatcher.dropped
    return rate, extra


async def produce_async(
    ns: str, topic: str, n: int, size: int, group: str, trace: bool = False, options: dict[str, Any] | None = None,
    keep: bool = False,
) -> float:
    """``keep``: every future is kept and each result checked once all are in, as the peer
    harness's adapter does (what the garbage collector then walks is part of the cost)."""
    body = b"x" * size
    async with Producer(group, ns, default_topic_queue_nums=8, enable_msg_trace=trace, **(options or {})) as p:
        await p.send(Message(topic, body))
        start = time.perf_counter()
        last = None
        kept = []
        for _ in range(n):
            last = await p.send_async(Message(topic, body, properties={"TAGS": "TagA"}))
            if keep:
                kept.append(last)
        await p.flush()
        assert last is not None and last.done() and last.exception() is None
        assert all(f.result().status is SendStatus.SEND_OK for f in kept)
        return n / (time.perf_counter() - start)


async def wait_dispatched(ns: str, topic: str, n: int) -> None:
    """A backlog is only a backlog once the broker has indexed it (dispatch is asynchronous)."""
    async with PullConsumer("bench_probe", ns) as probe:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            total = 0
            for mq in await probe.fetch_message_queues(topic):
                total += await probe.max_offset(mq)
            if total >= n:
                return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the broker did not dispatch {n} messages of {topic}")


async def w3(ns: str, topic: str, n: int, group: str) -> float:
    consumer = LitePullConsumer(
        group, ns, pull_batch_size=PULL_BATCH, pull_threshold_for_all=20_000, pull_threshold_for_queue=4_000
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        got = 0
        start = time.perf_counter()
        while got < n:
            msgs = await consumer.poll(5000)
            if not msgs:
                raise RuntimeError(f"W3 stalled at {got} of {n}")
            got += len(msgs)
        await consumer.commit_sync()
        rate = got / (time.perf_counter() - start)
        committed = 0
        for mq in consumer.assignment():
            committed += await consumer.offset_store.read_offset(mq, ReadOffsetType.STORE)  # type: ignore[union-attr]
        assert committed >= n, (committed, n)
        return rate
    finally:
        await consumer.shutdown()


class SteadyPacer:
    """Ticks at a fixed sub-millisecond interval, for W4's steady rate.

    ``asyncio.sleep`` cannot pace 2,000 sends/s: libuv (uvloop) timers count whole
    milliseconds, so sleeping 0.5 ms turns the rate into bursts -- measured here, 2 or 3
    sends back to back every ~1.4 ms instead of one every 0.5 ms, and a burst's later
    messages queue behind the earlier ones.  A Linux timerfd armed with the interval wakes
    the loop once per tick with nanosecond precision (missed ticks are counted, so the
    average rate holds when the client falls behind).  Elsewhere the sleep fallback is used.
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._fd = -1
        self._owed = 0
        self._tick: asyncio.Event | None = None
        self._next = 0.0

    def __enter__(self) -> SteadyPacer:
        self._next = time.perf_counter()
        libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
        if libc is None or not hasattr(libc, "timerfd_create"):
            return self
        fd = libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return self
        sec, nsec = divmod(round(self.interval_s * 1e9), 1_000_000_000)
        spec = _ITimerSpec(_TimeSpec(sec, nsec), _TimeSpec(sec, nsec))
        if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
            os.close(fd)
            return self
        self._fd = fd
        self._tick = asyncio.Event()
        asyncio.get_running_loop().add_reader(fd, self._on_readable)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _on_readable(self) -> None:
        try:
            self._owed += int.from_bytes(os.read(self._fd, 8), sys.byteorder)
        except BlockingIOError:
            return
        assert self._tick is not None
        self._tick.set()

    async def tick(self) -> None:
        """Return at the next tick (at once when ticks are owed)."""
        if self._fd < 0:
            self._next += self.interval_s
            delay = self._next - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            return
        assert self._tick is not None
        while not self._owed:
            self._tick.clear()
            await self._tick.wait()
        self._owed -= 1


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


async def w4(ns: str, topic: str, rate: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        now = time.perf_counter_ns()
        for m in msgs:
            latencies.append((now - int(m.properties["T0"])) / 1e6)

    consumer = PushConsumer("bench_w4", ns, listener=listener, consume_message_batch_max_size=32)
    consumer.subscribe(topic)
    async with Producer("bench_w4p", ns, default_topic_queue_nums=8) as p:
        await p.send(Message(topic, b"warmup", properties={"T0": str(time.perf_counter_ns())}))
        await consumer.start()
        await asyncio.sleep(1.0)
        latencies.clear()
        body = b"x" * 1024
        n = int(rate * seconds)
        with SteadyPacer(1 / rate) as pacer:
            for _ in range(n):
                await pacer.tick()
                await p.send(Message(topic, body, properties={"T0": str(time.perf_counter_ns())}))
        deadline = time.perf_counter() + 10
        while len(latencies) < n and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
    await consumer.shutdown()
    return {
        "received": len(latencies),
        "p50_ms": pct(latencies, 0.5),
        "p99_ms": pct(latencies, 0.99),
        "max_ms": max(latencies),
    }


ROOT = Path(__file__).resolve().parents[1]
CPP_PYTHON = ROOT / ".venv-interop" / "bin" / "python"
CPP_CLIENT = ROOT / "tests" / "interop" / "clients" / "cpp_client.py"


async def cpp_bench(*args: object) -> tuple[float, dict[str, float]]:
    """Run the Apache RocketMQ C++ client (rocketmq==0.4.4) once; its rate and latencies.

    Its CPU shows up as this process's children's CPU, which ``Meter`` adds."""
    proc = await asyncio.create_subprocess_exec(
        str(CPP_PYTHON), str(CPP_CLIENT), *map(str, args), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd="/tmp",
    )
    out, err = await proc.communicate()
    for line in out.decode().splitlines():
        if '"bench"' in line:
            data = json.loads(line)
            return float(data["rate"]), {k: float(v) for k, v in data.items() if k.endswith("_ms")}
    raise RuntimeError(f"C++ client {args} failed: {err.decode()[-2000:]}")


async def bench(ns: str, broker_pid: int | None, args: argparse.Namespace, others: tuple[Target, ...] = ()) -> None:
    """``others``: more clusters W1 and W2 run against (--acl, --tls), runs alternating with the plain one's."""
    only = set(args.only.split(",")) if args.only else {"W1", "W2", "W3", "W4", "W5"}
    rows: list[tuple[str, str, list[float], list[float], list[float], dict[str, list[float]]]] = []
    loads = [os.getloadavg()[0]]
    tag = int(time.time())
    plain = Target("", ns, broker_pid)

    async def measure(
        name: str, label: str, fn: Callable[..., Awaitable[Any]], targets: tuple[Target, ...] | None = None,
        per_message: bool = False,
    ) -> None:
        """``fn(r)``, or with ``targets`` ``fn(r, target)`` for each in turn, run after run;
        ``per_message``: a rate in msgs/s, whose CPU per message is shown too."""
        runs: dict[str, tuple[list[float], list[float], list[float], dict[str, list[float]]]] = {}
        for r in range(args.runs):
            for target in targets or (plain,):
                with Meter(target.broker_pid) as m:
                    out = await (fn(r, target) if targets else fn(r))
                if isinstance(out, tuple):
                    value, more = out
                elif isinstance(out, dict):
                    value, more = out.get("p99_ms", 0.0), out
                else:
                    value, more = out, {}
                if per_message and not isinstance(out, dict) and value > 0 and target.broker_pid:
                    more = {**more, **m.per_message_us(value)}
                rates, bcpu, ccpu, extra = runs.setdefault(target.suffix, ([], [], [], {}))
                rates.append(value)
                bcpu.append(m.broker_cpu)
                ccpu.append(m.client_cpu)
                for k, v in more.items():
                    extra.setdefault(k, []).append(v)
                print(
                    f"  {name}{target.suffix} run {r + 1}: {value:,.2f} {more} "
                    f"broker CPU {m.broker_cpu:.0f}% client CPU {m.client_cpu:.0f}%",
                    flush=True,
                )
        for suffix, (rates, bcpu, ccpu, extra) in runs.items():
            rows.append((name + suffix, label + (f" [{suffix}]" if suffix else ""), rates, bcpu, ccpu, extra))

    if "W1" in only:
        await measure(
            "W1", "sync send 1 KiB, one at a time (msgs/s)",
            lambda r, t: w1(t.ns, f"BenchW1_{tag}_{r}", args.sync_messages, args.trace, t.options), (plain, *others),
            per_message=True,
        )
    if "W2" in only or "W3" in only:
        await measure(
            "W2",
            f"send_async auto-batched 1 KiB x {args.messages} (msgs/s)",
            lambda r, t: produce_async(
                t.ns, f"BenchW2_{tag}_{r}", args.messages, 1024, "bench_w2", args.trace, t.options,
                keep=args.keep_futures,
            ),
            (plain, *others),
            per_message=True,
        )
    if "W3" in only:
        for r in range(args.runs):  # the backlog must be fully dispatched before W3 is timed
            await wait_dispatched(ns, f"BenchW2_{tag}_{r}", args.messages + 1)
        await measure(
            "W3",
            f"consume {args.messages} backlog + commit (msgs/s)",
            lambda r: w3(ns, f"BenchW2_{tag}_{r}", args.messages + 1, f"bench_w3_{tag}_{r}"),
        )
    if "W4" in only:
        await measure(
            "W4",
            f"end to end at {args.w4_rate} msgs/s for {args.w4_seconds} s (p99 ms)",
            lambda r: w4(ns, f"BenchW4_{tag}_{r}", args.w4_rate, args.w4_seconds),
        )
    if "W5" in only:
        await measure(
            "W5",
            f"send_async auto-batched 100 B x {args.messages} (msgs/s)",
            lambda r: produce_async(
                ns, f"BenchW5_{tag}_{r}", args.messages, 100, "bench_w5", args.trace, keep=args.keep_futures
            ),
        )

    if args.cpp and CPP_PYTHON.exists():
        if "W1" in only:
            await measure("W1cpp", "  C++ client 1.2.3: sync send 1 KiB (msgs/s)",
                          lambda r: cpp_bench("bench-send", ns, f"CppW1_{tag}_{r}", "--count", args.cpp_sync_messages,
                                              "--mode", "sync", "--warmup", W1_WARMUP))
        if "W2" in only or "W3" in only:
            await measure("W2cpp", "  C++ client: send_async 1 KiB (msgs/s)",
                          lambda r: cpp_bench("bench-send", ns, f"CppW2_{tag}_{r}", "--count", args.cpp_messages,
                                              "--mode", "async"))
        if "W3" in only:
            await measure("W3cpp", "  C++ client: push-consume the W2 backlog (msgs/s)",
                          lambda r: cpp_bench("bench-consume", ns, f"BenchW2_{tag}_{r}", f"cpp_w3_{tag}_{r}",
                                              "--expect", args.messages + 1))
        if "W5" in only:
            await measure("W5cpp", "  C++ client: send_async 100 B (msgs/s)",
                          lambda r: cpp_bench("bench-send", ns, f"CppW5_{tag}_{r}", "--count", args.cpp_messages,
                                              "--mode", "async", "--body-size", 100))

    loads.append(os.getloadavg()[0])
    print()
    print(f"{'':7}{'workload':<52}{'median':>12}{'broker CPU':>12}{'client CPU':>12}  details (medians)")
    table = []
    for name, label, values, bcpu, ccpu, extra in rows:
        details = ", ".join(f"{k} {statistics.median(v):,.3f}" for k, v in extra.items())
        row = [name, label.strip(), f"{statistics.median(values):,.2f}", f"{statistics.median(bcpu):.0f}%",
               f"{statistics.median(ccpu):.0f}%", details]
        print(f"{name:<7}{label:<52}{row[2]:>12}{row[3]:>12}{row[4]:>12}  {details}")
        table.append(row)
    if args.record:
        path = save_table(args.record, title="Apogee's client against one broker (`benchmarks/client_bench.py`)",
                          columns=("", "workload", "median", "broker CPU", "client CPU", "details (medians)"),
                          rows=table, runs=args.runs, loads=loads)
        print(f"recorded {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namesrv", help="use a running cluster through this NameServer")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--sync-messages", type=int, default=20_000)
    parser.add_argument("--w4-rate", type=int, default=2000)
    parser.add_argument("--w4-seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W4")
    parser.add_argument("--cpp", action="store_true", help="also run the C++ client (.venv-interop) where it can")
    parser.add_argument("--cpp-sync-messages", type=int, default=5_000)
    parser.add_argument("--cpp-messages", type=int, default=20_000)
    parser.add_argument("--trace", action="store_true", help="W1, W2, W5 with enable_msg_trace (message traces)")
    parser.add_argument("--keep-futures", action="store_true",
                        help="W2 and W5 keep every future and check each result at the end (the peer harness's way)")
    parser.add_argument("--acl", action="store_true", help="W1 and W2 also against a broker with ACL on (signed)")
    parser.add_argument("--tls", action="store_true", help="W1 and W2 also over TLS (servers in permissive mode)")
    parser.add_argument("--busy-poll-us", type=int, default=0, metavar="US",
                        help="W1 and W2 also with busy polling of US microseconds on broker and producer")
    parser.add_argument("--record", metavar="NAME", help="save the medians as benchmarks/results/NAME.json "
                        "(the docs' figures: benchmarks/figures.py)")
    args = parser.parse_args()
    if args.namesrv:
        run(bench(args.namesrv, None, args))
        return
    with tempfile.TemporaryDirectory() as tmp:
        servers: list[ServerProcess] = []
        try:
            namesrv, broker = start_cluster(Path(tmp) / "plain", BROKER_CONF, servers)
            others: tuple[Target, ...] = ()
            if args.acl:
                acl_ns, acl_broker = start_cluster(Path(tmp) / "acl", BROKER_CONF + "aclEnable=true\n", servers,
                                                   acl_yml=ACL_YML)
                others += (Target("acl", acl_ns.addr, acl_broker.pid, ACL_OPTIONS),)
            if args.tls:
                certs = make_certs(Path(tmp) / "certs")
                tls_args = ("--tls-mode", "permissive", "--tls-cert", str(certs.server_cert),
                            "--tls-key", str(certs.server_key))
                tls_ns, tls_broker = start_cluster(Path(tmp) / "tls", BROKER_CONF, servers, tls_args=tls_args)
                tls = TlsClientConfig(enable=True, ca_file=str(certs.ca))
                others += (Target("tls", tls_ns.addr, tls_broker.pid, {"tls": tls}),)
            if args.busy_poll_us > 0:
                conf = BROKER_CONF + f"busyPollUs={args.busy_poll_us}\n"
                bp_ns, bp_broker = start_cluster(Path(tmp) / "busypoll", conf, servers)
                polling = RemotingConfig(busy_poll_us=args.busy_poll_us)
                others += (Target("busypoll", bp_ns.addr, bp_broker.pid, {"remoting": polling}),)
            run(bench(namesrv.addr, broker.pid, args, others))
        finally:
            for server in reversed(servers):
                server.close()


def start_cluster(
    home: Path, conf_text: str, servers: list[ServerProcess], acl_yml: str = "", tls_args: tuple[str, ...] = ()
) -> tuple[ServerProcess, ServerProcess]:
    """A NameServer and a broker under ``home`` (added to ``servers``, for closing); ``tls_args``:
    the TLS options of both."""
    home.mkdir(parents=True)
    conf = home / "broker.conf"
    conf.write_text(conf_text)
    if acl_yml:
        (home / "plain_acl.yml").write_text(acl_yml)  # beside broker.conf, where the broker looks
    namesrv = start_namesrv(home / "ns", *tls_args)
    servers.append(namesrv)
    broker = ServerProcess([
        "broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0", "--store-dir",
        str(home / "store"), "--broker-ip", "127.0.0.1", "--log-level", "WARNING", *tls_args,
    ]).start()
    servers.append(broker)
    print(f"namesrv {namesrv.addr}, broker {broker.addr}, broker pid {broker.pid}, broker.conf: "
          f"{conf_text.strip().replace(chr(10), ', ')}", flush=True)
    return namesrv, broker


if __name__ == "__main__":
    main()
