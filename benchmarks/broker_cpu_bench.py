"""The broker's CPU per request from clients that do not batch (issue 23, item 2).

Starts `apogee namesrv` and `apogee broker` (loopback only), then drives the broker with a
raw-frame load generator in a process of its own: every frame is encoded before the clock
starts, shaped as the Java 4.9 client builds it, and answers are counted by reading frame
lengths (and checking each answer's code is 0), so the generator costs far less per request
than the broker.  Workloads, each measured as broker CPU µs per request (from
/proc/PID/stat: every thread of the broker process) beside requests/s and the generator's
own CPU:

* ``send``   single SEND_MESSAGE_V2 with a 1 KiB body, pipelined: --inflight requests in
             flight over --connections connections (the Java client's async send: one frame
             per message, "m":"false", no client batching);
* ``pull``   PULL_MESSAGE of 32 messages pipelined across 8 queues of a backlog (the Java
             push consumer's header: sysFlag COMMIT_OFFSET|SUSPEND, no subscription in the
             pull, the subscription given by a HEART_BEAT on the same connection);
* ``send1``, ``pull1``  the same one at a time on one connection, for reference;
* ``cpp``    with --cpp N: N async sends (1 KiB) by the Apache RocketMQ C++ client
             (rocketmq==0.4.4 in .venv-interop, `make interop`), its rate and the broker's CPU
             per message beside the raw generator's (the client's startup and route lookups
             included, so run enough messages).

With several --src trees (e.g. a worktree of an older commit) one broker runs from each and
the workloads alternate between them in every run, so old and new code see the same load.
Prints medians of --runs runs and the load average the runs saw.

Run: .venv/bin/python benchmarks/broker_cpu_bench.py [--runs 5] [--sends 60000] [--pulls 6000] [--cpp 50000]
     .venv/bin/python benchmarks/broker_cpu_bench.py --src ../brokercpu-old/src --src src
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.figures import save_table  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

BODY = b"x" * 1024
JAVA_VERSION = 399  # RemotingCommand.version of a 4.9 Java client (MQVersion ordinal)
SEND_MESSAGE_V2, PULL_MESSAGE, HEART_BEAT, UPDATE_AND_CREATE_TOPIC = 310, 11, 34, 17
QUEUES = 8
PULL_BATCH = 32
PULL_DEPTH = 1024  # messages per queue of the pull topic: pulls cycle over them
SEND_TOPIC, PULL_TOPIC, GROUP = "CpuBenchSend", "CpuBenchPull", "CpuBenchConsumer"
SUB_VERSION = 1_700_000_000_000  # a subscription's version: the time it was made, in Java
_OK = b'{"code":0,"'  # how every answer's header starts when its code is SUCCESS
# How a NOTIFY_CONSUMER_IDS_CHANGED the broker sends (oneway) starts: not an answer.
_NOTIFY = b'{"code":40,'
_HEAD = 19  # length word, header-length word, then _OK


# --- frames, as the Java client writes them ------------------------------------------------------


def java_frame(code: int, opaque: int, ext: dict[str, str] | None, body: bytes = b"") -> bytes:
    """A request frame with the JSON header fastjson writes for a Java RemotingCommand
    (fields in name order, no remark, extFields values as strings)."""
    header: dict[str, object] = {"code": code}
    if ext is not None:
        header["extFields"] = ext
    header.update(flag=0, language="JAVA", opaque=opaque, serializeTypeCurrentRPC="JSON", version=JAVA_VERSION)
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def send_frame(topic: str, queue_id: int, i: int) -> bytes:
    """SEND_MESSAGE_V2 of one 1 KiB message as DefaultMQProducerImpl.sendKernelImpl fills its
    header: a..k and m ("m":"false" on every single send); properties TAGS, UNIQ_KEY, WAIT."""
    uniq = f"7F000001{os.getpid() & 0xFFFF:04X}18B4AAC2{i & 0xFFFFFFFF:08X}{i >> 32 & 0xFFFF:04X}"
    props = f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02"
    ext = {"a": "CpuBenchProducer", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    return java_frame(SEND_MESSAGE_V2, i & 0x7FFFFFFF, ext, BODY)


def pull_frame(topic: str, queue_id: int, offset: int, i: int) -> bytes:
    """PULL_MESSAGE as a Java push consumer sends it (PullAPIWrapper.pullKernelImpl): no
    subscription (postSubscriptionWhenPull is false), the committed offset riding along."""
    ext = {"consumerGroup": GROUP, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(PULL_BATCH), "sysFlag": "3", "commitOffset": str(offset),
           "suspendTimeoutMillis": "15000", "subVersion": str(SUB_VERSION), "expressionType": "TAG"}
    return java_frame(PULL_MESSAGE, i, ext)


def heartbeat_frame(topic: str) -> bytes:
    body = json.dumps({
        "clientID": f"127.0.0.1@{os.getpid()}", "producerDataSet": [],
        "consumerDataSet": [{
            "groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                     "subVersion": SUB_VERSION, "expressionType": "TAG",
                                     "classFilterMode": False}],
        }],
    }).encode()
    return java_frame(HEART_BEAT, 0, None, body)


def create_topic_frame(topic: str) -> bytes:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    return java_frame(UPDATE_AND_CREATE_TOPIC, 0, ext)


def workload_frames(kind: str, conn_index: int, count: int) -> list[bytes]:
    """The frames one connection cycles through (distinct UNIQ_KEYs, or every pull offset)."""
    if kind == "fill":  # the pull topic's backlog: PULL_DEPTH messages in each queue
        return [send_frame(PULL_TOPIC, i % QUEUES, i) for i in range(count)]
    if kind.startswith("send"):
        pool = min(count, 2048)
        return [send_frame(SEND_TOPIC, (conn_index + i) % QUEUES, conn_index << 40 | i) for i in range(pool)]
    return [pull_frame(PULL_TOPIC, q, off, i)
            for i, (off, q) in enumerate((off, q) for off in range(0, PULL_DEPTH - PULL_BATCH + 1, PULL_BATCH)
                                         for q in range(QUEUES))]


# --- the generator (its own process) ---------------------------------------------------------------


class _Conn:
    """One pipelining connection: keeps ``window`` requests in flight until ``total`` were
    answered; reads only frame lengths and the first bytes of each answer's header."""

    def __init__(self, addr: tuple[str, int], frames: list[bytes], total: int, window: int) -> None:
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frames, self.total, self.window = frames, total, window
        self.sent = self.done = self.errors = self.bytes = 0
        self.skip = 0  # bytes still to come of a frame whose head was checked (negative: not an answer)
        self.head = b""  # the first bytes of a frame, when a read ended inside them

    def call(self, frame: bytes) -> None:
        """One request answered before anything else goes (setup on this connection)."""
        self.sock.sendall(frame)
        while not self.consume(self.sock.recv(1 << 16)):
            pass

    def send_more(self, n: int) -> None:
        n = min(n, self.total - self.sent)
        if n <= 0:
            return
        frames, start = self.frames, self.sent % len(self.frames)
        chunk = frames[start : start + n]
        while len(chunk) < n:
            chunk += frames[: n - len(chunk)]
        self.sent += n
        self.sock.sendall(b"".join(chunk))

    def consume(self, data: bytes | memoryview) -> int:
        """Answers completed by ``data``."""
        if not data:
            raise ConnectionError("the broker closed the connection")
        self.bytes += len(data)
        end = len(data)
        i = abs(self.skip)  # negative: the rest of a frame that is not an answer
        if i > end:
            self.skip = i - end if self.skip > 0 else end - i
            return 0
        n = 1 if self.skip > 0 else 0
        self.skip = 0
        if self.head:
            need = _HEAD - len(self.head)
            head = self.head + data[i : i + need]
            if len(head) < _HEAD:
                self.head = head
                return n
            self.head = b""
            answer = self._answer(head[8:])
            i += (4 + int.from_bytes(head[:4], "big")) - (_HEAD - need)
            if i > end:
                self.skip = i - end if answer else -(i - end)
                return n
            n += answer
        while end - i >= _HEAD:
            answer = 1 if data[i + 8 : i + _HEAD] == _OK else self._answer(data[i + 8 : i + _HEAD])
            i += 4 + int.from_bytes(data[i : i + 4], "big")
            if i > end:
                self.skip = i - end if answer else -(i - end)
                return n
            n += answer
        if i < end:
            self.head = bytes(data[i:])
        return n

    def _answer(self, head: bytes | memoryview) -> int:
        """1 for an answer (an error unless SUCCESS), 0 for a request the broker sent."""
        if head == _OK:
            return 1
        if bytes(head).startswith(_NOTIFY):
            return 0
        self.errors += 1
        return 1


def generate(spec: dict[str, object]) -> None:
    """The generator process: connect, set up, say ready, wait for go, run, report JSON."""
    host, port = str(spec["host"]), int(spec["port"])  # type: ignore[call-overload]
    kind, count = str(spec["kind"]), int(spec["count"])  # type: ignore[call-overload]
    nconn, window = int(spec["connections"]), int(spec["window"])  # type: ignore[call-overload]
    conns = []
    for c in range(nconn):
        share = count // nconn + (1 if c < count % nconn else 0)
        conn = _Conn((host, port), workload_frames(kind, c, share), share, max(1, window // nconn))
        if kind.startswith("pull"):
            conn.call(heartbeat_frame(PULL_TOPIC))  # the subscription a Java pull relies on
        conns.append(conn)
    print(json.dumps(drive(conns)), flush=True)


def drive(conns: list[_Conn]) -> dict[str, float]:
    """Say ready, wait for go on stdin, keep every connection's window full until its share
    is answered; the run's wall time, CPU, answers, errors and bytes read."""
    print("ready", flush=True)
    sys.stdin.readline()
    sel = selectors.DefaultSelector()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for conn in conns:
        sel.register(conn.sock, selectors.EVENT_READ, conn)
        conn.send_more(conn.window)
    active = len(conns)
    buf = bytearray(1 << 20)  # one receive buffer: a fresh 1 MiB bytes per recv costs an mmap
    view = memoryview(buf)
    while active:
        for key, _ in sel.select():
            conn = key.data
            n = conn.consume(view[: conn.sock.recv_into(buf)])
            if n:
                conn.done += n
                conn.send_more(n)
                if conn.done >= conn.total:
                    sel.unregister(conn.sock)
                    active -= 1
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    for conn in conns:
        conn.sock.close()
    return {
        "wall": wall, "cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
        "done": sum(c.done for c in conns), "errors": sum(c.errors for c in conns),
        "bytes": sum(c.bytes for c in conns),
    }


# --- the driver -----------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system time so far of every thread of ``pid``, and of its main thread alone
    (the event loop; the others are the store's I/O thread and the default executor)."""
    times = []
    for path in (f"/proc/{pid}/stat", f"/proc/{pid}/task/{pid}/stat"):
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        times.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return times[0], times[1]


def run_generator(broker: ServerProcess, kind: str, count: int, connections: int, window: int) -> dict[str, float]:
    spec = {"host": broker.host, "port": broker.port, "kind": kind, "count": count,
            "connections": connections, "window": window}
    proc = subprocess.Popen([sys.executable, __file__, "--generate", json.dumps(spec)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {kind} generator did not start")
        (c0, l0), t0 = cpu_seconds(broker.pid), time.perf_counter()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        wall, (c1, l1) = time.perf_counter() - t0, cpu_seconds(broker.pid)
    finally:
        proc.stdin.close()
        proc.wait(30)
    if not line:
        raise RuntimeError(f"the {kind} generator failed (exit {proc.returncode})")
    out = json.loads(line)
    if out["errors"] or out["done"] != count:
        raise RuntimeError(f"{kind}: {out['errors']} answers were not SUCCESS, {out['done']} of {count} answered")
    return {"rate": count / out["wall"], "broker_us": (c1 - c0) / count * 1e6, "broker_pct": (c1 - c0) / wall * 100,
            "loop_us": (l1 - l0) / count * 1e6,
            "gen_us": out["cpu"] / count * 1e6, "bytes": out["bytes"] / count}


CPP_PYTHON = ROOT / ".venv-interop" / "bin" / "python"
CPP_CLIENT = ROOT / "tests" / "interop" / "clients" / "cpp_client.py"


def run_cpp(namesrv: ServerProcess, broker: ServerProcess, count: int) -> dict[str, float]:
    """The C++ client's pipelined (async) single sends, through the NameServer's route."""
    c0, l0 = cpu_seconds(broker.pid)
    t0 = time.perf_counter()
    out = subprocess.run(
        [str(CPP_PYTHON), str(CPP_CLIENT), "bench-send", namesrv.addr, SEND_TOPIC, "--count", str(count),
         "--mode", "async", "--body-size", str(len(BODY)), "--warmup", "100"],
        capture_output=True, text=True, timeout=600,
    )
    wall = time.perf_counter() - t0
    c1, l1 = cpu_seconds(broker.pid)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    summary = next((x for x in lines if x.get("event") == "bench"), None)
    if summary is None or summary["errors"]:
        raise RuntimeError(f"the C++ client failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    n = count + 100
    return {"rate": summary["rate"], "broker_us": (c1 - c0) / n * 1e6, "broker_pct": (c1 - c0) / wall * 100,
            "loop_us": (l1 - l0) / n * 1e6, "gen_us": float("nan"), "bytes": float("nan")}


def call(broker: ServerProcess, frame: bytes) -> None:
    """One setup request; its answer must be SUCCESS."""
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(frame)
        conn = _Conn.__new__(_Conn)
        conn.bytes = conn.errors = conn.skip = 0
        conn.head = b""
        while not conn.consume(sock.recv(1 << 16)):
            pass
        if conn.errors:
            raise RuntimeError("a setup request was refused")


def label(src: str) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", src, *args], capture_output=True, text=True).stdout.strip()
    return f"{git('rev-parse', '--short', 'HEAD')}{'+' if git('status', '--porcelain', '--', '.') else ''}"


# The medians table, printed and (--record) kept for the docs.
COLUMNS = ("workload", "broker", "req/s", "broker µs/req", "loop thread", "broker CPU", "generator µs/req",
           "bytes/answer")
RECORD_NOTES = ("send: single SEND_MESSAGE_V2 (1 KiB) pipelined; pull: PULL_MESSAGE of 32 pipelined over 8 queues; "
                "send1, pull1: one at a time; cpp: the Apache RocketMQ C++ client's async sends.  Issue 23's "
                "targets: <= 12 µs of broker CPU per single send, <= 20 µs per pull of 32.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sends", type=int, default=60_000, help="requests per pipelined send run")
    parser.add_argument("--pulls", type=int, default=6_000, help="requests per pipelined pull run")
    parser.add_argument("--serial", type=int, default=3_000, help="requests per one-at-a-time run")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=256, help="sends in flight, over all connections")
    parser.add_argument("--pull-inflight", type=int, default=32, help="pulls in flight, over all connections")
    parser.add_argument("--workloads", default="send,pull,send1,pull1")
    parser.add_argument("--cpp", type=int, default=0, metavar="N",
                        help="also N async sends by the C++ client (needs .venv-interop)")
    parser.add_argument("--src", action="append", help="run a broker from this source tree (repeat to compare)")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                        help="broker settings of one variant (repeat to compare, e.g. "
                             "--conf brokerStatsEnable=true --conf brokerStatsEnable=false)")
    parser.add_argument("--record", metavar="NAME", help="save the medians as benchmarks/results/NAME.json "
                        "(the docs' figures: benchmarks/figures.py); only for the checkout's own broker")
    args = parser.parse_args()
    if args.record and (args.src or args.conf):
        parser.error("--record keeps the figures of this checkout as it is: no --src or --conf")
    if args.generate:
        generate(json.loads(args.generate))
        return
    srcs = [str(Path(s).resolve()) for s in (args.src or [str(ROOT / "src")])]
    confs = [c.replace(",", "\n") for c in (args.conf or [""])]
    if len(srcs) > 1 and len(confs) > 1 and len(srcs) != len(confs):
        parser.error("give one --src, one --conf, or as many of each")
    variants = [  # (source tree, extra broker.conf lines, label)
        (src, conf, label(src) + (f" {conf.replace(chr(10), ',')}" if conf else ""))
        for src, conf in zip(srcs * (len(confs) if len(srcs) == 1 else 1),
                             confs * (len(srcs) if len(confs) == 1 else 1), strict=True)
    ]
    workloads = {
        "send": (args.sends, args.connections, args.inflight),
        "pull": (args.pulls, min(args.connections, args.pull_inflight), args.pull_inflight),
        "send1": (args.serial, 1, 1),
        "pull1": (args.serial, 1, 1),
    }
    chosen = [w for w in args.workloads.split(",") if w] + (["cpp"] if args.cpp else [])
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        namesrvs: list[ServerProcess] = []  # one per broker: a client's route names one broker
        brokers: list[ServerProcess] = []
        try:
            for n, (src, extra, name) in enumerate(variants):
                namesrv = start_namesrv(Path(tmp) / f"ns{n}")
                namesrvs.append(namesrv)
                conf = Path(tmp) / f"broker{n}.conf"
                conf.write_text(f"flushDiskType={args.flush}\nbrokerName=cpu{n}\n{extra}\n")
                broker = ServerProcess(
                    ["broker", "-n", namesrv.addr, "-c", str(conf), "--listen", "127.0.0.1:0",
                     "--store-dir", str(Path(tmp) / f"store{n}"), "--broker-ip", "127.0.0.1", "--log-level", "WARNING"],
                    env={"PYTHONPATH": src},
                ).start()
                brokers.append(broker)
                call(broker, create_topic_frame(SEND_TOPIC))
                call(broker, create_topic_frame(PULL_TOPIC))
                _fill_backlog(broker)
                print(f"broker {n}: {name} ({src}), pid {broker.pid}, {args.flush}")
            for run in range(args.runs):
                for kind in chosen:
                    for (_src, _extra, name), broker, namesrv in zip(variants, brokers, namesrvs, strict=True):
                        if kind == "cpp":
                            r = run_cpp(namesrv, broker, args.cpp)
                        else:
                            count, nconn, window = workloads[kind]
                            r = run_generator(broker, kind, count, nconn, window)
                        results.setdefault((kind, name), []).append(r)
                        loads.append(os.getloadavg()[0])
                        print(f"  run {run + 1} {kind:5} {name:9} {r['rate']:9,.0f} req/s  broker "
                              f"{r['broker_us']:6.1f} µs/req (loop {r['loop_us']:5.1f}; {r['broker_pct']:3.0f} % CPU)  "
                              f"generator {r['gen_us']:5.1f} µs/req", flush=True)
        finally:
            for server in (*brokers, *namesrvs):
                server.close()
    print(f"\nmedians of {args.runs} runs (load average 1 min during the runs: {min(loads):.1f}-{max(loads):.1f}, "
          f"{os.cpu_count()} cores)")
    rows = []
    for kind in chosen:
        for _src, _extra, name in variants:
            rs = results[(kind, name)]

            def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            rows.append([kind, name, f"{med('rate'):,.0f}", f"{med('broker_us'):.1f}", f"{med('loop_us'):.1f}",
                         f"{med('broker_pct'):.0f}%", "-" if kind == "cpp" else f"{med('gen_us'):.1f}",
                         "-" if kind == "cpp" else f"{med('bytes'):,.0f}"])
    widths = (8, 10, 9, 14, 11, 10, 17, 12)
    for row in (COLUMNS, *rows):
        print(" ".join(f"{c:{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    if args.record:
        path = save_table(args.record, title="Broker CPU per request from a non-batching load generator "
                          f"(`benchmarks/broker_cpu_bench.py`, {args.flush})",
                          columns=COLUMNS, rows=rows, runs=args.runs, loads=loads, notes=RECORD_NOTES)
        print(f"recorded {path}")


def _fill_backlog(broker: ServerProcess) -> None:
    """PULL_DEPTH messages in each queue of the pull topic, sent by the generator."""
    spec = {"host": broker.host, "port": broker.port, "kind": "fill", "count": QUEUES * PULL_DEPTH,
            "connections": 1, "window": 64}
    proc = subprocess.Popen([sys.executable, __file__, "--generate", json.dumps(spec)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate("go\n", timeout=120)
    result = json.loads(out.splitlines()[-1])
    if result["errors"] or result["done"] != QUEUES * PULL_DEPTH:
        raise RuntimeError(f"filling the pull topic failed: {result}")


if __name__ == "__main__":
    main()
